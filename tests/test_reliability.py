"""Reliability: the hang watchdog and the no-orphan guarantee, with real torchrun processes on CPU/gloo.

The watchdog's judgement is also tested on its own, with heartbeat files and a fake clock (and, for a restarted group,
fake processes); the orphan guards are also tested with plain Python processes, so that a rank ignoring SIGTERM can be
staged without torch.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest
import torch
from process_utils import processes_mentioning, wait_for_no_process

from rlscale.heartbeat import HeartbeatWriter, heartbeat_path
from rlscale.launch.hang_watch import HangWatch

SRC = Path(__file__).resolve().parents[1] / "src"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
TRAIN = ["train_multigpu", "--task", "Isaac-Cartpole", "--device", "cpu", "--num_envs", "64", "--num_gpus", "2"]


class Job:
    """``rlscale ARGS...`` with its output (stdout and stderr) read line by line as it comes, each line timed."""

    def __init__(self, *args: str, env: dict[str, str], own_session: bool = False) -> None:
        command = [sys.executable, "-m", "rlscale", *args]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=own_session
        )
        self.lines: list[tuple[float, str]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append((time.monotonic(), line))

    def wait_for(self, pattern: str, timeout: float) -> tuple[float, str]:
        """Time and text of the first line matching ``pattern``; fails the test after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, line in list(self.lines):
                if re.search(pattern, line):
                    return at, line
            if self.process.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.05)
        pytest.fail(f"no line matching {pattern!r} within {timeout} s:\n{self.output[-3000:]}")

    def finish(self, timeout: float) -> tuple[int, float]:
        """Exit code and the time the launcher exited."""
        code = self.process.wait(timeout=timeout)
        ended = time.monotonic()
        self.reader.join(timeout=10)
        return code, ended

    @property
    def output(self) -> str:
        return "".join(line for _, line in self.lines)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@pytest.fixture
def jobs():
    """Start jobs; whatever a failing test leaves running is killed."""
    started: list[Job] = []
    yield (
        lambda *args, env=ENV, own_session=False: (
            started.append(Job(*args, env=env, own_session=own_session)) or (started[-1])
        )
    )
    for job in started:
        job.kill()


def running(process: psutil.Process) -> bool:
    """Whether ``process`` runs; a zombie awaiting its reaper holds nothing and counts as gone."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.fixture
def no_leftovers(tmp_path):
    """The test's marker (its tmp path); any process still mentioning it afterwards is killed."""
    yield str(tmp_path)
    for process in processes_mentioning(str(tmp_path)):
        process.kill()


