#!/usr/bin/env bash
# Benchmarks of issue 4 on the lent nvidia-h200-x2 machine: training_multigpu at 1 and 2 GPUs, runtime_multigpu and
# startup_multigpu at 2 GPUs, Isaac-Cartpole with 4096 envs per rank.
# Usage: tools/h200_benchmarks.sh OUT_DIR [LIBRARY...]   (training for the libraries given; default rsl_rl, plus the
# runtime and startup benchmarks when rsl_rl is among them). Bundles and logs land in OUT_DIR/benchmarks/.
set -uo pipefail
out=${1:?output directory}
shift
libraries=${*:-rsl_rl}
bundles=$out/benchmarks
mkdir -p "$bundles"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
task=Isaac-Cartpole
common=(--task "$task" --num_envs 4096 --log_root /tmp/rlscale-bench)

bench() {  # label, then benchmark arguments
  local label=$1; shift
  timeout 300 python3 -m rlscale benchmark "$@" > "$bundles/$label.log" 2>&1
  echo "$label exit $? $(grep -m1 -i 'fps\|throughput' "$bundles/$label.log" | cut -c1-160)"
}

for library in $libraries; do
  for gpus in 1 2; do
    bench "training_${library}_${gpus}gpu" training_multigpu --num_gpus $gpus --rl_library $library "${common[@]}" \
      --output_path "$bundles/training_multigpu_${task}_${library}_${gpus}x4096_seed42.json"
  done
done
[[ " $libraries " == *" rsl_rl "* ]] || exit 0
bench runtime_2gpu runtime_multigpu --num_gpus 2 "${common[@]}" \
  --output_path "$bundles/runtime_multigpu_${task}_none_2x4096_seed42.json"
bench startup_2gpu startup_multigpu --num_gpus 2 --rl_library rsl_rl "${common[@]}" \
  --output_path "$bundles/startup_multigpu_${task}_rsl_rl_2x4096_seed42.json"
