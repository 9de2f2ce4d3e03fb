#!/usr/bin/env bash
# Rlscale-G1-Flat on one GPU: wall time from process start to the evaluated tracking target (≤ 0.35 m/s linear error,
# < 10 % falls). A timed rsl_rl run with a checkpoint every INTERVAL iterations, then one `rlscale evaluate` process
# (deterministic, 1000 envs, the fixed evaluation commands) for the last checkpoint and those 100 and 200 iterations
# before it, the latest first, so that a short evaluation budget still yields the one that matters. Each checkpoint's
# modification time minus start.json's is its time since process start (imports and compile included). Arguments after
# INTERVAL go to `rlscale train` (env.FIELD=VALUE, --agent KEY=VALUE). The run's manifest (every iteration's metrics)
# and TensorBoard log are copied beside the evaluations.
# Usage: tools/gpu_g1_to_target.sh OUT_DIR NUM_ENVS TRAIN_SECONDS EVALUATE_SECONDS [INTERVAL [TRAIN_ARGS...]]
#   (after sourcing tools/gpu_env.sh)
set -uo pipefail
out=${1:?output directory}
envs=${2:?envs}
train_s=${3:?seconds of training}
evaluate_s=${4:?seconds of evaluation}
interval=${5:-25}
shift $(( $# < 5 ? $# : 5 ))
runs="/tmp/g1_to_target/$(basename "$out")"  # checkpoints stay out of OUT_DIR
mkdir -p "$out/evaluations" "$runs"
echo "{\"process_start_unix_s\": $(date +%s.%N)}" > "$out/start.json"
timeout --signal=INT --kill-after=30 "$train_s" python3 -m rlscale train --task Rlscale-G1-Flat --rl_library rsl_rl \
  --num_envs "$envs" --max_iterations 3000 --seed 1 --device cuda --checkpoint_interval "$interval" \
  --log_root "$runs" "$@" > "$out/train.log" 2>&1
echo "train exit $?"; tail -n 2 "$out/train.log"
run=$(dirname "$(ls -t "$runs"/rsl_rl/*/*/manifest.json | head -n 1)")
cp "$run/manifest.json" "$out/train_manifest.json"
cp "$run"/events.out.tfevents.* "$out/" 2>/dev/null
checkpoints=$(ls "$run"/model_*.pt | sort -V | tac | awk "NR == 1 || NR == 1 + int(100 / $interval) || NR == 1 + int(200 / $interval)")
for checkpoint in $checkpoints; do stat -c '%.9Y' "$checkpoint" > "$out/evaluations/$(basename "$checkpoint" .pt).mtime"; done
timeout "$evaluate_s" python3 -m rlscale evaluate --checkpoint $checkpoints --num_envs 1000 --device cuda \
  --output "$out/evaluations/{checkpoint}.json" > "$out/evaluations/evaluate.log" 2>&1
echo "evaluate exit $?"
for result in "$out"/evaluations/*.json; do
  [ -e "$result" ] || continue
  name=$(basename "$result" .json)
  since=$(python3 -c "import json; print(round($(cat "$out/evaluations/$name.mtime") - json.load(open('$out/start.json'))['process_start_unix_s']))")
  echo "$name ${since}s since start: $(python3 -c "import json; s = json.load(open('$result'))['summary']; print(f\"{s['lin_vel_error_mps']:.3f} m/s, {s['ang_vel_error_radps']:.3f} rad/s, {100 * s['fall_rate']:.1f} % falls\")")"
done
