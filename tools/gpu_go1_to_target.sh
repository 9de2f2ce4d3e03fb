#!/usr/bin/env bash
# Issue 27 on one GPU: wall time from process start to a tracking level for rlscale's rsl_rl on Rlscale-Go1-Flat,
# measured like tools/brax_go1_anchor.py measures Brax PPO: a timed training run with a checkpoint every INTERVAL
# iterations, then `rlscale evaluate` (deterministic, 1000 envs, the fixed evaluation commands) of every EVERY-th
# checkpoint, all in one process. Each checkpoint's modification time minus the process start is its time since start (imports and
# compile included; the evaluations run after training, so they take none of it).
# Usage: tools/gpu_go1_to_target.sh OUT_DIR NUM_ENVS TRAIN_SECONDS [INTERVAL] [EVERY]   (after tools/gpu_env.sh)
set -uo pipefail
out=${1:?output directory}
envs=${2:?envs}
train_s=${3:?seconds of training}
interval=${4:-10}
every=${5:-2}
runs=/tmp/to_target/$envs
mkdir -p "$out" "$runs"
started=$(date +%s.%N)
timeout --signal=INT --kill-after=60 "$train_s" python3 -m rlscale train --task Rlscale-Go1-Flat --rl_library rsl_rl \
  --num_envs "$envs" --max_iterations 3000 --seed 1 --device cuda --checkpoint_interval "$interval" \
  --log_root "$runs" > "$out/train.log" 2>&1
echo "train exit $?"; tail -n 2 "$out/train.log"
run=$(dirname "$(ls -t "$runs"/rsl_rl/*/*/manifest.json | head -n 1)")
cp "$run/manifest.json" "$out/train_manifest.json"
echo "{\"process_start_unix_s\": $started}" > "$out/start.json"
mkdir -p "$out/evaluations"
checkpoints=$(ls "$run"/model_*.pt | sort -V | awk "NR % $every == 0")
for checkpoint in $checkpoints; do stat -c '%.9Y' "$checkpoint" > "$out/evaluations/$(basename "$checkpoint" .pt).mtime"; done
timeout 400 python3 -m rlscale evaluate --checkpoint $checkpoints --num_envs 1000 --device cuda \
  --output "$out/evaluations/{checkpoint}.json" > "$out/evaluations/evaluate.log" 2>&1
echo "evaluate exit $?"; grep -h -o '"lin_vel_error_mps": [0-9.]*' "$out"/evaluations/*.json | tr '\n' ' '; echo
