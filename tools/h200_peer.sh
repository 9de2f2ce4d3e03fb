#!/usr/bin/env bash
# Issue 6: the training benchmark beside the peer baseline (benchmark training_multigpu --peer) on both GPUs of the
# lent nvidia-h200-x2, for each library x per-rank env count x seed, with the study's iteration counts.
# Usage: tools/h200_peer.sh OUT_DIR WORLD_SIZE "ENVS..." "SEEDS..."   (after sourcing tools/h200_env.sh)
set -uo pipefail
out=${1:?output directory} ws=${2:?world size} envs_list=${3:?env counts} seeds=${4:?seeds}
mkdir -p "$out/bundles" "$out/logs"
for envs in $envs_list; do
  for library in rsl_rl rl_games skrl; do
    for seed in $seeds; do
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
ps -eo pid,cmd | grep -E "rlscale|torchrun" | grep -v grep || echo "no rank left"
