#!/usr/bin/env bash
# Issue 21 on a GPU host (the lent nvidia-h200-x2): each speed lever and the rank placement against its baseline with
# `rlscale benchmark compare` (variants interleaved, order rotated, 5 repeats, one seed per repeat), Isaac-Cartpole-
# Direct with Isaac Lab's agent configs. Each part writes OUT/<part>/<comparison>/ (bundles, logs, comparison.md).
# Usage: tools/gpu_round2.sh OUT PART...   (after sourcing tools/gpu_env.sh)
# NUM_ENVS (default 4096) sets the envs per GPU of the comparisons, whose folders then end in _<NUM_ENVS>; GPUS
# (default 2) the GPUs of the placement part.
#   rsl_rl      rsl_rl's levers at 1 GPU, NUM_ENVS envs: torch.compile, mixed precision, TF32
#   skrl        skrl's mixed precision at 1 GPU, NUM_ENVS envs
#   rl_games    rl_games' torch.compile and mixed precision at 1 GPU, NUM_ENVS envs
#   rsl_rl_nan  rsl_rl's per-step NaN check (runner check_for_nan) on and off at 1 GPU, NUM_ENVS envs
#   startup     process start to first iteration by phase, warm cache, for each of $STARTUP_LIBS (default rsl_rl):
#               one run to warm the cache, then $REPEATS; and where rsl_rl's import spends its time (-X importtime)
#   placement1  1 GPU, NUM_ENVS envs, rsl_rl: the plain process against one rank under the launcher bound (the
#               default), unbound, and with one CPU thread
#   placement   GPUS GPUs, NUM_ENVS envs per GPU, rsl_rl: one GPU (the efficiency's baseline), GPUS with CPU binding,
#               GPUS without it, GPUS with one CPU thread per rank
set -uo pipefail
out=${1:?output directory}
shift
mkdir -p "$out"
repeats=${REPEATS:-5}
envs=${NUM_ENVS:-4096}
gpus=${GPUS:-2}
many=$([ "$gpus" = 2 ] && echo two || echo "$gpus")_gpus  # the variants' names at 2 GPUs as before
suffix=$([ "$envs" = 4096 ] || echo "_$envs")
common=(--task Isaac-Cartpole-Direct --num_envs "$envs" --device cuda --max_iterations 12 --warmup_iterations 3
  --log_root /tmp/round2_runs)

compare() { # NAME RUN_TIMEOUT_S COMMON_ARGS... -- VARIANTS... (each "--variant" "SPEC")
  local name=$1$suffix timeout_s=$2
  shift 2
  local args=() variants=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  variants=("$@")
  local started=$(date +%s)
  python3 -m rlscale benchmark compare --repeats "$repeats" --base_seed 1 --run_timeout_s "$timeout_s" \
    --output_dir "$out/$name" "${variants[@]}" -- "${common[@]}" "${args[@]}" > "$out/$name.log" 2>&1
  echo "== $name: exit $? in $(( $(date +%s) - started )) s"
  cat "$out/$name/comparison.md" 2>/dev/null || tail -n 5 "$out/$name.log"
}

for part in "$@"; do
  case $part in
    rsl_rl)
      compare rsl_rl_levers 180 --rl_library rsl_rl -- \
        --variant "eager=training" \
        --variant "compile_default=training agent.torch_compile_mode=default" \
        --variant "mixed_precision=training agent.algorithm.use_mixed_precision=true" \
        --variant "tf32=training --tf32" ;;
    skrl)
      compare skrl_levers 120 --rl_library skrl -- \
        --variant "base=training" \
        --variant "mixed_precision=training agent.agent.mixed_precision=true" ;;
    rl_games)
      compare rl_games_levers 180 --rl_library rl_games -- \
        --variant "base=training" \
        --variant "compile_default=training agent.params.config.torch_compile=default" \
        --variant "mixed_precision=training agent.params.config.mixed_precision=true" ;;
    rsl_rl_nan)
      compare rsl_rl_nan_check 180 --rl_library rsl_rl -- \
        --variant "nan_check=training" \
        --variant "no_nan_check=training agent.check_for_nan=false" ;;
    startup)
      mkdir -p "$out/startup"
      python3 -X importtime -c "import rlscale.rl.rsl_rl" 2> "$out/startup/importtime.txt"
      for library in ${STARTUP_LIBS:-rsl_rl}; do
        mkdir -p "$out/startup/$library"
        for r in $(seq 0 "$repeats"); do
          python3 -m rlscale benchmark startup --task Isaac-Cartpole-Direct --rl_library "$library" --num_envs 4096 \
            --device cuda --seed $((r + 1)) --log_root /tmp/round2_runs \
            --output_path "$out/startup/$library/repeat$r.json" > "$out/startup/$library/repeat$r.log" 2>&1
          echo "== startup $library repeat $r (0 warms the cache): exit $?"
        done
      done ;;
    placement1)
      compare rsl_rl_placement_1gpu 120 --rl_library rsl_rl -- \
        --variant "plain=training" \
        --variant "launched_bound=training_multigpu --num_gpus 1" \
        --variant "launched_unbound=training_multigpu --num_gpus 1 --cpu_binding none" \
        --variant "launched_one_thread=training_multigpu --num_gpus 1 --cpu_threads 1" ;;
    placement)
      compare rsl_rl_placement 120 --rl_library rsl_rl -- \
        --variant "one_gpu=training" \
        --variant "${many}_bound=training_multigpu --num_gpus $gpus" \
        --variant "${many}_unbound=training_multigpu --num_gpus $gpus --cpu_binding none" \
        --variant "${many}_one_thread=training_multigpu --num_gpus $gpus --cpu_threads 1" ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
ps -eo pid,cmd | grep -E "rlscale|torchrun" | grep -v grep || echo "no rank left"
