"""The process groups' timeout, the backstop behind the hang watchdog, reached with real torchrun ranks on CPU/gloo.

With the watchdog off (``--hang_timeout 0``) nothing but the collective timeout can end a job whose rank hangs:
rank 1 blocks forever at iteration 2, rank 0 waits for it in the update's all-reduce until the timeout ends it.
"""

from __future__ import annotations

import datetime
import re
import time

import pytest
from process_utils import processes_mentioning, wait_for_no_process
from rlscale_command import rlscale

from rlscale.dist import COLLECTIVE_TIMEOUT_ENV, collective_timeout
from rlscale.launch.launcher import job_environment

TIMEOUT_S = 5
TRAIN = ["train_multigpu", "--task", "Isaac-Cartpole", "--device", "cpu", "--num_envs", "64", "--num_gpus", "2"]


@pytest.mark.parametrize(
    ("environ", "seconds"),
    [
        ({"RLSCALE_HANG_TIMEOUT": "0"}, None),  # no watchdog: torch's own default
        ({"RLSCALE_HANG_TIMEOUT": "5"}, 60),  # floored at a minute
        ({"RLSCALE_HANG_TIMEOUT": "300"}, 600),  # twice the watchdog's
        ({"RLSCALE_HANG_TIMEOUT": "0", COLLECTIVE_TIMEOUT_ENV: "5"}, 5),
        ({"RLSCALE_HANG_TIMEOUT": "300", COLLECTIVE_TIMEOUT_ENV: "7.5"}, 7.5),
    ],
)
def test_timeout_follows_the_watchdog_unless_set(environ, seconds):
    expected = None if seconds is None else datetime.timedelta(seconds=seconds)
    assert collective_timeout(environ) == expected


def test_ranks_end_a_timed_out_nccl_collective():
    """NCCL's watchdog then ends a rank whose collective timed out instead of leaving it blocked (GPU only, so the
    variable itself is what the CPU can check); a value the caller set is kept."""
    assert job_environment({}, 2, False, "status")["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3"
    kept = job_environment({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, 2, False, "status")
    assert kept["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"


def test_backstop_ends_a_hung_job_without_the_watchdog(tmp_path):
    """Rank 1 hangs; with the watchdog off, rank 0's all-reduce times out after the collective timeout, the job ends
    and the launcher exits non-zero naming rank 0's timeout; no process is left."""
    env = {"RLSCALE_INJECT_FAULT": "hang:rank=1,iteration=2", COLLECTIVE_TIMEOUT_ENV: str(TIMEOUT_S)}
    args = [*TRAIN, "--max_iterations", "50", "--hang_timeout", "0", "--log_root", str(tmp_path)]
    started = time.monotonic()
    try:
        result = rlscale(*args, env=env, timeout=60)
    finally:
        for process in processes_mentioning(str(tmp_path)):
            process.kill()
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert "[rlscale] it 2/50" in output, output[-3000:]  # rank 1 hung at iteration 2, not before
    assert "made no progress" not in output  # the watchdog was off: the backstop ended the job
    (report,) = [line for line in output.splitlines() if line.startswith("[ERROR] rank 0 failed first")]
    assert re.search(r"timed out", report, re.IGNORECASE), report
    assert not wait_for_no_process(str(tmp_path), within=5)
    print(f"ended {time.monotonic() - started:.1f} s after the start; {report}")
