"""One stop request, however many times its signal arrives; during training, a stop at the next iteration boundary.

One Ctrl-C or one batch-system stop can reach a process several times within milliseconds: the terminal signals its
whole foreground group while a wrapper in that group forwards the signal once more (``timeout --foreground``, a job's
own supervisor), and SLURM signals every process of a job while each launcher also forwards to the one below it.
Every rlscale process that stops on SIGINT/SIGTERM (the supervisors, torchrun, each rank) takes such a burst as one
request: a signal within :data:`SIGNAL_BURST_S` of the one that opened the burst repeats it, a later one is a new
request (the user pressing Ctrl-C again).

While a rank trains, the first request does not stop it at once (:class:`StopRequest`): every rank stops at the next
iteration boundary, where the run's checkpoint is written, so that no finished iteration is lost. A new request after
the burst stops at once.
"""

from __future__ import annotations

import enum
import os
import signal
import threading
import time
from collections.abc import Mapping
from types import FrameType

SIGNAL_BURST_S = 2.0
"""A stop signal this soon after the one that opened its burst is the same request delivered again."""

STOP_WAIT_S = 15.0
"""How long a rank asked to stop waits for the next iteration boundary before it stops at once: a hung rank never
reaches one, and torchrun kills its workers 30 s after it forwards a stop."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
"""The signals that ask a run to stop: Ctrl-C, what Snakemake, SLURM and the launchers send, and the warning a SLURM
job asks for before its time limit (``sbatch --signal=USR1@SECONDS``)."""

REQUEUE_SIGNAL = signal.SIGUSR1
"""The stop signal after which a SLURM job asks to be requeued (:data:`REQUEUE_EXIT_CODE`)."""

INTERRUPTED_EXIT_CODE = 128 + signal.SIGINT
"""Exit code of a run that stopped on request and recorded it (a shell's code for Ctrl-C)."""

REQUEUE_EXIT_CODE = 75
"""Exit code of a run inside a SLURM job that stopped on :data:`REQUEUE_SIGNAL` and recorded it: the job asks to be
requeued, to continue with ``--resume auto`` (EX_TEMPFAIL: try again later)."""


def asks_requeue(signum: int | None, environ: Mapping[str, str]) -> bool:
    """Whether a run stopped on request by ``signum`` (None: unknown) asks its SLURM job to be requeued: inside one,
    on SLURM's warning signal."""
    return signum == REQUEUE_SIGNAL and bool(environ.get("SLURM_JOB_ID"))


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
        self.first: int | None = None
        """The signal that opened the first burst (None: none yet, or it was not told)."""

    @property
    def arrived(self) -> bool:
        """Whether any stop signal has arrived."""
        return "at" in self._burst

    def arrive(self, signum: int | None = None) -> Arrival:
        """Classify a stop signal (``signum``) arriving now.

        Safe in a signal handler that another signal re-enters: the burst's start is claimed by a single dict
        operation, so of two signals handled at once exactly one is the first.
        """
        now = time.monotonic()
        opened = self._burst.setdefault("at", now)
        if opened is now:
            self.first = signum
            return Arrival.FIRST
        if now - opened < self.burst_s:
            return Arrival.REPEAT
        self._burst["at"] = now
        return Arrival.AGAIN


class StopRequest:
    """A rank's stop requests, as :func:`interrupt_on_stop_signals` handles them.

    While :attr:`deferred` (the library trains), the first stop signal is kept in :attr:`signal` for the next
    iteration boundary, where every rank stops together with the run's checkpoint; otherwise, and for a new request
    after the burst, the signal raises ``KeyboardInterrupt`` at once.
    """

    def __init__(self, announce: bool) -> None:
        self.announce = announce
        """Say on stderr when a stop is deferred (one rank, so that a job says it once)."""
        self.deferred = False
        self.signal: int | None = None
        """The first stop signal (None: none yet); while deferred, the ranks stop at the next boundary once any has
        one."""
        self._deadline: threading.Timer | None = None

    def defer(self, signum: int) -> None:
        """Keep ``signum`` for the next boundary; unless :meth:`at_boundary` comes within :data:`STOP_WAIT_S`, the
        process signals itself again then, which stops it at once."""
        self._deadline = threading.Timer(STOP_WAIT_S, os.kill, (os.getpid(), signum))
        self._deadline.daemon = True
        self._deadline.start()

    def at_boundary(self) -> None:
        """The ranks stop at this boundary: no later signal of this request's may cut its record short."""
        if self._deadline is not None:
            self._deadline.cancel()


def interrupt_on_stop_signals(announce: bool = False) -> StopRequest:
    """Make the stop signals raise ``KeyboardInterrupt`` in this process, once per burst, for the rest of its life,
    or wait for the next iteration boundary while the returned request is deferred.

    A rank records its interrupt (manifest, exit status) while it unwinds; a repeat of the same stop raising again in
    the middle of that would leave it half-recorded. Must be called from the main thread.
    """
    stops = StopSignals()
    request = StopRequest(announce)

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        arrival = stops.arrive(signum)
        if arrival is Arrival.REPEAT:
            return
        if arrival is Arrival.FIRST:
            request.signal = signum
        if arrival is Arrival.FIRST and request.deferred:
            request.defer(signum)
            if request.announce:  # os.write: print may be the call this handler interrupted
                name = signal.Signals(signum).name
                os.write(
                    2,
                    f"[rlscale] {name}: stopping at the end of this iteration, with a checkpoint (at once if it takes "
                    f"over {STOP_WAIT_S:g} s, or on a stop signal after {SIGNAL_BURST_S:g} s)\n".encode(),
                )
            return
        raise KeyboardInterrupt

    for sig in STOP_SIGNALS:
        signal.signal(sig, interrupt)
    return request
