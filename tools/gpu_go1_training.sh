#!/usr/bin/env bash
# Issue 27 on one GPU: Rlscale-Go1-Flat's rsl_rl training throughput at 4096, 8192, 16 384 and 32 768 envs,
# interleaved over REPEATS repeats (rlscale benchmark compare, order rotated); then a torch-profiler breakdown of
# a few 16 384-env iterations (tools/profile_training.py); then one 32 768-env runtime benchmark under
# faulthandler, whose dump shows where a process that aborts at exit is (docs/robots.md, "Speed").
# Usage: tools/gpu_go1_training.sh OUT_DIR [REPEATS]   (after sourcing tools/gpu_env.sh)
set -uo pipefail
out=${1:?output directory}
repeats=${2:-5}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
variants=()
for envs in 4096 8192 16384 32768; do
  variants+=(--variant "e$envs=training_multigpu --num_gpus 1 --num_envs $envs")
done
timeout 560 python3 -m rlscale benchmark compare --repeats "$repeats" --base_seed 1 --run_timeout_s 120 \
  --output_dir /tmp/go1_training "${variants[@]}" \
  -- --task Rlscale-Go1-Flat --rl_library rsl_rl --device cuda --max_iterations 10 --warmup_iterations 2 \
  > "$out/compare.log" 2>&1
echo "compare exit $?"; tail -n 16 "$out/compare.log"
tar -czf "$out/go1_training.tgz" -C /tmp go1_training
timeout 120 python3 tools/profile_training.py --out "$out/profile_16384" --first 5 --count 3 -- \
  --task Rlscale-Go1-Flat --rl_library rsl_rl --num_envs 16384 --max_iterations 9 --device cuda \
  --log_root /tmp/go1_profile > "$out/profile_16384.log" 2>&1
echo "profile exit $?"; tail -n 12 "$out/profile_16384.log"
rm -f "$out"/profile_16384/*_trace.json  # Chrome traces: tens of MB, the tables and summaries say what they hold
timeout 120 python3 -X faulthandler -m rlscale benchmark runtime --task Rlscale-Go1-Flat --device cuda \
  --num_envs 32768 --warmup_steps 50 --num_steps 300 --seed 1 --output_path /tmp/exit_check.json \
  > "$out/exit_check_32768.log" 2>&1
echo "32768-env runtime exit $?"; tail -n 30 "$out/exit_check_32768.log"
