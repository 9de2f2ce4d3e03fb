#!/usr/bin/env bash
# Issue 27 on one GPU: a timed rsl_rl learning run of a robot (checkpoints every 25 iterations) and the evaluation of
# its last checkpoint (rlscale evaluate, 1000 envs). check_task on CUDA: tools/robots_gpu_throughput.sh.
# Usage: tools/robots_gpu.sh OUT_DIR TASK TRAIN_SECONDS [NUM_ENVS]   (after sourcing tools/gpu_env.sh)
set -uo pipefail
out=${1:?output directory}
task=${2:?task id}
train_s=${3:?seconds of training}
envs=${4:-4096}
runs=/tmp/robots/runs
mkdir -p "$out" "$runs"
python3 -c "import jax, mujoco, torch; print('jax', jax.__version__, 'mujoco', mujoco.__version__, 'torch', torch.__version__)"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout --signal=INT --kill-after=60 "$train_s" python3 -m rlscale train --task "$task" --rl_library rsl_rl \
  --num_envs "$envs" --max_iterations 3000 --seed 1 --device cuda --checkpoint_interval 25 --log_root "$runs" \
  > "$out/train.log" 2>&1
echo "train exit $?"; tail -n 3 "$out/train.log"
run=$(dirname "$(ls -t "$runs"/rsl_rl/*/*/manifest.json | head -n 1)")
cp "$run/manifest.json" "$out/train_manifest.json"
cp "$run"/events.out.tfevents.* "$out/" 2>/dev/null  # rsl_rl's TensorBoard log: every Episode_Reward/ and Metrics/
checkpoint=$(ls "$run"/model_*.pt | sort -V | tail -n 1)
echo "evaluating $checkpoint"
timeout 300 python3 -m rlscale evaluate --checkpoint "$checkpoint" --num_envs 1000 --device cuda \
  --output "$out/evaluation.json" > "$out/evaluate.log" 2>&1
echo "evaluate exit $?"; tail -n 8 "$out/evaluate.log"
