#!/usr/bin/env bash
# Rlscale-Ant on a GPU host with two GPUs or more (issue 10, on the lent nvidia-h200-x2): env-step throughput, one GPU
# per JAX process, the library configs on CUDA, and a long rsl_rl run for the learning curve. Results are packed into
# OUT_DIR/ant.tgz. GPUS (default 2) sets the ranks of the multi-GPU run.
# Usage: tools/gpu_ant.sh OUT_DIR LEARNING_SECONDS   (after sourcing tools/gpu_env.sh)
set -uo pipefail
out=${1:?output directory}
learning_s=${2:?seconds for the learning run}
gpus=${GPUS:-2}
work=/tmp/ant && mkdir -p "$work"/{bundles,runs,smi}
cd_root=$PWD

python3 -c "import jax, mujoco, torch; print('jax', jax.__version__, 'mujoco', mujoco.__version__, 'torch', torch.__version__)"
echo "== runtime benchmark, one GPU per size (random actions, no policy)"
for pair in 0:4096 1:16384; do
  gpu=${pair%%:*} envs=${pair##*:}
  CUDA_VISIBLE_DEVICES=$gpu python3 -m rlscale benchmark runtime --task Rlscale-Ant --num_envs "$envs" --device cuda \
    --warmup_steps 50 --num_steps 1000 --output_path "$work/bundles/runtime_envs$envs.json" \
    > "$work/runtime_envs$envs.log" 2>&1 &
done
wait
tail -n 3 "$work"/runtime_envs*.log

echo "== $gpus ranks, one GPU each: which processes hold memory on which GPU"
python3 -m rlscale train_multigpu --num_gpus "$gpus" --task Rlscale-Ant --num_envs 4096 --max_iterations 30 \
  --device cuda --log_root "$work/runs/ws$gpus" > "$work/ws$gpus.log" 2>&1 &
launcher=$!
for i in $(seq 1 60); do
  sleep 1
  nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader > "$work/smi/apps_$i.csv" 2>&1
  kill -0 $launcher 2>/dev/null || break
done
wait $launcher; echo "ws$gpus exit $?"
nvidia-smi --query-gpu=index,uuid --format=csv,noheader > "$work/smi/gpus.csv"
tail -n 2 "$work/ws$gpus.log"

echo "== learning run (rsl_rl, GPU 0) beside the rl_games and skrl configs (GPU 1)"
CUDA_VISIBLE_DEVICES=0 timeout --signal=TERM --kill-after=30 "$learning_s" python3 -m rlscale train --task Rlscale-Ant \
  --rl_library rsl_rl --num_envs 4096 --max_iterations 1500 --seed 1 --device cuda --log_root "$work/runs/learning" \
  > "$work/learning.log" 2>&1 &
learner=$!
for library in rl_games skrl; do
  CUDA_VISIBLE_DEVICES=1 timeout --signal=TERM --kill-after=30 $(( learning_s / 2 - 10 )) python3 -m rlscale train \
    --task Rlscale-Ant --rl_library $library --num_envs 4096 --max_iterations 300 --seed 1 --device cuda \
    --log_root "$work/runs/$library" > "$work/$library.log" 2>&1
  echo "$library exit $?"; grep "\[rlscale\]" "$work/$library.log" | tail -n 2
done
wait $learner; echo "learning exit $?"
grep "\[rlscale\]" "$work/learning.log" | tail -n 3
ps -eo pid,cmd | grep -E "rlscale|torchrun" | grep -v grep || echo "no rank left"

# Run directories without the intermediate checkpoints (the final one and the TensorBoard events are enough).
find "$work/runs" -name "model_*.pt" | sort -V | head -n -3 | xargs -r rm -f
find "$work/runs" -name "agent_*.pt" -o -name "*.pth" | sort -V | head -n -3 | xargs -r rm -f
cd /tmp && tar czf "$out/ant.tgz" ant && cd "$cd_root" || exit 1
du -sh "$out/ant.tgz"
