"""Tests of the host-wide GPU lease: concurrent jobs that time their runs never share an id, jobs that time nothing
share one, and SIGKILL frees them; of the host lease: a job measuring speed never runs beside another job; and of the
job time records every leased job appends."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlscale.launch.lease import LeaseError, acquire, acquire_host, gpu_pool
from rlscale.study.job_times import JOB_TIMES_ENV, read_job_times, timing_markdown
from rlscale.study.stage_policy import Stage

POOL = "0,1,2,3"

RECORDER = """
import json, os, sys, time
name, out_dir, hold_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
start = time.monotonic()
time.sleep(hold_s)
record = {"name": name, "start": start, "end": time.monotonic(), "argv": sys.argv[1:],
          "ids": [i for i in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if i]}
open(os.path.join(out_dir, name + ".json"), "w").write(json.dumps(record))
"""
"""A job's command: it records when it ran (inside its lease), with which arguments and on which ids."""

JOB = """
import sys
from rlscale.study.job_runner import run_leased
from rlscale.study.stage_policy import Stage
name, gpus, out_dir, hold_s = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
stage = Stage(sys.argv[5] if len(sys.argv) > 5 else "parity")
command = [sys.executable, "-c", {recorder!r}, name, out_dir, hold_s]
sys.exit(run_leased(command, stage=stage, gpus=gpus, granted=gpus, world_size=max(gpus, 1)))
"""
"""One study job of a stage (default ``parity``, which holds its GPUs alone), as scripts/ runs it: lease through
``run_leased``, then run the recorder."""


@pytest.fixture
def lease_env(tmp_path, monkeypatch) -> dict[str, str]:
    """A private lease directory and a pool of 4 fake GPU ids, also set for this process."""
    env = {"RLSCALE_LEASE_DIR": str(tmp_path / "lease"), "RLSCALE_LEASE_GPUS": POOL}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return {**os.environ, **env}


def overlaps(a: dict, b: dict) -> bool:
    """Whether two recorded job lifetimes intersect."""
    return a["start"] < b["end"] and b["start"] < a["end"]


def run_jobs(requests: list[int], out: Path, env: dict[str, str], hold_s: float = 0.8) -> dict[int, dict]:
    """Start one leased job per GPU request at once; return each job's record once all exited 0."""
    out.mkdir()
    job = JOB.format(recorder=RECORDER)
    procs = [
        subprocess.Popen([sys.executable, "-c", job, f"job{index}", str(gpus), str(out), str(hold_s)], env=env)
        for index, gpus in enumerate(requests)
    ]
    codes = [proc.wait(timeout=120) for proc in procs]
    assert codes == [0] * len(requests)
    return {index: json.loads((out / f"job{index}.json").read_text()) for index in range(len(requests))}


def assert_no_sharing(records: dict[int, dict], requests: list[int], pool: str) -> int:
    """Every job got its count of ids from the pool and no port (torchrun takes a free one), and jobs alive together
    shared no id; returns the number of pairs that ran at the same time."""
    for index, gpus in enumerate(requests):
        assert len(records[index]["ids"]) == gpus
        assert set(records[index]["ids"]) <= set(pool.split(","))
        assert records[index]["argv"] == [f"job{index}", records[index]["argv"][1], records[index]["argv"][2]]
    concurrent = 0
    for (i, a), (j, b) in itertools.combinations(records.items(), 2):
        if overlaps(a, b):
            concurrent += 1
            assert not set(a["ids"]) & set(b["ids"]), f"job{i} and job{j} shared GPU ids while both ran"
    return concurrent


