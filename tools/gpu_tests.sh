#!/usr/bin/env bash
# The GPU-only tests, as run on a GPU host (the lent nvidia-h200-x2) for docs/validation.md. Usage:
# tools/gpu_tests.sh OUT_DIR (after `source tools/gpu_env.sh`). Writes OUT_DIR/pytest.log, whose first line is
# the pytest command and whose short summary names every test with its outcome (-rA), and OUT_DIR/junit.xml.
set -uo pipefail
out=${1:?output directory}
mkdir -p "$out"
command=(python3 -m pytest -rA -p no:cacheprovider --junitxml "$out/junit.xml"
  tests/test_cuda_graph.py tests/test_gpu_placement.py tests/test_gpus.py
  tests/test_check_task.py::test_a_task_whose_graph_replays_differently_is_caught)
{
  echo "\$ ${command[*]}"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  "${command[@]}"
} > "$out/pytest.log" 2>&1
status=$?
tail -n 1 "$out/pytest.log"
exit "$status"