class TestHangWatch:
    """The watchdog's judgement, from heartbeat files and a fake clock: who is stalled, who is only waiting."""

    @pytest.fixture
    def clock(self):
        now = [100.0]
        return now

    def watch(self, tmp_path: Path, clock: list[float], ranks: int = 2, timeout: float = 5.0) -> HangWatch:
        return HangWatch(tmp_path, ranks, timeout, clock=lambda: clock[0])

    def test_rank_waiting_for_a_beating_peer_is_not_stalled(self, tmp_path, clock):
        """Rank 0, ahead and silent for longer than the timeout, waits for rank 1, which still beats: no stall.
        Once rank 1 falls silent too, rank 1 alone is named, with where it is and who waits for it."""
        watch = self.watch(tmp_path, clock)
        rank0, rank1 = HeartbeatWriter(tmp_path, 0), HeartbeatWriter(tmp_path, 1)
        rank0.beat("update", 2)
        rank1.beat("collect", 2)
        for _ in range(8):  # rank 1 renews every second; rank 0 stays silent for 8 s
            assert watch.check() is None
            clock[0] += 1.0
            rank1.renew()
        assert watch.check() is None
        clock[0] += 5.5
        assert watch.check() == (
            "rank 1 made no progress for 5.5 s (phase collect, iteration 2); "
            "ahead and presumably waiting in a collective: rank 0 (phase update, iteration 2)"
        )

    def test_a_rank_overtaken_by_the_peer_it_waited_for_gets_the_whole_timeout(self, tmp_path, clock):
        """Rank 0 waits silently in iteration 2's update while rank 1 works 8 s longer (beating); both leave the
        collective, and rank 1 beats iteration 3 first while rank 0 still logs: rank 0 is now the slowest, but it was
        waiting until then, so its clock starts there (this once stopped a healthy run on a busy host)."""
        watch = self.watch(tmp_path, clock)
        rank0, rank1 = HeartbeatWriter(tmp_path, 0), HeartbeatWriter(tmp_path, 1)
        rank0.beat("update", 2)
        rank1.beat("collect", 2)
        for _ in range(8):
            assert watch.check() is None
            clock[0] += 1.0
            rank1.renew()
        rank1.beat("collect", 3)
        clock[0] += 0.5
        assert watch.check() is None  # rank 0 silent for 8.5 s, last seen waiting 1.5 s ago (the previous check)
        clock[0] += 5.0
        assert watch.check() == (
            "rank 0 made no progress for 6.5 s (phase update, iteration 2); "
            "ahead and presumably waiting in a collective: rank 1 (phase collect, iteration 3)"
        )

    def test_startup_is_not_timed(self, tmp_path, clock):
        """Nothing is judged while a local rank is in startup or has not beaten at all."""
        watch = self.watch(tmp_path, clock)
        HeartbeatWriter(tmp_path, 0).beat("collect", 0)
        assert watch.check() is None
        clock[0] += 60
        assert watch.check() is None  # rank 1 has no heartbeat yet
        HeartbeatWriter(tmp_path, 1).beat("startup")
        clock[0] += 60
        assert watch.check() is None  # rank 1 still starting up, rank 0 waits for it

    def test_ranks_silent_at_the_same_point_are_named_together(self, tmp_path, clock):
        """Ranks stalled at the same phase and iteration are all named; a finished rank is not judged."""
        watch = self.watch(tmp_path, clock, ranks=3)
        for rank in (0, 1):
            HeartbeatWriter(tmp_path, rank).beat("update", 7)
        HeartbeatWriter(tmp_path, 2).beat("finished")
        assert watch.check() is None
        clock[0] += 5.0
        assert watch.check() is None  # exactly the timeout is not yet a hang
        clock[0] += 0.2
        assert watch.check() == "ranks 0, 1 made no progress for 5.2 s (phase update, iteration 7)"
        assert watch.stall == watch.check()

    def test_ended_ranks_are_not_judged_and_restarted_ones_take_their_place(self, tmp_path, clock):
        """Rank 1 crashed (a finished heartbeat) and torchrun, restarting the group under --max_restarts, had to SIGKILL
        rank 0 in its collective (no finished heartbeat): however long the restart takes, no hang is named while their
        processes are gone. The restarted ranks' heartbeats, from new processes, are then judged as any."""
        running = {10, 11}
        watch = HangWatch(tmp_path, 2, 5.0, clock=lambda: clock[0], running=running.__contains__)

        def beat(rank: int, pid: int, phase: str, iteration: int | None = None) -> None:
            """A heartbeat as HeartbeatWriter writes it, from process ``pid``."""
            data = {"rank": rank, "pid": pid, "phase": phase, "iteration": iteration, "seq": next(beats)}
            heartbeat_path(tmp_path, rank).write_text(json.dumps(data))

        beats = itertools.count(1)

        beat(0, 10, "update", 3)
        beat(1, 11, "finished")
        assert watch.check() is None
        running.clear()
        clock[0] += 60.0
        assert watch.check() is None  # rank 0's last heartbeat is a minute old, but its process is gone
        running.update({20, 21})
        beat(0, 20, "startup")
        beat(1, 21, "collect", 2)
        clock[0] += 60.0
        assert watch.check() is None  # restarted rank 0 still starting up
        beat(0, 20, "update", 2)
        assert watch.check() is None
        clock[0] += 5.5
        assert watch.check() == (
            "rank 1 made no progress for 5.5 s (phase collect, iteration 2); "
            "ahead and presumably waiting in a collective: rank 0 (phase update, iteration 2)"
        )


class TestHangDetection:
    """An injected hang is found by the heartbeat watchdog and the job is torn down."""

    TIMEOUT_S = 5.0

    def test_injected_hang_is_named_and_torn_down(self, jobs, no_leftovers):
        """Rank 1 blocks forever at iteration 2: once it has been quiet for the timeout the launcher names rank 1
        with its phase and iteration, tears the job down, exits non-zero, and leaves nothing. (How soon after the
        timeout it notices is TestHangWatch's, on a clock of its own: this host may be busy.)"""
        env = {**ENV, "RLSCALE_INJECT_FAULT": "hang:rank=1,iteration=2"}
        job = jobs(
            *TRAIN, "--max_iterations", "50", "--hang_timeout", str(self.TIMEOUT_S), "--log_root", no_leftovers, env=env
        )
        # Rank 0 prints "it 2/50" as it starts iteration 2, after the update that ends in lock-step with rank 1:
        # from then on rank 1 is hung.
        job.wait_for(r"\[rlscale\] it 2/50", timeout=60)
        _, report = job.wait_for(r"made no progress", timeout=self.TIMEOUT_S + 60)
        code, _ = job.finish(timeout=60)
        assert code != 0
        assert report.startswith("[ERROR] rank 1 made no progress for "), report
        assert "(phase collect, iteration 2)" in report and "rank 0 (phase update, iteration 2)" in report
        assert report.rstrip().endswith("stopping distributed workers.")
        quiet_s = float(re.search(r"for ([0-9.]+) s", report).group(1))
        assert quiet_s >= self.TIMEOUT_S  # the watchdog's own clock: it never stops a job before the timeout
        assert not wait_for_no_process(no_leftovers, within=5)


