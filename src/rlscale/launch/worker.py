"""Per-rank entry point: torchrun (or skrl's JAX launcher) runs this file once per rank.

``record`` hands a failing rank's traceback to torchrun, which prints it as the root cause even when the console shows
only local rank 0. skrl's JAX launcher exits 0 whatever its children do, so each rank also leaves its exit status in
``$RLSCALE_STATUS_DIR`` for the launcher to read, with the time it failed, so that the launcher's summary names the
rank that failed first before the symptoms of the others, and with its error: an exception, or the one line a
``SystemExit`` printed, which the console shows only for local rank 0. Each rank also beats for the launcher's hang
watchdog (:mod:`rlscale.heartbeat`) and stops itself should the launcher die (:mod:`.orphans`). From its start a rank
takes a burst of SIGINT/SIGTERM (its own and torchrun's forward of the same Ctrl-C) as one interrupt
(:mod:`rlscale.run.stop_signals`), so that a repeat cannot break off the exit status it is leaving.

A rank whose failure follows a peer's (its collective broke when the peer died) waits a moment before it exits, so that
torchrun names the peer as the root cause: torchrun orders failures by whole-second timestamps, then by when it
noticed each exit, and a failing peer can still be tearing down when the ranks it left behind have already exited.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from torch.distributed.elastic.multiprocessing.errors import record

from rlscale import heartbeat
from rlscale.dist import STATUS_DIR_ENV, SUPERVISOR_PID_ENV, rank_info
from rlscale.launch.orphans import guard_rank
from rlscale.paths import write_atomic
from rlscale.run.stop_signals import interrupt_on_stop_signals

FOLLOWING_FAILURE_WAIT_S = 3.0
"""How long a rank that failed after a peer waits for the launcher to reap the peer first (and stop this rank)."""


def run_rank(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run one rank's main under ``record`` and leave its exit status where the launcher looks."""
    interrupt_on_stop_signals()
    rank = rank_info().rank
    supervisor = os.environ.get(SUPERVISOR_PID_ENV)
    guard_rank(rank, int(supervisor) if supervisor else None)
    heartbeat.beat("startup")
    status_dir = os.environ.get(STATUS_DIR_ENV)
    if status_dir:  # a restarted rank's predecessor left its status: the launcher's summary is of the last attempt
        Path(status_dir, f"rank_{rank}.json").unlink(missing_ok=True)
    status: dict = {"exit_code": 1, "error": None}
    try:
        status["exit_code"] = record(main)(argv)
        return status["exit_code"]
    except SystemExit as exit_:
        status["exit_code"] = exit_.code if isinstance(exit_.code, int) else 1
        if isinstance(exit_.code, str):
            status["error"] = exit_.code
        raise
    except BaseException as error:
        status["error"] = f"{type(error).__name__}: {error}"
        raise
    finally:
        if status["exit_code"] != 0:
            status["failed_at"] = time.time()  # the ranks of a node share its clock
        heartbeat.beat("finished")
        if status_dir:
            # Atomically: the launcher may read the file while the job runs (skrl JAX), and half a file is no JSON.
            write_atomic(Path(status_dir, f"rank_{rank}.json"), json.dumps(status))
            if status["error"] is not None and peer_failed(Path(status_dir), rank):
                with contextlib.suppress(KeyboardInterrupt):  # the launcher's SIGTERM ends the wait
                    time.sleep(FOLLOWING_FAILURE_WAIT_S)


def peer_failed(status_dir: Path, rank: int) -> bool:
    """Whether another rank of this node has already left a failure in ``status_dir``."""
    for path in status_dir.glob("rank_*.json"):
        if path.name != f"rank_{rank}.json" and json.loads(path.read_text())["error"] is not None:
            return True
    return False


if __name__ == "__main__":
    from rlscale.run.train import main as train_main

    sys.exit(run_rank(train_main, sys.argv[1:]))
