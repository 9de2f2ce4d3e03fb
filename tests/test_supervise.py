"""Tests of the supervisor with real processes (plain Python children, no torch)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from rlscale.launch import supervise
from rlscale.launch.supervise import run_supervised
from rlscale.run.stop_signals import Arrival, StopSignals, asks_requeue

SRC = Path(__file__).resolve().parents[1] / "src"

# The launcher stand-in: starts a worker, publishes both pids once the worker is ready, then waits. Its arguments:
# pid file; "ignore"/"obey": the worker's SIGTERM; "ignore"/"obey": its own SIGTERM and SIGINT; seconds it waits
# before exiting 0; "own"/"shared": whether the worker gets a session of its own, as torchrun gives its workers.
LAUNCHER = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    pid_file, worker_sigterm, own_signals, stay_s, session = sys.argv[1:6]
    if own_signals == "ignore":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker_code = (
        "import signal, sys, time\\n"
        + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n" if worker_sigterm == "ignore" else "")
        + "print('ready', flush=True)\\n"
        + "time.sleep(60)\\n"
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", worker_code], stdout=subprocess.PIPE, start_new_session=session == "own"
    )
    worker.stdout.readline()
    with open(pid_file + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {worker.pid}")
    os.replace(pid_file + ".tmp", pid_file)
    time.sleep(float(stay_s))
    """
)


def _launcher_argv(
    pid_file: Path, worker_sigterm: str = "obey", own: str = "obey", stay_s: float = 60, session: str = "shared"
) -> list[str]:
    """Return the command of the launcher stand-in."""
    return [sys.executable, "-c", LAUNCHER, str(pid_file), worker_sigterm, own, str(stay_s), session]


@pytest.fixture
def start_supervisor():
    """Run ``run_supervised(argv, **limits)`` in a separate Python process, so signals can be sent to it."""
    started: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str], **limits: float) -> subprocess.Popen[bytes]:
        code = (
            "import sys\n"
            "from rlscale.launch.supervise import run_supervised\n"
            f"sys.exit(run_supervised(sys.argv[1:], **{limits!r}))\n"
        )
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        started.append(subprocess.Popen([sys.executable, "-c", code, *argv], env=env, stderr=subprocess.PIPE))
        return started[-1]

    yield start
    for supervisor in started:
        if supervisor.poll() is None:
            supervisor.kill()
        supervisor.wait()


def _wait_for_pids(pid_file: Path, timeout: float = 5.0) -> tuple[int, int]:
    """Wait until the launcher stand-in published its own pid and its worker's."""
    deadline = time.monotonic() + timeout
    while not pid_file.exists():
        assert time.monotonic() < deadline, "the launcher stand-in never became ready"
        time.sleep(0.02)
    launcher, worker = pid_file.read_text().split()
    return int(launcher), int(worker)


def _alive(pid: int) -> bool:
    """Return whether ``pid`` runs; a zombie awaiting its reaper holds nothing and counts as gone."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pids: tuple[int, ...], timeout: float = 2.0) -> bool:
    """Return whether all ``pids`` are gone within ``timeout`` (a killed orphan needs a moment to be reaped)."""
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in pids):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def pid_file(tmp_path: Path):
    """Path of the pid file; any process still alive afterwards is killed so that a failing test leaks nothing."""
    path = tmp_path / "pids"
    yield path
    if path.exists():
        for pid in map(int, path.read_text().split()):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


class TestExitCode:
    @pytest.mark.parametrize(("code", "expected"), [("raise SystemExit(0)", 0), ("raise SystemExit(3)", 3)])
    def test_exit_status_propagates(self, code, expected):
        """The launcher's exit status is returned unchanged."""
        assert run_supervised([sys.executable, "-c", code]) == expected

    def test_killed_by_signal_is_128_plus_n(self):
        """A launcher killed by SIGKILL yields 137, as a shell reports it."""
        assert run_supervised([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]) == 137

    def test_environment_is_passed(self):
        """env replaces the child's environment."""
        code = "import os, sys; sys.exit(int(os.environ['RLSCALE_TEST_CODE']))"
        assert run_supervised([sys.executable, "-c", code], env={**os.environ, "RLSCALE_TEST_CODE": "7"}) == 7

    def test_own_session(self):
        """The launcher leads a session (hence a process group) of its own."""
        code = "import os, sys; sys.exit(0 if os.getsid(0) == os.getpid() == os.getpgid(0) else 1)"
        assert run_supervised([sys.executable, "-c", code]) == 0

    def test_no_shell_and_handlers_restored(self):
        """argv is not run through a shell, and the previous signal handlers are back afterwards, even on error."""
        before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
        with pytest.raises(FileNotFoundError):
            run_supervised(["exit 4; true"])
        assert run_supervised([sys.executable, "-c", "pass"]) == 0
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


