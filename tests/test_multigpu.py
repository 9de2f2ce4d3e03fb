"""`rlscale train_multigpu` and `nccl_probe` with real torchrun (and skrl JAX launcher) processes on CPU/gloo."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from library_paths import PATHS
from process_utils import processes_mentioning, wait_for_no_process

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def launch(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rlscale", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env or ENV,
    )


def run(*args: str, timeout: float = 300, env: dict | None = None) -> tuple[int, str]:
    process = launch(*args, env=env)
    output, _ = process.communicate(timeout=timeout)
    return process.returncode, output


def manifests(log_root: Path) -> dict[int, dict]:
    found = {}
    for path in log_root.rglob("manifest.json"):
        data = json.loads(path.read_text())
        found[data["rank"]] = data | {"_path": path}
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


TRAIN = ["train_multigpu", "--task", "Isaac-Cartpole", "--device", "cpu", "--num_envs", "64"]


class TestTwoRankTraining:
    @pytest.mark.parametrize(("library", "framework"), PATHS)
    def test_two_cpu_ranks_train_in_sync(self, tmp_path, library, framework):
        """Two gloo ranks finish with world_size 2 and equal parameter digests; only rank 0 writes the run files. Under
        the default ``--cpu_binding auto`` each rank's manifest shows the launcher's CPUs, unnarrowed, and one torch
        thread. With ``--log_all_ranks`` (torchrun's ranks; skrl's JAX launcher shows every rank anyway) rank 1's
        progress lines and its library's output reach the console, prefixed with its rank, and its
        ``library_console.log`` is still written."""
        log_all = ["--log_all_ranks"] if framework == "torch" else []
        code, output = run(
            *TRAIN, "--num_gpus", "2", "--max_iterations", "3", "--log_root", str(tmp_path),
            "--rl_library", library, "--ml_framework", framework, *log_all,
        )  # fmt: skip
        assert code == 0, output[-3000:]
        by_rank = manifests(tmp_path)
        assert sorted(by_rank) == [0, 1]
        main, other = by_rank[0], by_rank[1]
        assert main["status"] == other["status"] == "completed"
        assert main["world_size"] == 2 and main["num_nodes"] == 1
        assert len(main["rank_param_digests"]) == 2 and len(set(main["rank_param_digests"])) == 1
        assert other["_path"].parent == main["_path"].parent / "rank_1"
        assert main["env_seed"] + 1 == other["env_seed"]
        assert Path(main["checkpoint"]).is_file() and other["checkpoint"] is None
        assert "ranks in sync (2)" in output
        placements = [by_rank[rank]["placement"] for rank in (0, 1)]
        assert [placement["cpus"] for placement in placements] == [sorted(os.sched_getaffinity(0))] * 2
        assert [placement["threads"] for placement in placements] == [1, 1]
        assert {placement["binding"] for placement in placements} == {"auto"}
        if log_all:
            assert "[rank1]:[rlscale] it 3/3 " in output and "[rank0]:[rlscale] it 3/3 " in output
            library_lines = (other["_path"].parent / "library_console.log").read_text().splitlines()
            for line in library_lines[:1]:  # skrl's rank 1 prints nothing of its own
                assert f"[rank1]:{line.rstrip()}" in output


class TestFailures:
    def test_crash_on_hidden_rank_is_named_with_its_traceback(self, tmp_path):
        """A crash on rank 1 (hidden by the rank-0 console filter) in every attempt ends the job once torchrun's one
        restart is spent, not a timeout (the watchdog is off and rank 0 never completes), names rank 1, shows the
        traceback, and leaves no worker behind."""
        env = {**ENV, "RLSCALE_INJECT_FAULT": "crash:rank=1,iteration=2"}
        code, output = run(
            *TRAIN, "--num_gpus", "2", "--max_iterations", "50", "--hang_timeout", "0", "--max_restarts", "1",
            "--log_root", str(tmp_path), env=env,
        )  # fmt: skip
        assert code != 0, output[-3000:]
        assert "timed out" not in output.lower() and manifests(tmp_path)[0]["status"] != "completed"
        assert [segment["began"] for segment in manifests(tmp_path)[1]["segments"]] == ["start", "restart"]
        (summary,) = [line for line in output.splitlines() if line.startswith("[ERROR] ")]
        assert summary.startswith("[ERROR] rank 1 failed first: exited 1 (InjectedCrash: injected crash on rank 1"), (
            summary  # the crash, then rank 0's broken connection: its symptom
        )
        root_cause = output[output.index("Root Cause") :]
        assert "rank      : 1" in root_cause
        assert "InjectedCrash: injected crash on rank 1 at iteration 2" in root_cause
        assert 'faults.py", line' in root_cause
        assert not wait_for_no_process(str(tmp_path), within=5)

    def test_sigterm_to_launcher_leaves_no_worker(self, tmp_path):
        """SIGTERM to `rlscale train_multigpu` tears down torchrun and both ranks."""
        process = launch(*TRAIN, "--num_gpus", "2", "--max_iterations", "100000", "--log_root", str(tmp_path))
        deadline = time.monotonic() + 60
        while len(manifests(tmp_path)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(manifests(tmp_path)) == 2, "ranks did not start"
        assert len(processes_mentioning(str(tmp_path))) >= 3  # launcher, torchrun, two ranks
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
        assert process.returncode != 0
        assert not wait_for_no_process(str(tmp_path), within=10)

    @pytest.mark.extras  # skrl's JAX backend: library_paths
    def test_skrl_jax_crash_exits_non_zero(self, tmp_path):
        """skrl's JAX launcher exits 0 when a rank crashes; rlscale reads the ranks' statuses and fails, naming it."""
        env = {**ENV, "RLSCALE_INJECT_FAULT": "crash:rank=1,iteration=1"}
        code, output = run(
            *TRAIN, "--num_gpus", "2", "--max_iterations", "30", "--log_root", str(tmp_path),
            "--rl_library", "skrl", "--ml_framework", "jax", env=env,
        )  # fmt: skip
        assert code != 0
        assert "rank 1 exited 1 (InjectedCrash: injected crash on rank 1 at iteration 1)" in output
        assert not wait_for_no_process(str(tmp_path), within=10)


class TestMultiNode:
    def test_two_nodes_on_loopback(self, tmp_path):
        """Two launchers as two 'nodes' (one CPU rank each) rendezvous on 127.0.0.1 and train one policy."""
        port = free_port()
        env = {**ENV, "RLSCALE_RUN_TIMESTAMP": "two-node"}
        nodes = [
            launch(
                *TRAIN,
                "--num_gpus",
                "1",
                "--nnodes",
                "2",
                "--node_rank",
                str(rank),
                "--master_addr",
                "127.0.0.1",
                "--master_port",
                str(port),
                "--max_iterations",
                "3",
                "--log_root",
                str(tmp_path),
                env=env,
            )  # fmt: skip
            for rank in (0, 1)
        ]
        outputs = [node.communicate(timeout=180)[0] for node in nodes]
        assert [node.returncode for node in nodes] == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]
        by_rank = manifests(tmp_path)
        assert sorted(by_rank) == [0, 1]
        assert by_rank[0]["world_size"] == 2 and by_rank[0]["num_nodes"] == 2
        assert len(set(by_rank[0]["rank_param_digests"])) == 1


class TestNcclProbe:
    def test_probe_reports_every_rank(self):
        """`nccl_probe` on CPU ranks prints one ok line per rank and a verdict."""
        code, output = run("nccl_probe", "--num_gpus", "2", "--device", "cpu", timeout=120)
        assert code == 0, output
        assert "rank 0 ok" in output and "rank 1 ok" in output
        assert "nccl_probe: all 2 ranks ok" in output