class TestConcurrentJobs:
    def test_no_shared_gpu(self, tmp_path, lease_env):
        """Eight concurrent jobs asking for 2, 2, 1, 3, 2, 1, 0 and 0 of 4 fake GPUs never share an id.

        Each job records, from inside its lease, when it ran and on which ids; every pair of jobs whose lifetimes
        intersect must have disjoint ids, and some pairs must intersect (the pool is used in parallel, not one job at
        a time).
        """
        requests = [2, 2, 1, 3, 2, 1, 0, 0]
        records = run_jobs(requests, tmp_path / "records", lease_env)
        concurrent = assert_no_sharing(records, requests, POOL)
        assert concurrent > 0, "the jobs never ran at the same time, so the test proved nothing"

    def test_eight_gpu_host(self, tmp_path, lease_env):
        """An 8-GPU host (8 fake ids): ten concurrent jobs of up to 4 GPUs share no id, and two 4-GPU jobs (two 4-GPU
        studies under --resources gpu=8) run at the same time on the two disjoint halves."""
        pool = ",".join(map(str, range(8)))
        env = {**lease_env, "RLSCALE_LEASE_GPUS": pool}
        requests = [4, 4, 2, 3, 1, 4, 2, 1, 0, 0]
        assert assert_no_sharing(run_jobs(requests, tmp_path / "mixed", env), requests, pool) > 0
        a, b = run_jobs([4, 4], tmp_path / "halves", env, hold_s=1.5).values()
        assert overlaps(a, b), "the two 4-GPU jobs did not run together although the pool holds both"
        assert sorted(a["ids"] + b["ids"]) == pool.split(",")

    def test_gpu_jobs_wait_for_each_other(self, tmp_path, lease_env):
        """Two jobs that each need 3 of the 4 GPUs cannot run together: their lifetimes are disjoint."""
        out = tmp_path / "records"
        out.mkdir()
        job = JOB.format(recorder=RECORDER)
        procs = [
            subprocess.Popen([sys.executable, "-c", job, name, "3", str(out), "0.5"], env=lease_env)
            for name in ("a", "b")
        ]
        assert [proc.wait(timeout=60) for proc in procs] == [0, 0]
        a, b = (json.loads((out / f"{name}.json").read_text()) for name in ("a", "b"))
        assert not overlaps(a, b)


def start_job(name: str, stage: Stage, out: Path, env: dict[str, str], hold_s: float = 0.5) -> subprocess.Popen:
    """Start one leased 1-GPU job of ``stage`` recording into ``out``; its stderr (the lease's reports) is piped."""
    job = JOB.format(recorder=RECORDER)
    argv = [sys.executable, "-c", job, name, "1", str(out), str(hold_s), stage]
    return subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)


@contextlib.contextmanager
def default_sigint():
    """Start children with SIGINT's default action, as in a terminal's foreground job (Python then raises
    KeyboardInterrupt on it), whatever this process inherited."""
    previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def finish(proc: subprocess.Popen, out: Path, name: str) -> tuple[dict, str]:
    """Wait for a job started by :func:`start_job`; return its record and its stderr."""
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    return json.loads((out / f"{name}.json").read_text()), stderr


