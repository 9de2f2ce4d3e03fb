"""Supervision of a distributed launcher: own its process group, forward signals, leave no orphan behind.

``torchrun`` runs in a session (and process group) of its own, so the terminal's Ctrl-C reaches only this
supervisor, which forwards it once to the whole group. Had torchrun shared our group, the terminal's signal and the
forwarded one would both land inside torchelastic's shutdown handler, which then aborts before reaping its workers.
torchrun in turn starts every worker in a session of its own, out of reach of its group: the supervisor therefore
also remembers every descendant it has seen, and escalations and the final reap signal those one by one. Should the
supervisor itself be SIGKILLed, :mod:`.orphans` still brings the launcher and the ranks down.

One Ctrl-C can reach the supervisor more than once (the terminal's signal to its group and a wrapper's forward of it,
or a batch system's signal to every process and the forward of a supervisor above): signals of one burst
(:mod:`rlscale.run.stop_signals`) are one request, forwarded once; only a signal after the burst kills at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import IO

import psutil

from rlscale.launch.orphans import dying_with_this_process
from rlscale.run.stop_signals import SIGNAL_BURST_S, STOP_SIGNALS, Arrival, StopSignals

GRACEFUL_SHUTDOWN_S = 40.0
"""After a forwarded signal, wait this long before re-sending SIGTERM: torchelastic gives its workers 30 s."""

FORCED_SHUTDOWN_S = 15.0
"""After the re-sent SIGTERM, wait this long before SIGKILL."""

STRAGGLER_GRACE_S = 10.0
"""After the launcher exits, give its leftovers this long before SIGKILL: a rank wedged in a native CUDA/NCCL call
never returns to Python to see a signal, and keeps its GPU memory while it lives."""

FAILED_RANK_GRACE_S = 5.0
"""After a rank reported failure, give the others this long to exit before SIGKILL: ranks blocked in a collective
with a dead peer never return to Python to see a SIGTERM."""

POLL_INTERVAL_S = 0.1
"""How often the launcher, the deadlines and the leftovers are checked."""

TREE_REFRESH_S = 1.0
"""How often the launcher's descendants are listed; listing scans every process of the machine."""


def _log(message: str) -> None:
    """Print a status line to stderr, never failing (it may run inside a signal handler)."""
    with contextlib.suppress(Exception):  # A handler interrupting another print raises "reentrant call".
        print(message, file=sys.stderr, flush=True)


def _signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to every process of the group, ignoring a group that is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _running(proc: psutil.Process) -> bool:
    """Return whether ``proc`` (checked against pid reuse) runs; a zombie holds nothing and counts as gone."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def group_alive(pgid: int) -> bool:
    """Return whether a process other than a zombie remains in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    # killpg also succeeds for zombies whose new parent has not reaped them yet.
    for proc in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                return True
    return False


def exit_code(returncode: int) -> int:
    """Map a ``Popen.returncode`` to a shell-style exit code (128+N for a child killed by signal N)."""
    return 128 - returncode if returncode < 0 else returncode


class _Tree:
    """The launcher's process group plus every descendant of the launcher seen so far."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.seen: set[psutil.Process] = set()
        self.next_refresh = 0.0

    def refresh(self, force: bool = False) -> None:
        """Remember the launcher's current descendants (only while it is unreaped, so its pid is still its own)."""
        if (force or time.monotonic() >= self.next_refresh) and self.proc.poll() is None:
            self.next_refresh = time.monotonic() + TREE_REFRESH_S
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(self.proc.pid)
                self.seen.update([root, *root.children(recursive=True)])

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the launcher's group and to every remembered descendant still running."""
        self.refresh(force=True)
        _signal_group(self.proc.pid, sig)
        for proc in [proc for proc in self.seen if _running(proc)]:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)  # psutil refuses a pid that now belongs to another process.

    def alive(self) -> bool:
        """Return whether any process of the group or any remembered descendant still runs."""
        return group_alive(self.proc.pid) or any(_running(proc) for proc in self.seen)


def _escalate(tree: _Tree, deadlines: dict[str, float], forced_s: float) -> None:
    """Re-send SIGTERM, then SIGKILL, to the tree once their deadlines have passed."""
    now = time.monotonic()
    if now >= deadlines.get("kill", float("inf")):
        _log("[WARNING] Killing distributed workers (SIGKILL).")
        tree.signal(signal.SIGKILL)
        deadlines["kill"] = now + forced_s
    elif now >= deadlines.get("terminate", float("inf")):
        _log("[WARNING] Distributed workers are still running; sending SIGTERM again.")
        tree.signal(signal.SIGTERM)
        deadlines["terminate"] = float("inf")


