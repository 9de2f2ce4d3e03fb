#!/usr/bin/env bash
# Issue 27 on one GPU: Rlscale-Go1-Flat's 32 768-env runtime benchmark three times (did the process exit cleanly?),
# then tools/robots_gpu.sh for Rlscale-G1-Flat.
# Usage: tools/robots_gpu_g1.sh OUT_DIR TRAIN_SECONDS   (after sourcing tools/gpu_env.sh)
set -uo pipefail
out=${1:?output directory}
train_s=${2:?seconds of training}
mkdir -p "$out"
for repeat in 0 1 2; do
  python3 -m rlscale benchmark runtime --task Rlscale-Go1-Flat --device cuda --num_envs 32768 --warmup_steps 50 \
    --num_steps 300 --seed "$repeat" --output_path "/tmp/exit_check_$repeat.json" > "/tmp/exit_check_$repeat.log" 2>&1
  echo "32768-env runtime repeat $repeat exit $? $(grep -o 'env-step throughput [0-9,]*' "/tmp/exit_check_$repeat.log")"
done
bash "$(dirname "$0")/robots_gpu.sh" "$out" Rlscale-G1-Flat "$train_s" 4096