class TestGpuSharing:
    def test_jobs_that_time_nothing_share_the_one_gpu(self, tmp_path, lease_env):
        """On a one-GPU host a validate, a train and an evaluate job run together on GPU 0."""
        env = {**lease_env, "RLSCALE_LEASE_GPUS": "0"}
        out = tmp_path / "records"
        out.mkdir()
        stages = (Stage.VALIDATE, Stage.TRAIN, Stage.EVALUATE)
        procs = {stage: start_job(stage, stage, out, env, hold_s=1.5) for stage in stages}
        records = {stage: finish(proc, out, stage)[0] for stage, proc in procs.items()}
        assert all(record["ids"] == ["0"] for record in records.values())
        assert any(overlaps(a, b) for a, b in itertools.combinations(records.values(), 2)), "no two ran together"

    def test_at_most_the_shared_jobs_limit_share_one_gpu(self, lease_env, monkeypatch):
        """With RLSCALE_LEASE_SHARED_JOBS=2 two shared leases hold the one GPU together; a third shared lease and a
        lease alone wait, and the third gets the GPU once one of the two ends."""
        monkeypatch.setenv("RLSCALE_LEASE_SHARED_JOBS", "2")
        monkeypatch.setenv("RLSCALE_LEASE_GPUS", "0")
        first, second = acquire(1, shared=True), acquire(1, shared=True)
        assert first.gpu_ids == second.gpu_ids == ("0",)
        with pytest.raises(LeaseError):
            acquire(1, shared=True, timeout_s=0.5)
        with pytest.raises(LeaseError):
            acquire(1, timeout_s=0.5)
        first.release()
        with acquire(1, shared=True, timeout_s=30) as third, second:
            assert third.gpu_ids == ("0",)

    def test_a_full_gpu_sends_the_next_shared_job_to_another(self, lease_env, monkeypatch):
        """With one shared job per GPU, two shared leases on a two-GPU pool take one GPU each."""
        monkeypatch.setenv("RLSCALE_LEASE_SHARED_JOBS", "1")
        monkeypatch.setenv("RLSCALE_LEASE_GPUS", "0,1")
        with acquire(1, shared=True) as first, acquire(1, shared=True) as second:
            assert (first.gpu_ids, second.gpu_ids) == (("0",), ("1",))

    @pytest.mark.parametrize("timed", [Stage.PARITY, Stage.PROBE])
    def test_timed_job_holds_its_gpu_alone(self, tmp_path, lease_env, timed):
        """A job that times its run never shares its GPU with a job that times nothing, in either order."""
        env = {**lease_env, "RLSCALE_LEASE_GPUS": "0"}
        out = tmp_path / "records"
        out.mkdir()
        first = start_job("train", Stage.TRAIN, out, env, hold_s=1.0)
        time.sleep(0.5)
        second = start_job(timed, timed, out, env, hold_s=1.0)
        time.sleep(0.5)
        third = start_job("evaluate", Stage.EVALUATE, out, env, hold_s=0.5)
        records = [
            finish(proc, out, name)[0] for proc, name in ((first, "train"), (second, timed), (third, "evaluate"))
        ]
        for shared in (records[0], records[2]):
            assert not overlaps(records[1], shared), f"{timed} ran beside a job sharing its GPU"

    def test_every_leased_job_is_recorded(self, tmp_path, lease_env):
        """With RLSCALE_JOB_TIMES set, each job appends its rule, cell, lease and waits; a parity job that waited
        for a train job's shared GPU says so, and the summary's timing section tables both rules."""
        times = tmp_path / "job_times.jsonl"
        env = {**lease_env, "RLSCALE_LEASE_GPUS": "0", JOB_TIMES_ENV: str(times)}
        out = tmp_path / "records"
        out.mkdir()
        train = start_job("train", Stage.TRAIN, out, env, hold_s=1.0)
        time.sleep(0.5)
        parity = start_job("parity", Stage.PARITY, out, env, hold_s=0.2)
        finish(train, out, "train"), finish(parity, out, "parity")
        table = read_job_times(times)
        assert list(table["rule"]) == ["train", "parity"]
        assert list(table["gpu_lease"]) == ["shared", "alone"]
        assert list(table["gpus"]) == ["0", "0"]
        assert list(table["exit_code"]) == [0, 0]
        assert table.loc[1, "gpu_wait_s"] > 0 and table.loc[0, "started_s"] == 0
        section = "\n".join(timing_markdown(table))
        assert "| train | 1 |" in section and "| parity | 1 |" in section


class TestHostLease:
    def test_shared_holders_coexist(self, tmp_path, lease_env):
        """Two training jobs share the host: they run together, beside a shared holder in this process."""
        out = tmp_path / "records"
        out.mkdir()
        with acquire_host(False, timeout_s=5):
            procs = {name: start_job(name, Stage.TRAIN, out, lease_env, hold_s=1.5) for name in ("a", "b")}
            (a, _), (b, _) = (finish(proc, out, name) for name, proc in procs.items())
        assert overlaps(a, b), "two shared jobs did not run together"

    def test_speed_job_waits_for_a_shared_holder_and_says_how_long(self, tmp_path, lease_env):
        """A benchmark job starts only once the shared holder left, and reports its wait in two lines."""
        out = tmp_path / "records"
        out.mkdir()
        with acquire_host(False, timeout_s=5):
            proc = start_job("bench", Stage.BENCHMARK, out, lease_env)
            time.sleep(1.0)
            released = time.monotonic()
        record, stderr = finish(proc, out, "bench")
        assert record["start"] >= released
        assert "[lease] benchmark waits for the host (alone) while another job holds it" in stderr
        assert "[lease] benchmark holds the host (alone) after waiting" in stderr
        assert "host alone" in stderr

    def test_shared_job_waits_for_a_speed_measurement(self, tmp_path, lease_env):
        """A training job waits while the host is held alone (as `rlscale benchmark compare` holds it)."""
        out = tmp_path / "records"
        out.mkdir()
        with acquire_host(True, timeout_s=5):
            proc = start_job("train", Stage.TRAIN, out, lease_env)
            time.sleep(1.0)
            released = time.monotonic()
        record, stderr = finish(proc, out, "train")
        assert record["start"] >= released
        assert "train waits for the host (shared) while a speed measurement holds it" in stderr

    def test_waiting_speed_job_goes_before_later_shared_jobs(self, tmp_path, lease_env):
        """While a benchmark job waits for a shared holder, a training job arriving later waits behind it (the gate),
        so a stream of overlapping training jobs cannot starve a speed measurement."""
        out = tmp_path / "records"
        out.mkdir()
        with acquire_host(False, timeout_s=5):
            bench = start_job("bench", Stage.BENCHMARK, out, lease_env, hold_s=1.0)
            time.sleep(0.7)
            train = start_job("train", Stage.TRAIN, out, lease_env)
            time.sleep(0.7)
        (bench_record, _), (train_record, _) = finish(bench, out, "bench"), finish(train, out, "train")
        assert train_record["start"] >= bench_record["end"]

    def test_interrupt_while_waiting_is_one_line(self, tmp_path, lease_env):
        """Ctrl-C on Snakemake reaches its queued jobs too: a job still waiting for the host exits 130 with one line,
        no traceback, and its command never runs."""
        out = tmp_path / "records"
        out.mkdir()
        with acquire_host(True, timeout_s=5):
            with default_sigint():  # a background `make test &` would pass SIGINT down as ignored
                proc = start_job("queued", Stage.TRAIN, out, lease_env)
            deadline = time.monotonic() + 60
            while "waits for the host" not in (line := proc.stderr.readline()) and time.monotonic() < deadline:
                assert line, "the job exited before waiting"
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGINT
        assert stderr.strip() == "[study] train interrupted while waiting for its lease: nothing ran"
        assert not (out / "queued.json").exists()

    def test_timeout_names_the_host(self, lease_env):
        """A job that cannot get the host in time fails with a LeaseError instead of waiting forever."""
        with acquire_host(True, timeout_s=5), pytest.raises(LeaseError, match=r"host \(shared\) was not granted"):
            acquire_host(False, timeout_s=0.3)
        with acquire_host(False, timeout_s=5):  # The failed attempt left nothing held.
            pass


