"""Rank side of the hang watchdog: every rank of a launched job leaves a heartbeat for its launcher.

:func:`beat` writes ``$RLSCALE_HEARTBEAT_DIR/rank_<r>.heartbeat``: one small JSON object (rank, pid, phase, iteration,
a sequence number and the wall time), replaced atomically (:func:`rlscale.paths.write_atomic`). Ranks beat at phase
changes and iteration boundaries only, a few writes per iteration, never per env step. The phases, in the order a rank
goes through them: ``startup`` (from the rank's entry), then per iteration ``sync_check`` (the rank-sync audit, when
due), ``collect`` (the rollout) and ``update`` (the library's learning step), and ``finished``. ``nccl_probe``'s ranks
beat ``all_reduce`` instead of the three, once their process group has formed.

Here, below the launcher, because the ranks' code (training, benchmarks, fault injection) calls it; the launcher's
side, which reads the files, is :mod:`rlscale.launch.hang_watch`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from rlscale.dist import HEARTBEAT_DIR_ENV, rank_info
from rlscale.paths import write_atomic

PHASES = ("startup", "sync_check", "collect", "update", "all_reduce", "finished")
"""Heartbeat phases; within one iteration a rank goes through ``sync_check``, ``collect``, ``update`` in this order.
``all_reduce`` is ``nccl_probe``'s only one."""

SUFFIX = ".heartbeat"


def heartbeat_path(directory: str | Path, rank: int) -> Path:
    """The heartbeat file of global rank ``rank``."""
    return Path(directory, f"rank_{rank}{SUFFIX}")


class HeartbeatWriter:
    """Writes one rank's heartbeat file.

    Args:
        directory: The job's heartbeat directory.
        rank: Global rank of this process.
    """

    def __init__(self, directory: str | Path, rank: int) -> None:
        self.path = heartbeat_path(directory, rank)
        self.rank = rank
        self.seq = 0
        self.phase: str = "startup"
        self.iteration: int | None = None
        self.last_write = float("-inf")

    def beat(self, phase: str, iteration: int | None = None, *, every_s: float = 0.0) -> None:
        """Record ``phase`` at ``iteration``; with ``every_s``, skip the write if the last one is more recent."""
        if phase not in PHASES:
            raise ValueError(f"unknown heartbeat phase {phase!r}; one of {', '.join(PHASES)}")
        now = time.monotonic()
        if every_s and now - self.last_write < every_s:
            return
        self.phase, self.iteration, self.last_write = phase, iteration, now
        self.seq += 1
        data = {"rank": self.rank, "pid": os.getpid(), "phase": phase, "iteration": iteration, "seq": self.seq}
        data["time"] = time.time()  # for people reading the file; the launcher times by its own clock
        # A heartbeat must never fail the training it watches (the launcher may already be tearing the job down).
        with contextlib.suppress(OSError):
            write_atomic(self.path, json.dumps(data))  # its temporary is hidden from the launcher's glob

    def renew(self) -> None:
        """Beat again in the current phase: a rank still working through a long phase, not stuck in it."""
        self.beat(self.phase, self.iteration)


_writer: HeartbeatWriter | None = None
_writer_key: tuple[str, int] | None = None


def writer() -> HeartbeatWriter | None:
    """This process's writer, or None outside a launched job (no ``$RLSCALE_HEARTBEAT_DIR``)."""
    global _writer, _writer_key
    directory = os.environ.get(HEARTBEAT_DIR_ENV)
    if not directory:
        return None
    key = (directory, rank_info().rank)
    if key != _writer_key:
        _writer, _writer_key = HeartbeatWriter(*key), key
    return _writer


def beat(phase: str, iteration: int | None = None, *, every_s: float = 0.0) -> None:
    """Record this rank's phase and iteration for the launcher's hang watchdog; a no-op outside a launched job."""
    if (current := writer()) is not None:
        current.beat(phase, iteration, every_s=every_s)


def renew() -> None:
    """Beat again in the current phase (see :meth:`HeartbeatWriter.renew`); a no-op outside a launched job."""
    if (current := writer()) is not None:
        current.renew()
