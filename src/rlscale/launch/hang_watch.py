"""Launcher side of the hang watchdog: names the rank that stopped making progress.

:class:`HangWatch`, polled by the supervisor, reads its node's heartbeat files (written by the ranks,
:mod:`rlscale.heartbeat`; the directory is a per-node temporary one, so each node's launcher watches its own local
ranks only) and reports a stall.

What counts as progress. A rank blocked in a collective writes nothing, yet it is not hung while the peer it waits
for still moves. Data-parallel ranks advance in lock-step, so a rank whose (iteration, phase) is ahead of the slowest
local rank's is waiting for that rank; only the slowest ranks are judged, and the job has stalled when none of them
has beaten for ``--hang_timeout`` seconds. A rank waiting for a slow peer thus counts as progressing exactly while
that peer heartbeats, and its clock starts only once it is among the slowest: when the peer it waited for moves past
it (rank 0 still writing its log after the collective both left), it has the whole timeout to beat again. Ages run on
the launcher's monotonic clock from the moment it first saw a heartbeat (or saw the rank stop being ahead), so a
wall-clock step on either side changes nothing.

Startup (imports, building the task and the library, the rendezvous, first CUDA/JIT work before the first rollout)
can take minutes and is not timed: a rank's clock starts at its first heartbeat past ``startup``, and nothing is
judged until every local rank got there. The process-group timeout (:func:`rlscale.dist.collective_timeout`) covers
a rank that never does.

A rank whose process has ended is not judged either: it cannot hang, and torchrun either ends the job or, under
``--max_restarts``, starts the group again. So the time from a failed attempt to its restarted ranks' first heartbeat
counts as no hang, even for a rank that torchrun had to SIGKILL (no ``finished`` heartbeat); a restarted rank's
heartbeat, from a new process, takes its predecessor's place.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rlscale.heartbeat import PHASES, SUFFIX


def process_running(pid: int) -> bool:
    """Whether process ``pid`` runs; an exited one that its parent has not reaped yet (a zombie) does not."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@dataclass
class _Seen:
    """The last heartbeat seen from one rank, and when (launcher's clock) it was first seen."""

    phase: str
    iteration: int | None
    key: tuple[int, int]
    since: float
    """When (launcher's clock) the rank was last seen to progress: a new heartbeat, or waiting ahead of the slowest."""

    @property
    def position(self) -> tuple[int, int, int]:
        """Where the rank is in the run: ``startup`` before everything, ``finished`` after."""
        if self.phase == "startup":
            return (0, 0, 0)
        if self.phase == "finished":
            return (2, 0, 0)
        return (1, self.iteration or 0, PHASES.index(self.phase))

    def where(self) -> str:
        return f"phase {self.phase}" + (f", iteration {self.iteration}" if self.iteration is not None else "")


class HangWatch:
    """Reads a node's heartbeat files and reports when its slowest ranks have made no progress for too long.

    Args:
        directory: The job's heartbeat directory on this node.
        local_ranks: Ranks this node runs; until each has a heartbeat past ``startup`` nothing is judged.
        timeout_s: Seconds without progress that count as a hang.
        clock: Monotonic clock (injectable for tests).
        running: Whether the process of a pid runs (injectable for tests).
    """

    def __init__(
        self,
        directory: str | Path,
        local_ranks: int,
        timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        running: Callable[[int], bool] = process_running,
    ) -> None:
        self.directory = Path(directory)
        self.local_ranks = local_ranks
        self.timeout_s = timeout_s
        self.clock = clock
        self.running = running
        self.seen: dict[int, _Seen] = {}
        self.stall: str | None = None
        """The report once a stall was found."""

    def poll(self) -> None:
        """Read every heartbeat file; a changed one restarts its rank's clock."""
        now = self.clock()
        for path in self.directory.glob(f"rank_*{SUFFIX}"):
            try:
                data = json.loads(path.read_text())
                rank, key = int(data["rank"]), (int(data["pid"]), int(data["seq"]))
                phase, iteration = str(data["phase"]), data["iteration"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # gone, or not a heartbeat: the next poll sees the rank's next one
            previous = self.seen.get(rank)
            if previous is None or previous.key != key:
                self.seen[rank] = _Seen(phase, iteration, key, now)

    def check(self) -> str | None:
        """Poll, then return a report naming the stalled ranks (and those waiting for them), or None."""
        self.poll()
        active = {
            rank: seen for rank, seen in self.seen.items() if seen.phase != "finished" and self.running(seen.key[0])
        }
        if len(self.seen) < self.local_ranks or not active:
            return None
        slowest = min(seen.position for seen in active.values())
        if slowest[0] == 0:  # some local rank is still starting up: nothing is timed yet
            return None
        now = self.clock()
        for seen in active.values():
            if seen.position > slowest:  # waiting for the slowest: not timed until it is among them
                seen.since = now
        behind = {rank: seen for rank, seen in active.items() if seen.position == slowest}
        quiet_s = min(now - seen.since for seen in behind.values())
        if quiet_s <= self.timeout_s:
            return None
        names = ", ".join(map(str, sorted(behind)))
        where = next(iter(behind.values())).where()
        report = f"rank{'s' if len(behind) > 1 else ''} {names} made no progress for {quiet_s:.1f} s ({where})"
        ahead = [f"rank {rank} ({seen.where()})" for rank, seen in sorted(active.items()) if rank not in behind]
        if ahead:
            report += f"; ahead and presumably waiting in a collective: {', '.join(ahead)}"
        self.stall = report
        return report