class TestNoFalsePositive:
    """A slow but live run is not a hung one."""

    def test_rank_waiting_for_a_slow_peer_is_progress(self, jobs, no_leftovers, tmp_path):
        """Rank 1 works 10 s longer at iteration 2 while heartbeating, so rank 0 sits in one all-reduce for longer
        than --hang_timeout 6: the run still completes (startup and the final sync are not mistaken for hangs
        either)."""
        env = {**ENV, "RLSCALE_INJECT_FAULT": "stall:rank=1,iteration=2,seconds=10"}
        job = jobs(*TRAIN, "--max_iterations", "4", "--hang_timeout", "6", "--log_root", no_leftovers, env=env)
        code, _ = job.finish(timeout=90)
        assert code == 0, job.output[-3000:]
        assert "made no progress" not in job.output
        assert "ranks in sync (2)" in job.output
        slow = re.search(r"it 3/4 .*", job.output)  # iteration 2 is the third: it took the stall's 10 s
        assert slow and int(slow.group(0).split()[2].replace(",", "")) < 1000, slow


class TestCtrlC:
    """One Ctrl-C stops a job gracefully however many times it is delivered."""

    def test_one_ctrl_c_delivered_to_every_process_and_forwarded_stops_gracefully(self, jobs, no_leftovers):
        """SIGINT reaches every process of the job at once (as when they all share the terminal's foreground group,
        or a batch system signals every process of a job), and a wrapper forwards it to the launcher once more after
        the launcher has acted on it: the ranks still stop gracefully at the same iteration boundary, nothing is
        SIGKILLed, rank 0 saves a checkpoint of every finished iteration, nothing is left running, the exit code is 130,
        and the console shows the command that continues the run."""
        job = jobs(
            *TRAIN,
            *("--max_iterations", "500", "--log_root", no_leftovers),
            own_session=True,
        )
        job.wait_for(r"\[rlscale\] it 4/500", timeout=90)
        launcher = psutil.Process(job.process.pid)
        tree = [launcher, *launcher.children(recursive=True)]
        assert len(tree) >= 4, [p.cmdline()[:3] for p in tree]  # launcher, torchrun, two ranks
        os.killpg(job.process.pid, signal.SIGINT)
        for process in tree[1:]:  # torchrun and the ranks have sessions of their own
            process.send_signal(signal.SIGINT)
        job.wait_for(r"Received SIGINT", timeout=30)
        job.process.send_signal(signal.SIGINT)  # the wrapper's forward of the same Ctrl-C
        code, _ = job.finish(timeout=120)
        output = job.output
        assert code == 128 + signal.SIGINT, output[-3000:]
        assert not re.search(r"(?i)killing|forcefully|second signal", output), output[-3000:]  # no SIGKILL, anywhere
        assert "SIGINT again" in output  # the forward was told apart from a second Ctrl-C
        assert re.search(r"rank 0, rank 1 stopped gracefully", output), output[-3000:]
        (manifest_path,) = Path(no_leftovers).glob("rsl_rl/Isaac-Cartpole/*/manifest.json")
        manifests = [
            json.loads(path.read_text()) for path in (manifest_path, manifest_path.parent / "rank_1" / "manifest.json")
        ]
        assert [manifest["status"] for manifest in manifests] == ["interrupted", "interrupted"]
        finished = len(manifests[0]["iterations"])
        assert finished >= 4 and [len(manifest["iterations"]) for manifest in manifests] == [finished] * 2
        # Both ranks stopped at the same iteration boundary, and rank 0 saved every finished iteration.
        assert [manifest["stop"]["iterations"] for manifest in manifests] == [finished] * 2
        checkpoint = manifest_path.parent / f"model_{finished - 1}.pt"
        assert manifests[0]["stop"]["checkpoint"] == str(checkpoint) and manifests[1]["stop"]["checkpoint"] is None
        assert torch.load(checkpoint, weights_only=True)["iter"] == finished - 1
        assert re.search(r"to continue this run: rlscale train_multigpu .* --resume auto\n", output), output[-3000:]
        assert not any(running(process) for process in tree)
        assert not wait_for_no_process(no_leftovers, within=30)