def run_supervised(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    graceful_s: float = GRACEFUL_SHUTDOWN_S,
    forced_s: float = FORCED_SHUTDOWN_S,
    straggler_s: float = STRAGGLER_GRACE_S,
    poll_s: float = POLL_INTERVAL_S,
    burst_s: float = SIGNAL_BURST_S,
    abort_check: Callable[[], str | None] | None = None,
    stdout: IO | None = None,
    stderr: IO | None = None,
    pass_fds: Sequence[int] = (),
    stops: StopSignals | None = None,
    forward_as: Mapping[int, int] | None = None,
) -> int:
    """Run ``argv`` in a process group of its own and tear everything it started down however the run ends.

    The first SIGINT/SIGTERM is forwarded to the group; if the launcher outlives ``graceful_s``, SIGTERM is sent
    again and ``forced_s`` later SIGKILL. Signals within ``burst_s`` of the first are the same request delivered
    again and change nothing; a signal after that kills at once. After the launcher exits, its leftovers get
    ``straggler_s`` before SIGKILL. Signals are only handled when called from the main thread. The launcher gets
    SIGTERM should this process die without running any of that (SIGKILL): see :mod:`.orphans`.

    Args:
        argv: Command to run (not through a shell).
        env: Its environment; the current one when ``None``.
        graceful_s: Seconds from the first signal to the re-sent SIGTERM.
        forced_s: Seconds from the re-sent SIGTERM to SIGKILL.
        straggler_s: Seconds the launcher's leftovers may outlive it before SIGKILL.
        poll_s: Polling interval.
        burst_s: Seconds after the first signal in which another one repeats it rather than asking again.
        abort_check: Polled while the launcher runs; a returned message stops the run as a signal would. This is how
            a failed rank ends a job under a launcher that waits for every rank (skrl's JAX launcher).
        stdout: Where the launcher's stdout goes; the inherited stdout when ``None``.
        stderr: Where its stderr goes; the inherited stderr when ``None``.
        pass_fds: Open file descriptors the launcher inherits (a study job's GPU lease locks, held while it lives).
        stops: Tells the stop signals apart (its own when ``None``); a caller that passes one can ask it afterwards
            whether the run was stopped on request (:attr:`~rlscale.run.stop_signals.StopSignals.arrived`), and by
            which signal.
        forward_as: Stop signals forwarded as another (torchrun and skrl's JAX launcher stop their workers on
            SIGTERM, and die of SIGUSR1).

    Returns:
        The launcher's exit code, 128+N if it was killed by signal N.
    """
    proc: subprocess.Popen[bytes] | None = None
    deadlines: dict[str, float] = {}  # "terminate" and "kill" once a signal arrived.
    pending: list[int] = []  # Signals that arrived before the launcher existed.
    stops = StopSignals(burst_s) if stops is None else stops
    repeat_told = False  # A repeat of the first signal's burst is told once on the console.

    def start_shutdown() -> None:
        deadlines.update(terminate=time.monotonic() + graceful_s, kill=time.monotonic() + graceful_s + forced_s)

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal repeat_told
        arrival = stops.arrive(signum)
        name = signal.Signals(signum).name
        if arrival is Arrival.REPEAT:
            if not repeat_told:
                repeat_told = True
                _log(
                    f"[INFO] {name} again within {burst_s:g} s of the first: the same stop delivered twice, not a "
                    "second one; still stopping gracefully."
                )
            return
        if arrival is Arrival.AGAIN or "kill" in deadlines:  # asked again, or the run is already being stopped
            # The polling loop kills within poll_s: it lists the descendants first, which must happen while the
            # launcher still lives, and listing is no work for a handler that may interrupt that same loop.
            _log("[WARNING] Second signal received; killing distributed workers now.")
            deadlines["kill"] = time.monotonic()
            return
        start_shutdown()
        _log(
            f"[INFO] Received {name}; stopping distributed workers (SIGTERM again after {graceful_s:g} s, SIGKILL "
            f"{forced_s:g} s later; another signal after {burst_s:g} s kills them at once)."
        )
        forwarded = (forward_as or {}).get(signum, signum)
        if proc is None:
            pending.append(forwarded)
        else:
            _signal_group(proc.pid, forwarded)

    previous: list[tuple[int, object]] = []
    if threading.current_thread() is threading.main_thread():
        # Installed before Popen so that a signal arriving meanwhile is forwarded, not lost.
        previous = [(sig, signal.signal(sig, forward)) for sig in STOP_SIGNALS]
    try:
        # Through the parent-death shim: should this process be SIGKILLed, the launcher still gets SIGTERM.
        command = dying_with_this_process(argv, env)
        proc = subprocess.Popen(
            command,
            env=None if env is None else dict(env),
            stdout=stdout,
            stderr=stderr,
            pass_fds=tuple(pass_fds),
            start_new_session=True,
        )
        tree = _Tree(proc)
        for signum in pending:
            _signal_group(proc.pid, signum)
        try:
            while True:
                tree.refresh()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    return exit_code(proc.wait(timeout=poll_s))
                if abort_check is not None and "kill" not in deadlines and (reason := abort_check()):
                    _log(f"[ERROR] {reason}; stopping distributed workers.")
                    deadlines.update(terminate=float("inf"), kill=time.monotonic() + FAILED_RANK_GRACE_S)
                    tree.signal(signal.SIGTERM)
                _escalate(tree, deadlines, forced_s)
        finally:
            if proc.poll() is None:  # Left the loop by an exception: stop the run rather than orphan it.
                tree.signal(signal.SIGTERM)
            deadline = time.monotonic() + straggler_s
            while tree.alive():
                if time.monotonic() >= deadline:
                    _log("[WARNING] Killing distributed workers that outlived the launcher.")
                    tree.signal(signal.SIGKILL)
                    break
                _escalate(tree, deadlines, forced_s)  # A second signal still kills at once.
                time.sleep(poll_s)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)  # Collect the launcher if it had to be killed here.
    finally:
        for sig, handler in previous:
            signal.signal(sig, handler)  # type: ignore[arg-type]
