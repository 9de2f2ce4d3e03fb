#!/usr/bin/env bash
# Issue 22's parity runs on a two-GPU host (the lent nvidia-h200-x2): the study pipeline with the overlay
# config/parity_h200.yaml (Isaac-Cartpole-Direct x rsl_rl, rl_games, skrl and Rlscale-Ant x rsl_rl, 1 and 2 GPUs, 4096
# envs per GPU, seeds 1-3, 8 M global env steps per run), up to results/parity_h200/parity.csv: the validate and probe
# jobs the runs wait for, the 24 parity runs, then parity.csv, parity_runs.csv and the two plots (docs/parity.md).
# Usage: tools/gpu_parity.sh OUT_DIR [SECONDS]   (from the repository root; it sources tools/gpu_env.sh itself)
# GPUS (default 2) is what snakemake may hand out (--resources gpu). Snakemake runs for at most SECONDS (default 560;
# SIGTERM, then SIGKILL 20 s later: the jobs' launchers stop their ranks). OUT_DIR gets at most 7 files: parity.tgz
# (results/ and logs/ of the study, without checkpoints and TensorBoard files), snakemake.log, nvidia-smi-topo.txt, and
# the table, per-run table and plots once they exist. A call that ran out of time continues in the next: unpack
# parity.tgz in the repository root first, and snakemake runs what is left (a parity run that was cut off starts over:
# its wall time must be one uninterrupted run's).
set -uo pipefail
out=${1:?output directory}
budget=${2:-560}
gpus=${GPUS:-2}
study=parity_h200
mkdir -p "$out"
source tools/gpu_env.sh
started=$(date +%s)
timeout --kill-after=20 "$budget" python3 -m snakemake --keep-going --workflow-profile workflow/profiles/default --cores all \
  --resources gpu="$gpus" --configfile config/config.yaml config/parity_h200.yaml -- "results/$study/parity.csv" \
  > "$out/snakemake.log" 2>&1
echo "snakemake exit $? after $(( $(date +%s) - started )) s"
grep -cE "Finished jobid: .* \(Rule: parity\)" "$out/snakemake.log" | sed 's/^/parity runs finished in this call: /'
grep -E "Error|error" "$out/snakemake.log" | tail -4
nvidia-smi topo -m > "$out/nvidia-smi-topo.txt" 2>&1
ps -eo pid,cmd | grep -E "rlscale|torchrun|torch.distributed" | grep -v grep || echo "no rank left"
for name in parity.csv parity_runs.csv parity_env_steps.png parity_wall_time.png; do
  [ -f "results/$study/$name" ] && cp "results/$study/$name" "$out/"
done
tar czf "$out/parity.tgz" --exclude="*.pt" --exclude="*.pth" --exclude="events.out.tfevents.*" \
  "results/$study" "logs/$study"
du -h "$out/parity.tgz"
