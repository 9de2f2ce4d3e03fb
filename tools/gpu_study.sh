#!/usr/bin/env bash
# A GPU study (on the lent nvidia-h200-x2) with an overlay committed beside its results (results/h200x2/
# config_overlay.yaml for issue 5's default study, results/h200x2/ant/config_overlay.yaml for Rlscale-Ant).
# Usage: tools/gpu_study.sh OUT_DIR SECONDS OVERLAY [SNAKEMAKE_ARG...]   (GPUS, default 2: what snakemake may hand out)
# Runs snakemake for at most SECONDS (SIGTERM, then SIGKILL 20 s later: the jobs' launchers stop their ranks), then
# packs results/ and logs/ of the study into OUT_DIR/study.tgz, so that a later call can carry them back and let
# snakemake continue where this one stopped.
set -uo pipefail
out=${1:?output directory}
budget=${2:?seconds}
overlay=${3:?overlay}
shift 3
gpus=${GPUS:-2}
mkdir -p "$out"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
study=$(python3 -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1])).get('study', 'cartpole_scaling'))" "$overlay")
started=$(date +%s)
timeout --kill-after=20 "$budget" python3 -m snakemake --workflow-profile workflow/profiles/default --cores all \
  --resources gpu="$gpus" --configfile config/config.yaml "$overlay" "$@" \
  > "$out/snakemake.log" 2>&1
echo "snakemake exit $? after $(( $(date +%s) - started )) s"
grep -E "steps \(|Finished job|Error|error" "$out/snakemake.log" | tail -8
nvidia-smi topo -m > "$out/nvidia-smi-topo.txt" 2>&1
ps -eo pid,cmd | grep -E "rlscale|torchrun|torch.distributed" | grep -v grep || echo "no rank left"
# A file comes back from the machine only under 16 MiB (the Ant study's archives did not): leave out the benchmark
# runs and the checkpoints and TensorBoard files of the train runs, a few MB per run; the bundles, manifests and job
# logs hold the results. A train job that was cut off then starts over instead of resuming.
tar czf "$out/study.tgz" --exclude="logs/$study/benchmark_runs" --exclude="*.pt" --exclude="*.pth" \
  --exclude="events.out.tfevents.*" "results/$study" "logs/$study"
du -h "$out/study.tgz"
