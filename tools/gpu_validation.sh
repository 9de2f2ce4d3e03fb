#!/usr/bin/env bash
# GPU validation of `rlscale train` (1 GPU) and `rlscale train_multigpu` (GPUS GPUs, default 2) on the four library
# paths, as run on the lent nvidia-h200-x2 machine for docs/validation.md. Usage: tools/gpu_validation.sh OUT_DIR
# Expects the wheels of tools' README installed on PYTHONPATH beforehand (the machine has no network).
set -uo pipefail
out=${1:?output directory}
mkdir -p "$out"
gpus=${GPUS:-2}
second=$(( gpus > 1 ? 1 : 0 ))  # the GPU of the second pair of one-GPU paths
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
logs=/tmp/rlscale-validation
task=${TASK:-Isaac-Cartpole}
paths=("rsl_rl torch" "rl_games torch" "skrl torch" "skrl jax")

train_one_gpu() {  # gpu library framework
  CUDA_VISIBLE_DEVICES=$1 timeout 300 python3 -m rlscale train --task "$task" --num_envs 4096 \
    --rl_library "$2" --ml_framework "$3" --log_root "$logs/1gpu" > "$out/1gpu_$2_$3.log" 2>&1
  echo "1gpu $2 $3 exit $?"
}

nvidia-smi --query-gpu=index,name,memory.total --format=csv
# One GPU per path, two paths at a time (one on each of two GPUs).
(train_one_gpu 0 rsl_rl torch; train_one_gpu 0 rl_games torch) &
(train_one_gpu "$second" skrl torch; train_one_gpu "$second" skrl jax) &
wait
timeout 120 python3 -m rlscale nccl_probe --num_gpus "$gpus" > "$out/nccl_probe.log" 2>&1
echo "nccl_probe exit $?"
for path in "${paths[@]}"; do
  set -- $path
  timeout 400 python3 -m rlscale train_multigpu --num_gpus "$gpus" --task "$task" --num_envs 4096 \
    --rl_library "$1" --ml_framework "$2" --log_root "$logs/${gpus}gpu" > "$out/${gpus}gpu_$1_$2.log" 2>&1
  echo "${gpus}gpu $1 $2 exit $?"
done
python3 - "$logs" "$out/validation_summary.json" <<'PY'
import json, sys, pathlib
rows = []
for path in sorted(pathlib.Path(sys.argv[1]).rglob("manifest.json")):
    m = json.loads(path.read_text())
    if m.get("rank", 0) != 0:
        continue
    rows.append({key: m.get(key) for key in ("status", "world_size", "gpu_name", "num_envs", "iterations_completed",
        "final_mean_episode_length", "final_mean_return", "wall_time_s", "rank_param_digests", "run_dir")}
        | {"rl_library": m["args"]["rl_library"], "ml_framework": m["args"]["ml_framework"],
           "max_episode_length_reached_at": next((r["iteration"] for r in m.get("iterations", [])
                                                  if (r["mean_episode_length"] or 0) >= 290), None)})
json.dump(rows, open(sys.argv[2], "w"), indent=1)
for r in rows:
    same = len(set(r["rank_param_digests"] or [])) == 1
    print(f"{r['world_size']}gpu {r['rl_library']:8} {r['ml_framework']:5} {r['status']:9} ep_len {r['final_mean_episode_length']} "
          f"its {r['iterations_completed']} wall {r['wall_time_s'] or 0:.1f}s digests_equal {same} first>=290 at {r['max_episode_length_reached_at']}")
PY
