#!/usr/bin/env bash
# Issue 27 on one GPU: check_task on CUDA at 4096 envs for a robot, then Rlscale-Go1-Flat's env-step throughput at
# 4096, 16 384 and 32 768 envs, interleaved over REPEATS repeats (rlscale benchmark compare).
# Usage: tools/robots_gpu_throughput.sh OUT_DIR CHECK_TASK_ID [REPEATS]   (after sourcing tools/gpu_env.sh)
set -uo pipefail
out=${1:?output directory}
checked=${2:?task id for check_task}
repeats=${3:-5}
mkdir -p "$out"
timeout 300 python3 -m rlscale check_task "$checked" --device cuda --num_envs 4096 > "$out/check_task.log" 2>&1
echo "check_task exit $?"; tail -n 3 "$out/check_task.log"
timeout 420 python3 -m rlscale benchmark compare --repeats "$repeats" --output_dir /tmp/go1_throughput \
  --variant e4096="runtime --num_envs 4096" --variant e16384="runtime --num_envs 16384" \
  --variant e32768="runtime --num_envs 32768" \
  -- --task Rlscale-Go1-Flat --device cuda --warmup_steps 50 --num_steps 300 > "$out/compare.log" 2>&1
echo "compare exit $?"; tail -n 14 "$out/compare.log"
tar -czf "$out/go1_throughput.tgz" -C /tmp go1_throughput
