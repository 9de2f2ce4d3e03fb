"""No orphans: every process of a job dies with the rlscale launcher that owns it, even a SIGKILLed one.

A SIGKILLed supervisor runs no code, so the processes below it have to notice on their own:

* torchrun (or skrl's JAX launcher) runs in a session of its own, out of reach of the terminal. The supervisor
  starts it through this file, run as a script (:func:`dying_with_this_process`): it sets ``PR_SET_PDEATHSIG`` to
  SIGTERM and execs the launcher, so the kernel sends SIGTERM when the supervisor dies and torchrun's handler stops
  its workers (SIGTERM, then SIGKILL after 30 s). Not ``Popen(preexec_fn=...)``: that runs Python between fork and
  exec, which can deadlock when the parent has threads (the launcher imports torch to check the ranks' arguments,
  and ``run_supervised`` is a library function), and it rules out posix_spawn. The shim costs one bare interpreter
  start (``-I -S``: no site, so its imports are stdlib only).
* Each rank (:func:`guard_rank`) asks for the same signal when its own parent dies (torchrun, or the per-rank process
  of skrl's launcher), and runs a daemon thread that checks every second that the launcher (pid in
  ``$RLSCALE_SUPERVISOR_PID``, its start time compared so a reused pid cannot fool it) and its parent are still
  there. When either is gone it sends its own process SIGTERM, which a rank in Python code turns into a clean
  ``interrupted`` exit, and SIGKILL ``grace_s`` later: a rank blocked in a native collective never returns to Python
  to run its SIGTERM handler. The thread also covers skrl's JAX launcher, whose per-rank processes get no signal when
  it dies.

The kernel sends the parent-death signal when the *thread* that forked the child ends, not the process; both the
supervisor and torchrun fork from the thread that then waits for the child, so the signal does mean a death. Linux
only: elsewhere the launcher-pid thread is the one guard.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence

PR_SET_PDEATHSIG = 1
"""``prctl`` option: signal sent to this process when its parent thread dies (``<linux/prctl.h>``)."""

ORPHAN_GRACE_S = 10.0
"""After an orphaned rank sent itself SIGTERM, wait this long before SIGKILL."""

ORPHAN_POLL_S = 1.0
"""How often a rank checks that its launcher and its parent are still there."""


def _log(message: str) -> None:
    with contextlib.suppress(Exception):  # never fail the process being guarded over a closed stderr
        print(message, file=sys.stderr, flush=True)


def set_parent_death_signal(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent thread dies; False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def dying_with_this_process(argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """Return ``argv`` wrapped in the shim, so the process it starts gets SIGTERM when the calling process dies.

    Args:
        argv: The command; ``argv[0]`` is looked up on ``env``'s ``PATH`` as the shim's exec will.
        env: The command's environment; the current one when None.

    Raises:
        FileNotFoundError: if ``argv[0]`` cannot be found, as ``Popen`` raises it (after the shim's exec it would
            only be exit code 127).
    """
    if not sys.platform.startswith("linux"):
        return list(argv)
    path = os.pathsep.join(os.get_exec_path(None if env is None else dict(env)))
    if shutil.which(argv[0], path=path) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), str(os.getpid()), *argv]


def _exec_main(args: list[str]) -> None:
    """The shim: arm the parent-death signal, then become the command (same pid, session and environment)."""
    parent, command = int(args[0]), args[1:]
    set_parent_death_signal(signal.SIGTERM)
    # SLURM's warning signal (sbatch --signal=USR1@T) reaches every process of a job step: torchrun and skrl's JAX
    # launcher, which do not handle it, would die of it. Ignored here, it stays so across exec; rlscale's launchers and
    # ranks set their own handler.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    if os.getppid() != parent:  # the supervisor died before the signal was armed: nothing would ever send it
        sys.exit(128 + signal.SIGTERM)
    try:
        os.execvp(command[0], command)
    except OSError as error:
        _log(f"rlscale: cannot start {command[0]}: {error}")
        sys.exit(127)


def _alive(process) -> bool:
    """Whether ``process`` (a psutil.Process, checked against pid reuse) runs; a zombie counts as gone."""
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _watch(rank: int, parent: int, supervisor_pid: int | None, supervisor, grace_s: float, poll_s: float) -> None:
    while True:
        time.sleep(poll_s)
        if os.getppid() != parent:
            reason = f"its parent (pid {parent}) is gone"
            break
        if supervisor_pid is not None and (supervisor is None or not _alive(supervisor)):
            reason = f"the rlscale launcher (pid {supervisor_pid}) is gone"
            break
    _log(f"[rlscale] rank {rank}: {reason}; stopping (SIGTERM now, SIGKILL in {grace_s:g} s).")
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    _log(f"[rlscale] rank {rank}: still running {grace_s:g} s after SIGTERM; killing it (SIGKILL).")
    os.kill(os.getpid(), signal.SIGKILL)


def guard_rank(
    rank: int, supervisor_pid: int | None, *, grace_s: float = ORPHAN_GRACE_S, poll_s: float = ORPHAN_POLL_S
) -> threading.Thread:
    """Make this rank stop when its parent or the rlscale launcher dies (see the module docstring).

    Args:
        rank: Global rank, for the log line.
        supervisor_pid: The launcher's pid (``$RLSCALE_SUPERVISOR_PID``); None to watch the parent only.
        grace_s: Seconds from the SIGTERM to the SIGKILL.
        poll_s: Seconds between checks.

    Returns:
        The started daemon thread.
    """
    import psutil

    set_parent_death_signal(signal.SIGTERM)
    parent = os.getppid()
    supervisor = None
    if supervisor_pid is not None:
        with contextlib.suppress(psutil.Error):  # already gone: the first check stops the rank
            supervisor = psutil.Process(supervisor_pid)
    thread = threading.Thread(
        target=_watch,
        args=(rank, parent, supervisor_pid, supervisor, grace_s, poll_s),
        name="rlscale-orphan-guard",
        daemon=True,
    )
    thread.start()
    return thread


if __name__ == "__main__":
    _exec_main(sys.argv[1:])
