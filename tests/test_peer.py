"""The peer baselines (plain library scripts) and ``rlscale benchmark training --peer``, on CPU with real processes.

The four peer runs start together in one fixture (2 cores: about the wall time of two); the benchmark runs once per
form and several tests read its bundle.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from rlscale_command import rlscale

from rlscale.benchmark.bundle import validation_errors
from rlscale.benchmark.peer import PEER_SCRIPTS, peer_clock
from rlscale.benchmark.peer_ratio import PeerMismatch, load_peer_result, peer_argv, peer_section, run_peer_first
from rlscale.tasks import get_spec, graph

TASK = "Isaac-Cartpole"
ROLLOUT = 16  # rollout length of the task's rsl_rl, rl_games and skrl configs
ENVS, ITERATIONS = 32, 3


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def environment(**extra: str) -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", **extra}


def peer_args(output: str = "out/peer.json") -> list[str]:
    return ["--task", TASK, "--num_envs", str(ENVS), "--max_iterations", str(ITERATIONS), "--device", "cpu",
            "--output", output]  # fmt: skip


@pytest.fixture(scope="module")
def peer_runs(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """Each peer script alone (1 rank), and rsl_rl's as 2 gloo ranks under plain torchrun, all started at once."""
    commands = {library: [sys.executable, script, *peer_args()] for library, script in PEER_SCRIPTS.items()}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port"]
    commands["rsl_rl_2_ranks"] = [*torchrun, str(free_port()), PEER_SCRIPTS["rsl_rl"], *peer_args()]
    started = {}
    for name, command in commands.items():
        cwd = tmp_path_factory.mktemp(name)
        process = subprocess.Popen(command, cwd=cwd, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        started[name] = (process, cwd)
    runs = {}
    for name, (process, cwd) in started.items():
        stdout, stderr = process.communicate(timeout=300)
        runs[name] = (subprocess.CompletedProcess(commands[name], process.returncode, stdout, stderr), cwd)
    return runs


class TestPeerScripts:
    @pytest.mark.parametrize("name", ["rsl_rl", "rl_games", "skrl", "rsl_rl_2_ranks"])
    def test_trains_and_writes_only_its_result(self, peer_runs, name):
        """Exit 0; the working folder holds the result file and nothing else (no logs, no checkpoints)."""
        result, cwd = peer_runs[name]
        assert result.returncode == 0, result.stderr[-3000:].decode()
        assert [str(path.relative_to(cwd)) for path in sorted(cwd.rglob("*"))] == ["out", "out/peer.json"]

    @pytest.mark.parametrize("name", ["rsl_rl", "rl_games", "skrl", "rsl_rl_2_ranks"])
    def test_result_describes_the_run(self, peer_runs, name):
        """The workload as run (global steps per iteration) and one positive time per iteration, inside the
        library call, itself inside the process's lifetime."""
        peer = json.loads((peer_runs[name][1] / "out" / "peer.json").read_text())
        world_size = 2 if name.endswith("_2_ranks") else 1
        assert peer["library"] == name.removesuffix("_2_ranks") and peer["task"] == TASK
        assert (peer["device"], peer["seed"], peer["max_iterations"]) == ("cpu", 42, ITERATIONS)
        assert (peer["world_size"], peer["num_envs_per_rank"], peer["rollout_length"]) == (world_size, ENVS, ROLLOUT)
        assert (peer["cuda_graph"], peer["env_step"]) == (True, "eager")  # graphing is on; a CPU task steps eagerly
        assert peer["steps_per_iteration"] == ROLLOUT * ENVS * world_size
        assert len(peer["iteration_s"]) == ITERATIONS and min(peer["iteration_s"]) > 0
        assert sum(peer["iteration_s"]) < peer["train_s"] < peer["process_wall_time_s"]


class TestRolloutClock:
    def test_boundaries_are_rollout_starts_and_the_return(self, monkeypatch):
        """Iteration i runs from its rollout's first step to the next rollout's first step; the last to the return."""
        ticks = iter([0.0, 1.0, 3.0, 6.0, 10.0])
        monkeypatch.setattr(peer_clock.time, "perf_counter", lambda: next(ticks))
        clock = peer_clock.RolloutClock(rollout_length=2)
        clock.start()  # reads 0.0
        for _ in range(6):  # the first step of each rollout reads 1.0, 3.0 and 6.0; the others read no clock
            clock.step()
        clock.stop()  # reads 10.0
        assert clock.iteration_s() == [2.0, 3.0, 4.0] and clock.train_returned - clock.train_started == 10.0


def _peer_result(tmp_path: Path, **changes) -> tuple[Path, dict]:
    expected = {"library": "rsl_rl", "task": TASK, "device": "cuda", "seed": 42, "world_size": 2,
                "num_envs_per_rank": ENVS, "max_iterations": ITERATIONS, "steps_per_iteration": 1024,
                "cuda_graph": True}  # fmt: skip
    path = tmp_path / "peer.json"
    path.write_text(json.dumps({**expected, "env_step": "cuda_graph", "iteration_s": [0.5, 0.25, 0.5], "train_s": 2.0,
                                "process_wall_time_s": 9.0, **changes}))  # fmt: skip
    return path, expected


class TestComparisonUnits:
    def test_section_and_ratio_of_medians(self, tmp_path):
        """Warm-up left out on both sides; the ratio is rlscale's median rate over the peer's."""
        path, expected = _peer_result(tmp_path)
        section = peer_section(
            load_peer_result(path, expected), [9.0, 0.4, 0.2], warmup=1, rlscale_env_step="cuda_graph"
        )
        # The peer's measured iterations take 0.25 and 0.5 s for 1024 steps: 4096 and 2048 steps/s, 2048 / 0.75 in all.
        assert section["total_fps"] == pytest.approx({"mean": 2048 / 0.75, "std": 2048 / 2**0.5, "peak": 4096})
        assert section["total_fps_median"] == pytest.approx(3072)
        assert section["rlscale_total_fps_median"] == pytest.approx(3840)  # median of 2560 and 5120
        assert section["ratio_total_fps_median"] == pytest.approx(1.25)
        assert (section["env_step"], section["rlscale_env_step"]) == ("cuda_graph", "cuda_graph")
        assert section["iterations_completed"] == 3 and section["iteration_s_per_iter"] == [0.5, 0.25, 0.5]

    def test_env_steps_that_differ_leave_the_ratio_null(self, tmp_path):
        """A capture that failed on one side only: both steps are recorded, and no ratio mixes the graph's gain in."""
        path, expected = _peer_result(tmp_path, env_step="eager")
        section = peer_section(
            load_peer_result(path, expected), [9.0, 0.4, 0.2], warmup=1, rlscale_env_step="cuda_graph"
        )
        assert (section["env_step"], section["rlscale_env_step"]) == ("eager", "cuda_graph")
        assert section["ratio_total_fps_median"] is None
        assert section["total_fps_median"] == pytest.approx(3072) and section["rlscale_total_fps_median"] is not None

    def test_no_rlscale_iteration_leaves_the_ratio_null(self, tmp_path):
        """A run that crashed before measuring keeps the peer's figures, with no ratio."""
        path, expected = _peer_result(tmp_path)
        section = peer_section(load_peer_result(path, expected), [], warmup=1, rlscale_env_step=None)
        assert section["rlscale_total_fps_median"] is None and section["ratio_total_fps_median"] is None
        assert section["total_fps_median"] is not None

    @pytest.mark.parametrize(
        ("changes", "message"),
        [
            ({"world_size": 1}, "world_size=1"),
            ({"iteration_s": [0.5]}, "1 of its 3"),
            ({"library": "skrl"}, "skrl"),
            ({"cuda_graph": False}, "the peer ran cuda_graph=False but rlscale runs cuda_graph=True"),
        ],
    )
    def test_another_workload_is_refused(self, tmp_path, changes, message):
        """A result that does not match rlscale's workload, or is incomplete, is named, not compared."""
        path, expected = _peer_result(tmp_path, **changes)
        with pytest.raises(PeerMismatch, match=message):
            load_peer_result(path, expected)
        with pytest.raises(PeerMismatch, match="no peer result"):
            load_peer_result(tmp_path / "absent.json", expected)

    def test_failed_peer_fails_the_benchmark_naming_it(self, capfd):
        """The peer's exit code is the benchmark's; rlscale's measurement never starts."""
        measured = []
        failing = [sys.executable, "-c", "raise SystemExit(3)"]
        code = run_peer_first("skrl", lambda result: failing, measured.append)
        assert code == 3 and measured == []
        assert "peer baseline peer_skrl.py (plain skrl) failed with exit code 3" in capfd.readouterr().err


class TaskBuilt(Exception):
    """Stops a run at its task's construction, once the call has been recorded."""


@pytest.fixture
def task_builds(monkeypatch) -> list[tuple[str, bool, dict]]:
    """``build_task`` calls, (task, cuda_graph, config), each stopping the run; building the task any other way
    fails the test."""
    calls = []

    def build_task(task_id: str, *, cuda_graph: bool, **cfg):
        calls.append((task_id, cuda_graph, cfg))
        raise TaskBuilt

    def built_elsewhere(task, cfg):
        pytest.fail("the task was built without rlscale.tasks.graph.build_task")

    monkeypatch.setattr(graph, "build_task", build_task)
    monkeypatch.setattr(peer_clock, "build_task", build_task)
    monkeypatch.setattr(get_spec(TASK).task_class, "__init__", built_elsewhere)
    monkeypatch.setattr("rlscale.rl.dist_compat.use_gloo_for_cpu_ranks", lambda device: None)  # no global patching
    monkeypatch.setattr(torch, "set_num_threads", lambda threads: None)  # keep this process's own
    monkeypatch.setattr(signal, "signal", lambda signum, handler: None)  # and pytest's handlers
    return calls


class TestSameEnvStep:
    """The peer steps the task as rlscale does: one function builds it on both sides, with rlscale's graph setting,
    so that the ratio measures rlscale's overhead and not the CUDA graph's gain."""

    def test_one_function_builds_both_sides_tasks(self):
        assert peer_clock.build_task is graph.build_task

    @pytest.mark.parametrize("no_cuda_graph", [False, True])
    def test_rlscale_run_builds_its_task_with_build_task(self, task_builds, tmp_path, no_cuda_graph):
        from rlscale.run.phases import execute
        from rlscale.run.spec import resolve_spec

        flags = ["--no_cuda_graph"] if no_cuda_graph else []
        spec = resolve_spec(["--task", TASK, "--device", "cpu", "--log_root", str(tmp_path), *flags])
        with pytest.raises(TaskBuilt):
            execute(spec)
        default_envs = get_spec(TASK).cfg_class().num_envs  # resolved in the spec
        assert task_builds == [(TASK, not no_cuda_graph, {"device": "cpu", "seed": 42, "num_envs": default_envs})]

    @pytest.mark.parametrize("no_cuda_graph", [False, True])
    @pytest.mark.parametrize("library", list(PEER_SCRIPTS))
    def test_peer_builds_its_task_with_build_task(self, task_builds, monkeypatch, library, no_cuda_graph):
        module = importlib.import_module(f"rlscale.benchmark.peer.peer_{library}")
        flags = ["--no_cuda_graph"] if no_cuda_graph else []
        monkeypatch.setattr(sys, "argv", [f"peer_{library}.py", *peer_args(), *flags])
        with pytest.raises(TaskBuilt):
            module.main()
        assert task_builds == [(TASK, not no_cuda_graph, {"device": "cpu", "seed": 42, "num_envs": ENVS})]

    @pytest.mark.parametrize("no_cuda_graph", [False, True])
    def test_rlscale_graph_setting_reaches_the_peer(self, no_cuda_graph):
        from rlscale.benchmark.arguments import parse_in_process
        from rlscale.benchmark.workflows.training import WORKFLOW as TRAINING
        from rlscale.run.spec import spec_from_args

        argv = ["--task", TASK, "--peer", *(["--no_cuda_graph"] if no_cuda_graph else [])]
        parser, args = parse_in_process(TRAINING, argv, multigpu=False)
        spec = spec_from_args(parser, args, torch_free=True)
        assert ("--no_cuda_graph" in peer_argv(spec, Path("peer.json"))) == no_cuda_graph

    @pytest.mark.parametrize("no_cuda_graph", [False, True])
    def test_rank0_refuses_a_peer_on_another_graph_setting(self, no_cuda_graph):
        """The setting is part of the workload rank 0 checks the peer's result against (see load_peer_result)."""
        from rlscale.benchmark.session import peer_workload
        from rlscale.benchmark.workflow import Measurement
        from rlscale.dist import RankInfo
        from rlscale.run.spec import resolve_spec

        spec = resolve_spec(["--task", TASK, "--device", "cpu", *(["--no_cuda_graph"] if no_cuda_graph else [])])
        measurement = Measurement("training", num_envs_per_rank=ENVS, seed=42, max_iterations=ITERATIONS)
        workload = peer_workload(spec, measurement, RankInfo())
        assert workload["cuda_graph"] is not no_cuda_graph


def rank0_iteration_s(log_root: Path) -> list[float]:
    manifests = [path for path in log_root.rglob("manifest.json") if "rank_" not in path.parent.name]
    assert len(manifests) == 1, manifests
    return [record["iteration_s"] for record in json.loads(manifests[0].read_text())["iterations"]]


@pytest.fixture(scope="module")
def multigpu_peer(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """`training_multigpu --peer` with skrl (whose import creates the process group): its peer under torchrun, then
    rlscale, 2 gloo ranks each."""
    root = tmp_path_factory.mktemp("multigpu_peer")
    (root / "tmp").mkdir()
    result = rlscale(
        "benchmark", "training_multigpu", "--peer", "--rl_library", "skrl", "--num_gpus", "2",
        "--master_port", str(free_port()),
        "--task", TASK, "--device", "cpu", "--num_envs", str(ENVS), "--max_iterations", str(ITERATIONS),
        "--log_root", "logs", "--output_path", "out/bundle.json", cwd=root, env={"TMPDIR": str(root / "tmp")},
    )  # fmt: skip
    return result, root


class TestTrainingWithPeer:
    def test_bundle_is_valid_and_holds_the_peer(self, multigpu_peer):
        """Exit 0, one schema-valid bundle whose runtime.peer describes the peer's 3 iterations; the summary prints
        the ratio; the peer's temporary folder is gone."""
        result, root = multigpu_peer
        assert result.returncode == 0, result.stderr[-3000:]
        bundle = json.loads((root / "out" / "bundle.json").read_text())
        assert validation_errors(bundle) == []
        peer = bundle["runtime"]["peer"]
        assert (peer["library"], peer["iterations_completed"], len(peer["iteration_s_per_iter"])) == ("skrl", 3, 3)
        assert "peer_skrl.py" in result.stderr and "rlscale / peer = " in result.stdout
        assert (peer["env_step"], peer["rlscale_env_step"]) == ("eager", "eager")  # CPU: no graph on either side
        assert not list((root / "tmp").glob("rlscale-peer-*"))

    def test_figures_and_ratio_recomputed(self, multigpu_peer):
        """The peer's rates come from its own iteration times after the warm-up, rlscale's median from rank 0's
        manifest, and the ratio is the quotient of the two medians."""
        result, root = multigpu_peer
        bundle = json.loads((root / "out" / "bundle.json").read_text())
        runtime, peer = bundle["runtime"], bundle["runtime"]["peer"]
        steps = runtime["steps_per_iteration"]
        assert steps == ROLLOUT * ENVS * 2
        measured = peer["iteration_s_per_iter"][runtime["warmup_iterations"] :]
        rates = [steps / seconds for seconds in measured]
        effective = steps * len(measured) / sum(measured)
        assert peer["total_fps"] == pytest.approx(
            {"mean": effective, "std": statistics.stdev(rates), "peak": max(rates)}
        )
        peer_median = statistics.median(rates)
        rlscale_iterations = rank0_iteration_s(root / "logs")[runtime["warmup_iterations"] :]
        rlscale_median = statistics.median(steps / seconds for seconds in rlscale_iterations)
        assert peer["total_fps_median"] == pytest.approx(peer_median)
        assert peer["rlscale_total_fps_median"] == pytest.approx(rlscale_median)
        assert peer["ratio_total_fps_median"] == pytest.approx(rlscale_median / peer_median)
        assert 0 < peer["total_wall_time_s"] < peer["process_wall_time_s"]

    def test_without_peer_the_field_is_null(self, multigpu_peer):
        """A bundle without --peer carries runtime.peer null, and a training bundle without the key (written before
        it existed) stays valid."""
        bundle = json.loads((multigpu_peer[1] / "out" / "bundle.json").read_text())
        assert validation_errors({**bundle, "runtime": {**bundle["runtime"], "peer": None}}) == []
        older = {key: value for key, value in bundle["runtime"].items() if key != "peer"}
        assert validation_errors({**bundle, "runtime": older}) == []
        runtime_bundle = {**bundle, "run": {**bundle["run"], "workflow": "runtime"}}
        assert any("peer" in error for error in validation_errors(runtime_bundle))


class TestRefusals:
    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["training", "--rl_library", "skrl", "--ml_framework", "jax"], "skrl with PyTorch only"),
            (["training", "--agent", "algorithm.learning_rate=1e-4"], "cannot mirror --agent"),
            (["training", "--resume", "model_1.pt"], "cannot mirror --resume"),
            (["training", "--sync_check_interval", "2"], "cannot mirror --sync_check_interval"),
            (["training", "--lr_scaling", "sqrt"], "cannot mirror --lr_scaling"),
            (["training", "--sync_normalizer"], "cannot mirror --sync_normalizer"),
            (["training_multigpu", "--num_gpus", "2", "--device", "cpu", "--lr_scaling", "linear"], "--lr_scaling"),
            (["training_multigpu", "--num_gpus", "2", "--device", "cpu", "--sync_normalizer"], "--sync_normalizer"),
            (["training", "--device", "cuda:1"], "choose the GPU with CUDA_VISIBLE_DEVICES"),
            (["training_multigpu", "--num_gpus", "2", "--device", "cpu", "--sync_check_interval", "2"], "--sync_check"),
            (["runtime"], "unrecognized arguments: --peer"),
        ],
    )
    def test_exit_2_one_line_nothing_written(self, tmp_path, args, message):
        """Refused with exit 2 and one stderr line, before the peer or anything else runs."""
        common = ["--task", TASK, "--output_path", "out/bundle.json", "--peer"]
        result = rlscale("benchmark", *args, *common, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr
        assert list(tmp_path.iterdir()) == []
