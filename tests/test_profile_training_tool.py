"""tools/profile_training.py runs ``rlscale train``'s phases under the torch profiler: it must keep up with the
run API (it once imported a module that had moved and failed only on the GPU machine)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_profiles_the_requested_iterations_of_a_cpu_run(tmp_path):
    out = tmp_path / "profile"
    train = ["--task", "Isaac-Cartpole-Direct", "--rl_library", "rsl_rl", "--num_envs", "16", "--max_iterations", "5"]
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "profile_training.py"), "--out", str(out), "--first", "2", "--count", "2"]
        + ["--", *train, "--device", "cpu", "--log_root", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((out / "rank0_summary.json").read_text())
    assert summary["status"] == "completed"
    profiled = summary["profiled_iterations"]
    assert [record["iteration"] for record in profiled] == [2, 3]
    for record in profiled:
        assert record["env_step_host_s"] > 0 and 0 < record["collection_s"] < record["iteration_s"]
    assert "env.step" in (out / "rank0_table.txt").read_text()
