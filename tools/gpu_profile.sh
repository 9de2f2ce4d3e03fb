#!/usr/bin/env bash
# Issue 6 profiling on a GPU host (the lent H200): env-step cost eager vs CUDA graph, torch-profiler breakdown of
# training iterations per library (1 GPU) and for rsl_rl on GPUS GPUs (default 2), and the import cost behind startup.
# Usage: tools/gpu_profile.sh OUT_DIR
set -uo pipefail
out=${1:?output directory}
mkdir -p "$out"
gpus=${GPUS:-2}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
train=(--task Isaac-Cartpole --log_root /tmp/rlscale-profile)

echo "== step timing"; python3 tools/step_timing.py --num_envs 4096 65536 2>&1 | tee "$out/step_timing.jsonl"
echo "== imports"
python3 -X importtime -c "import rlscale.rl.rsl_rl, rlscale.rl.rl_games, rlscale.rl.skrl" 2> "$out/importtime.txt"
sort -t'|' -k2 -n "$out/importtime.txt" | tail -25
python3 - <<'PY' 2>&1 | tee "$out/import_phases.txt"
import time
t = time.perf_counter(); import torch; a = time.perf_counter()
torch.cuda.init(); torch.zeros(1, device="cuda"); b = time.perf_counter()
import tensordict; c = time.perf_counter()
import rsl_rl.runners; d = time.perf_counter()
print(f"torch {a-t:.2f}s  cuda_init {b-a:.2f}s  tensordict {c-b:.2f}s  rsl_rl {d-c:.2f}s")
PY
for library in rsl_rl rl_games skrl; do
  for graph in "" --no_cuda_graph; do
    label=${library}_1gpu_4096${graph:+_eager}
    echo "== $label"
    timeout 150 python3 tools/profile_training.py --out "$out/$label" --first 5 --count 3 -- "${train[@]}" \
      --rl_library $library --num_envs 4096 --max_iterations 25 --device cuda $graph > "$out/$label.log" 2>&1
    echo "exit $?"; grep -A3 '"kernel_launches' "$out/$label.log"; grep '"update_s\|"collection_s\|env_step_host' "$out/$label.log" | head -3
  done
done
for envs in 4096 65536; do
  label=rsl_rl_${gpus}gpu_$envs
  echo "== $label"
  timeout 150 python3 -m torch.distributed.run --nproc_per_node "$gpus" --standalone tools/profile_training.py \
    --out "$out/$label" --first 5 --count 3 -- "${train[@]}" --rl_library rsl_rl --num_envs $envs \
    --max_iterations 25 --device cuda --distributed > "$out/$label.log" 2>&1
  echo "exit $?"; grep '"median_iteration_s_all\|kernel_launches' "$out/$label/"*summary.json
  label=rsl_rl_1gpu_${envs}_timing
  [ $envs = 65536 ] && timeout 150 python3 tools/profile_training.py --out "$out/$label" --first 5 --count 3 -- \
    "${train[@]}" --rl_library rsl_rl --num_envs $envs --max_iterations 25 --device cuda > "$out/$label.log" 2>&1 \
    && grep '"median_iteration_s_all' "$out/$label/"*summary.json
done
rm -f "$out"/*/rank*_trace.json  # large; the tables hold the breakdown
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")" && rm -rf "$out"
