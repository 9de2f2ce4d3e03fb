#!/usr/bin/env bash
# Issue 27 on one GPU, the anchor. throughput: Brax PPO on MuJoCo Playground's Go1JoystickFlatTerrain at its own
# 8192 envs (tools/brax_go1_anchor.py --throughput_only) and rlscale's rsl_rl training benchmark of Rlscale-Go1-Flat
# at 8192 envs, REPEATS times each, interleaved with the order swapped every repeat. to_target: one Brax PPO run of
# 50 M env steps with the tracking error evaluated every 10 M, then tools/gpu_go1_to_target.sh for rlscale at ENVS.
# Everything goes into one archive, OUT_DIR/<part>.tgz, written when the part ends or its SECONDS run out (no run
# starts after that): the device tool returns only a few files per call, and nothing from a call it had to kill.
# Usage: tools/gpu_brax_anchor.sh OUT_DIR SECONDS throughput [REPEATS]  |  ... OUT_DIR SECONDS to_target [ENVS]
# (after sourcing tools/gpu_env.sh; carry .whl_brax from tools/brax_wheels.sh). A Brax run needs about 110-150 s
# before its first training step (compilation, cache or not) and trains about 0.63 M env steps/s after it.
set -uo pipefail
archive=${1:?output directory}
seconds=${2:?seconds this call may run}
part=${3:?throughput or to_target}
deadline=$((SECONDS + seconds))
out=/tmp/brax_anchor/$part
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl_brax/*.whl
mkdir -p "$out" "$archive"
trap 'tar czf "$archive/$part.tgz" -C /tmp/brax_anchor "$part"' EXIT
left() { echo $((deadline - SECONDS)); }
brax() { timeout -s TERM "$1" python3 tools/brax_go1_anchor.py "${@:2}"; }
case "$part" in
throughput)
  repeats=${4:-5}
  mkdir -p "$out/throughput"
  for ((r = 0; r < repeats; r++)); do
    for which in $([ $((r % 2)) = 0 ] && echo "brax rlscale" || echo "rlscale brax"); do
      [ "$(left)" -gt 200 ] || { echo "repeat $r $which: no time left"; continue; }
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
  envs=${4:-16384}
  brax $(($(left) - 240)) --num_timesteps 50000000 --num_evals 6 --output "$out/brax_to_target.json" > "$out/brax_to_target.log" 2>&1
  echo "brax exit $?"; tail -n 4 "$out/brax_to_target.log"
  bash "$(dirname "$0")/gpu_go1_to_target.sh" "$out/rlscale_to_target_$envs" "$envs" 120 20 1
  ;;
*) echo "unknown part $part" >&2; exit 2 ;;
esac
