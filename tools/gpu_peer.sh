#!/usr/bin/env bash
# rlscale beside its peer baseline (benchmark training_multigpu --peer) on a GPU host (the lent nvidia-h200-x2),
# for each seed x world size x per-rank env count x library, with the study's iteration counts. Interleaved: each seed
# runs every other combination before the next seed starts, so slow drift of the host spreads over all cells.
# Usage: tools/gpu_peer.sh OUT_DIR "WORLD_SIZES..." "ENVS..." "SEEDS..."   (after sourcing tools/gpu_env.sh)
# (Issue 6's bundles in results/h200x2/peer/ were made by its first version, one world size at a time, with the
# seed loop innermost.)
set -uo pipefail
out=${1:?output directory} world_sizes=${2:?world sizes} envs_list=${3:?env counts} seeds=${4:?seeds}
mkdir -p "$out/bundles" "$out/logs"
for seed in $seeds; do
  for ws in $world_sizes; do
    for envs in $envs_list; do
      for library in rsl_rl rl_games skrl; do
        name=$library/ws$ws/envs$envs/seed$seed
        mkdir -p "$out/bundles/${name%/*}" "$out/logs/${name%/*}"
        started=$(date +%s)
        timeout --kill-after=20 150 python3 -m rlscale benchmark training_multigpu --num_gpus "$ws" --peer \
          --task Isaac-Cartpole-Direct --rl_library $library --num_envs "$envs" --seed "$seed" --device cuda \
          --max_iterations 12 --warmup_iterations 2 --log_root /tmp/peer_runs --output_path "$out/bundles/$name.json" \
          > "$out/logs/$name.log" 2>&1
        echo "$name exit $? in $(( $(date +%s) - started )) s"
      done
    done
  done
done
ps -eo pid,cmd | grep -E "rlscale|torchrun" | grep -v grep || echo "no rank left"
