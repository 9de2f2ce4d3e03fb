#!/usr/bin/env bash
# Issue 17: what the CUDA-graph env step alone is worth, rlscale's training benchmark with and without
# --no_cuda_graph, interleaved (graph, eager, graph, eager, ...), 1 GPU, 4096 envs, each library.
# Usage: tools/gpu_graph_gain.sh OUT_DIR "REPEATS..." ["LIBRARIES..."]   (after sourcing tools/gpu_env.sh)
set -uo pipefail
out=${1:?output directory} repeats=${2:?repeat numbers} libraries=${3:-rsl_rl rl_games skrl}
mkdir -p "$out/bundles" "$out/logs"
for repeat in $repeats; do
  for library in $libraries; do
    for step in graph eager; do
      flag=(); [ "$step" = eager ] && flag=(--no_cuda_graph)
      name=$library/$step/repeat$repeat
      mkdir -p "$out/bundles/${name%/*}" "$out/logs/${name%/*}"
      timeout --kill-after=20 120 python3 -m rlscale benchmark training --task Isaac-Cartpole-Direct \
        --rl_library $library --num_envs 4096 --seed "$repeat" --device cuda --max_iterations 12 \
        --warmup_iterations 2 --log_root /tmp/graph_runs "${flag[@]}" --output_path "$out/bundles/$name.json" \
        > "$out/logs/$name.log" 2>&1
      echo "$name exit $?"
    done
  done
done