class TestSignals:
    def test_sigterm_tears_down_the_group(self, pid_file, start_supervisor):
        """SIGTERM to the supervisor reaches the launcher and its worker; no process of the group survives."""
        supervisor = start_supervisor(_launcher_argv(pid_file), straggler_s=2.0)
        pids = _wait_for_pids(pid_file)
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=8) == 128 + signal.SIGTERM
        assert _wait_gone(pids)
        assert b"Received SIGTERM" in supervisor.stderr.read()

    @pytest.mark.parametrize("session", ["shared", "own"])
    def test_straggler_ignoring_sigterm_is_killed(self, pid_file, start_supervisor, session):
        """A worker that ignores SIGTERM outlives the launcher and is SIGKILLed after the straggler grace."""
        argv = _launcher_argv(pid_file, worker_sigterm="ignore", session=session)
        supervisor = start_supervisor(argv, straggler_s=0.5)
        pids = _wait_for_pids(pid_file)
        time.sleep(supervise.TREE_REFRESH_S + 0.2)  # A worker in its own session is found by listing descendants.
        start = time.monotonic()
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=30) == 128 + signal.SIGTERM
        assert time.monotonic() - start > 0.4  # not before the straggler grace; a busy host may only make it later
        assert _wait_gone(pids)
        assert b"outlived the launcher" in supervisor.stderr.read()

    @pytest.mark.parametrize("session", ["shared", "own"])
    def test_straggler_after_clean_exit_is_killed(self, pid_file, session):
        """A worker left behind by a launcher that exits 0 is killed too, and the exit code stays 0."""
        argv = _launcher_argv(pid_file, "ignore", stay_s=supervise.TREE_REFRESH_S + 0.5, session=session)
        assert run_supervised(argv, straggler_s=0.3) == 0
        assert _wait_gone(_wait_for_pids(pid_file))

    @pytest.mark.parametrize("session", ["shared", "own"])
    def test_escalation_when_sigterm_is_ignored(self, pid_file, start_supervisor, session):
        """A tree ignoring SIGTERM gets SIGTERM again after the graceful window, then SIGKILL."""
        argv = _launcher_argv(pid_file, worker_sigterm="ignore", own="ignore", session=session)
        supervisor = start_supervisor(argv, graceful_s=0.5, forced_s=0.5, straggler_s=5.0)
        pids = _wait_for_pids(pid_file)
        start = time.monotonic()
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=30) == 128 + signal.SIGKILL
        assert time.monotonic() - start > 0.9  # both windows passed first
        assert _wait_gone(pids)
        err = supervisor.stderr.read()
        assert b"sending SIGTERM again" in err and b"(SIGKILL)" in err

    @pytest.mark.parametrize("session", ["shared", "own"])
    def test_second_sigint_kills_at_once(self, pid_file, start_supervisor, session):
        """A second Ctrl-C kills the launcher and its workers without waiting for the (long) graceful window."""
        argv = _launcher_argv(pid_file, worker_sigterm="ignore", own="ignore", session=session)
        supervisor = start_supervisor(argv, graceful_s=30.0, forced_s=30.0, burst_s=0.2)
        pids = _wait_for_pids(pid_file)
        supervisor.send_signal(signal.SIGINT)
        assert supervisor.stderr.readline().startswith(b"[INFO] Received SIGINT")
        time.sleep(0.3)  # past the burst of the first: this is the user pressing Ctrl-C again
        assert supervisor.poll() is None  # The launcher ignores the first Ctrl-C, so it keeps running.
        supervisor.send_signal(signal.SIGINT)
        assert supervisor.wait(timeout=20) == 128 + signal.SIGKILL  # a safety net, below the 30 s window
        assert _wait_gone(pids)
        err = supervisor.stderr.read()
        assert b"Second signal received" in err and b"sending SIGTERM again" not in err  # the window never ran out

    def test_signal_repeated_within_its_burst_waits_for_the_grace_periods(self, pid_file, start_supervisor):
        """The same Ctrl-C delivered twice (the terminal's to the whole group, then a wrapper's forward) is one stop:
        the launcher still gets the graceful window, then SIGTERM again, then SIGKILL."""
        argv = _launcher_argv(pid_file, worker_sigterm="ignore", own="ignore")
        supervisor = start_supervisor(argv, graceful_s=0.5, forced_s=0.5, burst_s=60.0)
        pids = _wait_for_pids(pid_file)
        supervisor.send_signal(signal.SIGINT)
        assert supervisor.stderr.readline().startswith(b"[INFO] Received SIGINT")
        supervisor.send_signal(signal.SIGINT)
        assert supervisor.wait(timeout=30) == 128 + signal.SIGKILL
        assert _wait_gone(pids)
        err = supervisor.stderr.read()
        assert b"SIGINT again within 60 s of the first" in err
        assert b"Second signal received" not in err and b"sending SIGTERM again" in err


