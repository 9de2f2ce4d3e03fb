#!/usr/bin/env bash
# Issue 16: a new user's first hour on a fresh GPU host. nvidia-ml-py (pynvml), which the lent image preinstalls and
# rlscale does not declare, is uninstalled first; CUDA_VISIBLE_DEVICES is unset. Then `train_multigpu` with the
# default --num_gpus must use every GPU, and `snakemake -n` with `device: auto` must plan a CUDA study.
# Usage: tools/gpu_first_hour.sh OUT_DIR   (after sourcing tools/gpu_env.sh; GPUS, default 2, the host's GPUs)
set -uo pipefail
out=${1:?output directory}
mkdir -p "$out"
gpus=${GPUS:-2}
unset CUDA_VISIBLE_DEVICES
python3 -m pip uninstall -y -q nvidia-ml-py 2>&1 | tail -n 1
if python3 -c "import pynvml" 2>/dev/null; then echo "pynvml is still importable: nothing was hidden"; exit 1; fi
echo "pynvml hidden: $(python3 -c 'import pynvml' 2>&1 | tail -n 1)"
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id --format=csv
python3 -m rlscale train_multigpu --task Isaac-Cartpole --dry_run
timeout 300 python3 -m rlscale train_multigpu --task Isaac-Cartpole --num_envs 4096 --max_iterations 5 \
  --log_root /tmp/first_hour > "$out/train_multigpu.log" 2>&1
echo "train_multigpu exit $?"
python3 - /tmp/first_hour <<'PY'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).rglob("manifest.json")):
    m = json.loads(path.read_text())
    print(path.parent.name, {k: m.get(k) for k in ("status", "rank", "world_size", "device", "gpu_name", "gpu_uuid")})
PY
python3 -m snakemake --workflow-profile workflow/profiles/default -n --resources gpu="$gpus" \
  > "$out/snakemake_dry_run.log" 2>&1
echo "snakemake -n exit $?"
grep -iE "device|cuda|cpu" "$out/snakemake_dry_run.log" | head -n 5
grep -cE "^rule |^localrule " "$out/snakemake_dry_run.log" | sed 's/^/rule lines: /'
