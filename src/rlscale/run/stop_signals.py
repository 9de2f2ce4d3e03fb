"""One stop request, however many times its signal arrives.

One Ctrl-C or one batch-system stop can reach a process several times within milliseconds: the terminal signals its
whole foreground group while a wrapper in that group forwards the signal once more (``timeout --foreground``, a job's
own supervisor), and SLURM signals every process of a job while each launcher also forwards to the one below it.
Every rlscale process that stops on SIGINT/SIGTERM (the supervisors, torchrun, each rank) takes such a burst as one
request: a signal within :data:`SIGNAL_BURST_S` of the one that opened the burst repeats it, a later one is a new
request (the user pressing Ctrl-C again).
"""

from __future__ import annotations

import enum
import signal
import time
from types import FrameType

SIGNAL_BURST_S = 2.0
"""A stop signal this soon after the one that opened its burst is the same request delivered again."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that ask a run to stop: Ctrl-C, and what Snakemake, SLURM and the launchers send."""

INTERRUPTED_EXIT_CODE = 128 + signal.SIGINT
"""Exit code of a run that stopped on request and recorded it (a shell's code for Ctrl-C)."""


class Arrival(enum.Enum):
    """What a stop signal means, by when it arrived."""

    FIRST = "first"
    """The first request to stop."""
    REPEAT = "repeat"
    """The request that opened the burst, delivered again."""
    AGAIN = "again"
    """A new request after the burst: the user asked again."""


class StopSignals:
    """Tells the first stop signal, the repeats of its burst and a later request apart."""

    def __init__(self, burst_s: float = SIGNAL_BURST_S) -> None:
        self.burst_s = burst_s
        self._burst: dict[str, float] = {}

    @property
    def arrived(self) -> bool:
        """Whether any stop signal has arrived."""
        return "at" in self._burst

    def arrive(self) -> Arrival:
        """Classify a stop signal arriving now.

        Safe in a signal handler that another signal re-enters: the burst's start is claimed by a single dict
        operation, so of two signals handled at once exactly one is the first.
        """
        now = time.monotonic()
        opened = self._burst.setdefault("at", now)
        if opened is now:
            return Arrival.FIRST
        if now - opened < self.burst_s:
            return Arrival.REPEAT
        self._burst["at"] = now
        return Arrival.AGAIN


def interrupt_on_stop_signals() -> None:
    """Make SIGINT and SIGTERM raise ``KeyboardInterrupt`` in this process, once per burst, for the rest of its life.

    A rank records its interrupt (manifest, exit status) while it unwinds; a repeat of the same stop raising again in
    the middle of that would leave it half-recorded. Must be called from the main thread.
    """
    stops = StopSignals()

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        if stops.arrive() is not Arrival.REPEAT:
            raise KeyboardInterrupt

    for sig in STOP_SIGNALS:
        signal.signal(sig, interrupt)
