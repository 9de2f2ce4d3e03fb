"""The rank-sync audit catches a rank whose policy drifted, on every library path: real two-process gloo runs on CPU
with rank 1's policy parameters nudged in the library's own storage (``RLSCALE_INJECT_FAULT=desync``)."""

from __future__ import annotations

import json
import os

import pytest
from process_utils import wait_for_no_process
from rlscale_command import rlscale

AUDITS = [
    pytest.param("rsl_rl", "torch", ["--sync_check_interval", "1", "--max_iterations", "6"], id="rsl_rl-torch"),
    pytest.param("rl_games", "torch", ["--max_iterations", "2"], id="rl_games-torch"),
    pytest.param("skrl", "torch", ["--max_iterations", "2"], id="skrl-torch"),
    pytest.param("skrl", "jax", ["--max_iterations", "2"], marks=pytest.mark.extras, id="skrl-jax"),  # library_paths
]
"""Each library path with the audit that catches the drift at iteration 2: the final one of a 2-iteration run, or on
rsl_rl the periodic one of ``--sync_check_interval 1``, before the end of a 6-iteration run."""
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


@pytest.mark.parametrize(("library", "framework", "audit"), AUDITS)
def test_nudged_rank_fails_the_run_and_is_named(tmp_path, library, framework, audit):
    """Rank 1's parameters nudged before iteration 1 make the audit at iteration 2 fail on both ranks, naming rank 1."""
    env = {**ENV, "RLSCALE_INJECT_FAULT": "desync:rank=1,iteration=1"}
    args = [
        "train_multigpu", "--num_gpus", "2", "--device", "cpu", "--task", "Isaac-Cartpole", "--num_envs", "16",
        *audit, "--rl_library", library, "--ml_framework", framework, "--log_root", str(tmp_path),
    ]  # fmt: skip
    result = rlscale(*args, env=env)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    divergence = "policy parameters diverged at iteration 2: rank(s) 1 differ from rank 0 (2 ranks)"
    assert divergence in output, output[-3000:]
    manifests = [json.loads(path.read_text()) for path in tmp_path.rglob("manifest.json")]
    assert sorted(manifest["rank"] for manifest in manifests) == [0, 1]
    assert {manifest["error"] for manifest in manifests} == {f"RankDivergence: {divergence}"}
    assert not wait_for_no_process(str(tmp_path), within=10)