HOLDER = """
import sys, time
from rlscale.launch.lease import acquire
lease = acquire(int(sys.argv[1]))
print(",".join(lease.gpu_ids), flush=True)
time.sleep(600)
"""


class TestKernelRelease:
    def test_sigkill_frees_gpus(self, lease_env):
        """A holder killed with SIGKILL (no cleanup runs) frees its GPUs: the kernel drops flock locks."""
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, "4"], env=lease_env, stdout=subprocess.PIPE, text=True)
        try:
            ids = holder.stdout.readline().strip()
            assert ids == POOL
            with pytest.raises(LeaseError, match="within 0.5 s"):
                acquire(1, timeout_s=0.5)
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait(timeout=10)
        with acquire(4, timeout_s=10) as lease:
            assert ",".join(lease.gpu_ids) == POOL

    def test_release_frees_for_the_next_job(self, lease_env):
        """Releasing a lease (the context manager's exit) frees it at once within the same process."""
        with acquire(4) as first:
            assert len(first.gpu_ids) == 4
        with acquire(4, timeout_s=1) as second:
            assert second.gpu_ids == first.gpu_ids


class TestPool:
    def test_pool_sources_in_order(self):
        """Fake ids first, then CUDA_VISIBLE_DEVICES entries, then NVML indices."""
        assert gpu_pool({"RLSCALE_LEASE_GPUS": "7,8", "CUDA_VISIBLE_DEVICES": "0"})[0] == ["7", "8"]
        assert gpu_pool({"CUDA_VISIBLE_DEVICES": "2,5"})[0] == ["2", "5"]
        assert gpu_pool({}, nvml_count=lambda: 3)[0] == ["0", "1", "2"]

    def test_request_larger_than_pool_fails_at_once(self, lease_env):
        """Asking for more GPUs than the host has fails with the pool in the message before it ever waits: no lock
        directory was even made (whatever the wait's timeout, none is set here)."""
        with pytest.raises(LeaseError, match=r"needs 5 GPU\(s\) but the host's pool has 4"):
            acquire(5)
        assert not Path(lease_env["RLSCALE_LEASE_DIR"]).exists()

    def test_cpu_ranks_lease_nothing(self, lease_env):
        """A CPU job leases no GPU id and leaves CUDA_VISIBLE_DEVICES alone."""
        with acquire(0) as lease:
            assert lease.gpu_ids == () and lease.fds == []
            assert lease.environment({"CUDA_VISIBLE_DEVICES": "9"})["CUDA_VISIBLE_DEVICES"] == "9"


class TestLockDirectory:
    def test_directory_is_shared_by_all_users(self, lease_env):
        """The lock directory is created world-writable and sticky, like /tmp, so every user's jobs share it."""
        with acquire(0):
            pass
        mode = Path(lease_env["RLSCALE_LEASE_DIR"]).stat().st_mode & 0o7777
        assert mode == 0o1777