class TestNoOrphans:
    """SIGKILL of the rlscale launcher leaves no torchrun and no rank behind, even a rank blocked in a collective."""

    BOUND_S = 20.0
    """The test's bound (the guarantee is 60 s): torchrun gets SIGTERM at once, a rank SIGKILLs itself after 10 s."""

    def test_sigkill_of_launcher_leaves_nothing(self, jobs, no_leftovers):
        """Rank 1 hangs at iteration 2 (watchdog off) and rank 0 blocks in the update's all-reduce; then the launcher
        is SIGKILLed. torchrun and both ranks are gone within the bound."""
        env = {**ENV, "RLSCALE_INJECT_FAULT": "hang:rank=1,iteration=2"}
        job = jobs(*TRAIN, "--max_iterations", "50", "--hang_timeout", "0", "--log_root", no_leftovers, env=env)
        job.wait_for(r"\[rlscale\] it 2/50", timeout=60)
        time.sleep(1.0)  # rank 0 is now inside the all-reduce that rank 1 never joins
        names = {" ".join(p.info["cmdline"][1:3]) for p in processes_mentioning(no_leftovers)}
        assert {"-m rlscale", "-m rlscale.launch.torchrun"} <= names, names
        assert len(processes_mentioning(no_leftovers)) >= 4  # launcher, torchrun, two ranks
        job.process.kill()
        killed = time.monotonic()
        left = wait_for_no_process(no_leftovers, within=self.BOUND_S)
        assert not left, [p.info["cmdline"][:3] for p in left]
        print(f"all gone {time.monotonic() - killed:.1f} s after SIGKILL")

    def test_launcher_dies_with_its_supervisor(self):
        """A command started through the parent-death shim gets SIGTERM as soon as the process that started it is
        SIGKILLed (what torchrun gets when the rlscale launcher is)."""
        code = (
            "import subprocess, sys\n"
            "from rlscale.launch.orphans import dying_with_this_process\n"
            "child = subprocess.Popen(dying_with_this_process([sys.executable, '-c', 'import time; time.sleep(60)']),"
            " start_new_session=True)\n"
            "print(child.pid, flush=True)\n"
            "child.wait()\n"
        )
        parent = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env={**ENV, "PYTHONPATH": str(SRC)}
        )
        child = psutil.Process(int(parent.stdout.readline()))
        time.sleep(0.5)  # the shim has exec'd the command by now
        assert child.cmdline()[1:3] == ["-c", "import time; time.sleep(60)"]
        parent.kill()
        parent.wait()
        try:
            deadline = time.monotonic() + 30.0  # a safety net: the kernel signals the child at once
            while running(child) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not running(child), "the command outlived the process that started it"
        finally:
            if running(child):
                child.kill()

    def test_rank_ignoring_sigterm_is_killed_after_the_grace(self, tmp_path):
        """A rank whose launcher died gets SIGTERM; one that cannot act on it (ignored here, as a rank blocked in
        native code cannot) is SIGKILLed after the grace."""
        supervisor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        rank_code = textwrap.dedent(
            f"""
            import signal, time
            from rlscale.launch.orphans import guard_rank
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            guard_rank(3, {supervisor.pid}, grace_s=1.0, poll_s=0.1)
            print("guarded", flush=True)
            time.sleep(60)
            """
        )
        rank = subprocess.Popen(
            [sys.executable, "-c", rank_code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**ENV, "PYTHONPATH": str(SRC)},
        )
        try:
            assert rank.stdout.readline() == "guarded\n"
            time.sleep(0.3)
            assert rank.poll() is None  # the launcher lives: the guard stays quiet
            supervisor.kill()
            supervisor.wait()
            killed = time.monotonic()
            assert rank.wait(timeout=60) == -signal.SIGKILL
            assert time.monotonic() - killed >= 1.0  # not before the grace; a busy host may only make it later
            err = rank.stderr.read()
            assert f"rank 3: the rlscale launcher (pid {supervisor.pid}) is gone" in err and "SIGKILL" in err
        finally:
            for process in (supervisor, rank):
                if process.poll() is None:
                    process.kill()
                process.wait()
