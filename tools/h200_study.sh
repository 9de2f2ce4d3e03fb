#!/usr/bin/env bash
# The default GPU study on the lent nvidia-h200-x2 (issue 5), with the overlay committed in results/h200x2/.
# Usage: tools/h200_study.sh OUT_DIR SECONDS [SNAKEMAKE_ARG...]
# Runs snakemake for at most SECONDS (SIGTERM, then SIGKILL 20 s later: the jobs' launchers stop their ranks), then
# packs results/ and logs/ of the study into OUT_DIR/study.tgz, so that a later call can carry them back and let
# snakemake continue where this one stopped.
set -uo pipefail
out=${1:?output directory}
budget=${2:?seconds}
shift 2
mkdir -p "$out"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
study=cartpole_scaling
started=$(date +%s)
timeout --kill-after=20 "$budget" python3 -m snakemake --workflow-profile workflow/profiles/default --cores all \
  --resources gpu=2 --configfile config/config.yaml results/h200x2/config_overlay.yaml "$@" \
  > "$out/snakemake.log" 2>&1
echo "snakemake exit $? after $(( $(date +%s) - started )) s"
grep -E "steps \(|Finished job|Error|error" "$out/snakemake.log" | tail -8
nvidia-smi topo -m > "$out/nvidia-smi-topo.txt" 2>&1
ps -eo pid,cmd | grep -E "rlscale|torchrun|torch.distributed" | grep -v grep || echo "no rank left"
tar czf "$out/study.tgz" "results/$study" "logs/$study"
