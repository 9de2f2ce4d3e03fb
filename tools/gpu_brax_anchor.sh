#!/usr/bin/env bash
# Issue 27 on one GPU, the anchor. throughput: Brax PPO on MuJoCo Playground's Go1JoystickFlatTerrain at its own
# 8192 envs (tools/brax_go1_anchor.py --throughput_only) and rlscale's rsl_rl training benchmark of Rlscale-Go1-Flat
# at 8192 envs, REPEATS times each, interleaved with the order swapped every repeat. to_target: one Brax PPO run of
# 60 M env steps with the tracking error evaluated every 10 M, then tools/gpu_go1_to_target.sh for rlscale at ENVS.
# Usage: tools/gpu_brax_anchor.sh OUT_DIR throughput [REPEATS]  |  tools/gpu_brax_anchor.sh OUT_DIR to_target [ENVS]
# (after sourcing tools/gpu_env.sh; carry .whl_brax from tools/brax_wheels.sh)
set -uo pipefail
out=${1:?output directory}
part=${2:?throughput or to_target}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl_brax/*.whl
mkdir -p "$out"
brax() { timeout -s TERM "$1" python3 tools/brax_go1_anchor.py "${@:2}"; }
case "$part" in
throughput)
  repeats=${3:-5}
  mkdir -p "$out/throughput"
  for ((r = 0; r < repeats; r++)); do
    for which in $([ $((r % 2)) = 0 ] && echo "brax rlscale" || echo "rlscale brax"); do
      if [ "$which" = brax ]; then
        brax 200 --throughput_only --num_timesteps 9830400 --seed $((r + 1)) \
          --output "$out/throughput/brax_repeat$r.json" > "$out/throughput/brax_repeat$r.log" 2>&1
      else
        timeout 150 python3 -m rlscale benchmark training_multigpu --num_gpus 1 --task Rlscale-Go1-Flat \
          --rl_library rsl_rl --device cuda --num_envs 8192 --max_iterations 10 --warmup_iterations 2 \
          --seed $((r + 1)) --output_path "$out/throughput/rlscale_repeat$r.json" \
          > "$out/throughput/rlscale_repeat$r.log" 2>&1
      fi
      echo "repeat $r $which exit $?"
    done
  done
  ;;
to_target)
  envs=${3:-16384}
  brax 330 --num_timesteps 60000000 --num_evals 7 --output "$out/brax_to_target.json" > "$out/brax_to_target.log" 2>&1
  echo "brax exit $?"; tail -n 4 "$out/brax_to_target.log"
  bash "$(dirname "$0")/gpu_go1_to_target.sh" "$out/rlscale_to_target_$envs" "$envs" 100 20 1
  ;;
*) echo "unknown part $part" >&2; exit 2 ;;
esac