class TestStopSignals:
    def test_first_then_repeats_within_the_burst(self):
        stops = StopSignals(burst_s=math.inf)
        assert [stops.arrive() for _ in range(3)] == [Arrival.FIRST, Arrival.REPEAT, Arrival.REPEAT]

    def test_a_signal_after_the_burst_asks_again_and_opens_a_burst_of_its_own(self):
        stops = StopSignals(burst_s=0.0)
        assert [stops.arrive() for _ in range(2)] == [Arrival.FIRST, Arrival.AGAIN]
        stops.burst_s = math.inf
        assert stops.arrive() is Arrival.REPEAT

    def test_the_first_signal_is_kept(self):
        stops = StopSignals(burst_s=math.inf)
        stops.arrive(signal.SIGUSR1)
        stops.arrive(signal.SIGTERM)  # the launcher's forward of it, as torchrun takes it
        assert stops.first == signal.SIGUSR1

    @pytest.mark.parametrize(
        ("signum", "environ", "requeue"),
        [
            (signal.SIGUSR1, {"SLURM_JOB_ID": "42"}, True),
            (signal.SIGUSR1, {}, False),  # no SLURM job to requeue
            (signal.SIGTERM, {"SLURM_JOB_ID": "42"}, False),  # scancel, or a preemption SLURM requeues itself
            (None, {"SLURM_JOB_ID": "42"}, False),
        ],
    )
    def test_only_slurms_warning_signal_asks_for_a_requeue(self, signum, environ, requeue):
        assert asks_requeue(signum, environ) is requeue


class TestConstants:
    def test_grace_periods(self):
        """The graceful window exceeds torchelastic's own 30 s; the other deadlines are the documented ones."""
        assert supervise.GRACEFUL_SHUTDOWN_S == 40.0 > 30.0
        assert (supervise.FORCED_SHUTDOWN_S, supervise.STRAGGLER_GRACE_S) == (15.0, 10.0)

    @pytest.mark.parametrize(("returncode", "expected"), [(0, 0), (3, 3), (-9, 137), (-15, 143)])
    def test_exit_code_mapping(self, returncode, expected):
        """Negative Popen return codes (killed by signal N) map to 128+N."""
        assert supervise.exit_code(returncode) == expected
