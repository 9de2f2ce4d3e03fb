"""Randomised crash trials: a 4-rank CPU job (gloo) with one rank crashing at an iteration drawn at random.

Each trial must exit non-zero because of the crash, name the crashed rank with its traceback (torchrun's root
cause), and leave no process behind. The draws are seeded, so a failing trial reruns as it was; the test prints them.

"Because of the crash" is checked without a clock: the hang watchdog is off, so nothing but torchrun's reaction to
the failed rank can end the job before the collective timeout, whose report ("timed out") must not appear. A trial
that has not ended after 90 s (a safety net, not a measure) fails too. Two trials run at a time, each on the free
port torchrun picks; the test takes about 2 minutes on 2 cores. Twelve trials, not twenty since the ranks date
their failures (the summary orders by those dates, not by torchrun's whole-second timestamps).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from process_utils import wait_for_no_process
from rlscale_command import rlscale

TRIALS = 12
SEED = 7
RANKS = 4
LAST_CRASH_ITERATION = 3
TIMEOUT_S = 90.0
"""From the launch to the launcher's exit: a safety net for a job that does not end."""
CONCURRENT = 2
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


@dataclass
class Trial:
    index: int
    rank: int
    iteration: int
    code: int | None = None
    wall_s: float = 0.0
    """From the launch to the exit."""
    crash_recorded: bool = False
    """Whether the crashed rank's manifest recorded the injected crash."""
    output: str = ""
    leftovers: int = 0

    def problems(self) -> list[str]:
        """What this trial got wrong, empty when it passed."""
        found = []
        if self.code is None:
            found.append(f"still running after {TIMEOUT_S:g} s")
        elif self.code == 0:
            found.append("exited 0")
        if not self.crash_recorded:
            found.append(f"no manifest of rank {self.rank} recorded the injected crash")
        if "timed out" in self.output.lower():
            found.append("a collective timed out: the crash did not end the job")
        root_cause = self.output[self.output.find("Root Cause") :] if "Root Cause" in self.output else ""
        for needed in (
            f"rank      : {self.rank} (local_rank: {self.rank})",
            f"InjectedCrash: injected crash on rank {self.rank} at iteration {self.iteration}",
            'faults.py", line',  # the traceback, down to the raise
        ):
            if needed not in root_cause:
                found.append(f"root cause lacks {needed!r}")
        if self.leftovers:
            found.append(f"{self.leftovers} process(es) left")
        return found


def run_trial(trial: Trial, root: Path) -> Trial:
    marker = root / f"trial_{trial.index}"  # in every command line of the job: its --log_root
    args = [
        "train_multigpu", "--task", "Isaac-Cartpole-Direct", "--device", "cpu",
        "--num_gpus", str(RANKS), "--num_envs", "16", "--max_iterations", "50", "--log_root", str(marker),
        "--hang_timeout", "0",
    ]  # fmt: skip
    env = {**ENV, "RLSCALE_INJECT_FAULT": f"crash:rank={trial.rank},iteration={trial.iteration}"}
    started = time.monotonic()
    try:
        result = rlscale(*args, env=env, timeout=TIMEOUT_S)
        trial.code, trial.output = result.returncode, result.stdout + result.stderr
    except subprocess.TimeoutExpired as expired:
        trial.output = f"{expired.stdout or ''}{expired.stderr or ''}"
    trial.wall_s = time.monotonic() - started
    error = f"InjectedCrash: injected crash on rank {trial.rank} at iteration {trial.iteration}"
    for path in marker.rglob("manifest.json"):
        manifest = json.loads(path.read_text())
        if manifest["rank"] == trial.rank and manifest["status"] == "crashed" and manifest.get("error") == error:
            trial.crash_recorded = True
    left = wait_for_no_process(str(marker), within=5)
    trial.leftovers = len(left)
    for process in left:  # leave nothing to the next trials, whatever this one did
        process.kill()
    return trial


@pytest.mark.stress
def test_random_rank_crashes_are_named_and_torn_down(tmp_path):
    """12 trials, each crashing rank 0..3 at iteration 0..3 (seeded draws): the crash ends every one with a non-zero
    exit, its root cause names the crashed rank with the injected exception's traceback, and no process outlives
    it."""
    draws = random.Random(SEED)
    trials = [Trial(i, draws.randrange(RANKS), draws.randint(0, LAST_CRASH_ITERATION)) for i in range(TRIALS)]
    print("draws (trial: rank, iteration):", ", ".join(f"{t.index}: {t.rank},{t.iteration}" for t in trials))
    with ThreadPoolExecutor(CONCURRENT) as pool:
        done = list(pool.map(lambda trial: run_trial(trial, tmp_path), trials))
    for trial in done:
        print(f"trial {trial.index}: rank {trial.rank} iteration {trial.iteration}: exit {trial.code}, "
              f"{trial.wall_s:.1f} s in all, {trial.leftovers} left")  # fmt: skip
    failed = {trial.index: trial.problems() for trial in done if trial.problems()}
    details = "\n".join(f"trial {index}: {'; '.join(problems)}" for index, problems in failed.items())
    first = next((trial for trial in done if trial.index in failed), None)
    assert not failed, f"{details}\n--- output of trial {first.index} ---\n{first.output[-4000:]}"
