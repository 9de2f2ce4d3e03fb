#!/usr/bin/env bash
# Benchmarks of issue 4 (on the lent nvidia-h200-x2): training_multigpu at 1 and GPUS GPUs (default 2),
# runtime_multigpu and startup_multigpu at GPUS GPUs, Isaac-Cartpole with 4096 envs per rank.
# Usage: tools/gpu_benchmarks.sh OUT_DIR [LIBRARY...]   (training for the libraries given; default rsl_rl, plus the
# runtime and startup benchmarks when rsl_rl is among them). Bundles and logs land in OUT_DIR/benchmarks/.
set -uo pipefail
out=${1:?output directory}
shift
libraries=${*:-rsl_rl}
gpus=${GPUS:-2}
bundles=$out/benchmarks
mkdir -p "$bundles"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
task=Isaac-Cartpole
common=(--task "$task" --num_envs 4096 --log_root /tmp/rlscale-bench)

bench() {  # label, then benchmark arguments
  local label=$1; shift
  timeout 300 python3 -m rlscale benchmark "$@" > "$bundles/$label.log" 2>&1
  echo "$label exit $? $(grep -m1 -i 'fps\|throughput' "$bundles/$label.log" | cut -c1-160)"
}

for library in $libraries; do
  for ws in 1 "$gpus"; do
    bench "training_${library}_${ws}gpu" training_multigpu --num_gpus $ws --rl_library $library "${common[@]}" \
      --output_path "$bundles/training_multigpu_${task}_${library}_${ws}x4096_seed42.json"
  done
done
[[ " $libraries " == *" rsl_rl "* ]] || exit 0
bench "runtime_${gpus}gpu" runtime_multigpu --num_gpus "$gpus" "${common[@]}" \
  --output_path "$bundles/runtime_multigpu_${task}_none_${gpus}x4096_seed42.json"
bench "startup_${gpus}gpu" startup_multigpu --num_gpus "$gpus" --rl_library rsl_rl "${common[@]}" \
  --output_path "$bundles/startup_multigpu_${task}_rsl_rl_${gpus}x4096_seed42.json"
