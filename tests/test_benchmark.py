"""`rlscale benchmark` end to end on CPU: the six workflows at tiny size, their bundles, the schema and rejections.

Each workflow runs once per module (fixtures) and several tests read its bundle; multi-GPU forms run 2 gloo ranks.
"""

from __future__ import annotations

import copy
import json
import math
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from rlscale_command import rlscale

from rlscale.benchmark.bundle import validation_errors
from rlscale.benchmark.stats import ema

TASK = "Isaac-Cartpole"
ROLLOUT = 16  # num_steps_per_env of the task's rsl_rl config
SINGLE_ENVS, RANK_ENVS = 64, 32


@dataclass
class Run:
    """One benchmark invocation: its process result, the folder its bundle went to, and the bundle."""

    result: subprocess.CompletedProcess
    out_dir: Path
    log_root: Path
    bundle: dict
    path: Path


def run_benchmark(factory, workflow: str, *args: str, output: bool = True, env: dict | None = None) -> Run:
    """Run a workflow in a fresh folder; with ``output`` the bundle goes to ``out/bundle.json``, else the default."""
    root = factory.mktemp(workflow)
    out_dir = root / "out"
    common = ["--task", TASK, "--device", "cpu"]
    if workflow.removesuffix("_multigpu") != "runtime":
        common += ["--log_root", str(root / "logs")]
    if output:
        common += ["--output_path", str(out_dir / "bundle.json")]
    result = rlscale("benchmark", workflow, *common, *args, cwd=root, env=env)
    if not output:
        out_dir = root / "results" / "benchmarks"
    files = sorted(out_dir.iterdir()) if out_dir.is_dir() else []
    assert len(files) == 1, (files, result.stdout[-2000:], result.stderr[-3000:])
    return Run(result, out_dir, root / "logs", json.loads(files[0].read_text()), files[0])


def rank0_iterations(run: Run) -> list[dict]:
    """Rank 0's per-iteration records, from the manifest `rlscale train` writes (independent of the bundle)."""
    manifests = [path for path in run.log_root.rglob("manifest.json") if "rank_" not in path.parent.name]
    assert len(manifests) == 1, manifests
    return json.loads(manifests[0].read_text())["iterations"]


@pytest.fixture(scope="module")
def training(tmp_path_factory) -> Run:
    return run_benchmark(tmp_path_factory, "training", "--num_envs", str(SINGLE_ENVS), "--max_iterations", "3")


@pytest.fixture(scope="module")
def runtime(tmp_path_factory) -> Run:
    args = ("--num_envs", str(SINGLE_ENVS), "--warmup_steps", "7", "--num_steps", "120", "--measure_sync_step")
    return run_benchmark(tmp_path_factory, "runtime", *args, output=False)


@pytest.fixture(scope="module")
def startup(tmp_path_factory) -> Run:
    return run_benchmark(tmp_path_factory, "startup", "--num_envs", str(SINGLE_ENVS))


@pytest.fixture(scope="module")
def training_multigpu(tmp_path_factory) -> Run:
    # Five iterations, four measured: the median of each rank's times stands up to one iteration slowed by a busy host.
    args = ("--num_gpus", "2", "--num_envs", str(RANK_ENVS), "--max_iterations", "5")
    return run_benchmark(tmp_path_factory, "training_multigpu", *args)


@pytest.fixture(scope="module")
def runtime_multigpu(tmp_path_factory) -> Run:
    args = ("--num_gpus", "2", "--num_envs", str(RANK_ENVS), "--warmup_steps", "5", "--num_steps", "100")
    return run_benchmark(tmp_path_factory, "runtime-multigpu", *args)


@pytest.fixture(scope="module")
def startup_multigpu(tmp_path_factory) -> Run:
    return run_benchmark(tmp_path_factory, "startup_multigpu", "--num_gpus", "2", "--num_envs", str(RANK_ENVS))


ALL_RUNS = ["training", "runtime", "startup", "training_multigpu", "runtime_multigpu", "startup_multigpu"]


class TestEveryWorkflow:
    @pytest.mark.parametrize("name", ALL_RUNS)
    def test_exits_0_with_one_valid_bundle_and_a_summary(self, request, name):
        """Each workflow completes, leaves exactly one bundle that the schema accepts, and prints its summary."""
        run: Run = request.getfixturevalue(name)
        assert run.result.returncode == 0, run.result.stderr[-3000:]
        assert validation_errors(run.bundle) == []
        assert run.bundle["run"]["status"] == "completed"
        assert run.bundle["run"]["workflow"] == name.split("_")[0]
        assert run.bundle["run"]["multigpu"] is name.endswith("multigpu")
        summary = [line for line in run.result.stdout.splitlines() if line.startswith("  bundle: ")]
        assert len(summary) == 1 and summary[0].endswith(run.path.name)

    @pytest.mark.parametrize("name", ALL_RUNS)
    def test_cpu_run_reports_no_gpu(self, request, name):
        """On CPU ranks every GPU field is null or empty, never a made-up number; CPU and RAM were sampled."""
        bundle = request.getfixturevalue(name).bundle
        resources = bundle["resources"]
        assert (resources["gpu_util_pct"], resources["gpu_mem_gb"], resources["devices"]) == (None, None, {})
        assert bundle["hardware"]["gpu_devices"] == [] and bundle["run"]["device"] == "cpu"
        assert resources["samples"] >= 1 and resources["ram_gb"]["mean"] > 0

    def test_bundle_validate_command_accepts_all_six(self, training, runtime, startup, training_multigpu,
                                                     runtime_multigpu, startup_multigpu, tmp_path):  # fmt: skip
        """`rlscale bundle validate` exits 0 on the six bundles just written."""
        paths = [str(run.path) for run in (training, runtime, startup, training_multigpu, runtime_multigpu,
                                            startup_multigpu)]  # fmt: skip
        result = rlscale("bundle", "validate", *paths, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "6 of 6 bundle(s) valid" in result.stdout


class TestTrainingFigures:
    def test_throughput_matches_rank0_records_after_warmup(self, training):
        """Times and rates agree with the run's own manifest records, with the warm-up iteration left out."""
        runtime = training.bundle["runtime"]
        records = rank0_iterations(training)[1:]
        assert (runtime["iterations_completed"], runtime["warmup_iterations"]) == (3, 1)
        assert runtime["steps_per_iteration"] == ROLLOUT * SINGLE_ENVS
        iteration = [record["iteration_s"] for record in records]
        collection = [record["collection_s"] for record in records]
        assert runtime["iteration_time_s"]["mean"] == pytest.approx(statistics.fmean(iteration))
        assert runtime["collection_time_s"]["peak"] == pytest.approx(max(collection))
        learning = [a - b for a, b in zip(iteration, collection, strict=True)]
        assert runtime["learning_time_s"]["mean"] == pytest.approx(statistics.fmean(learning))
        steps = runtime["steps_per_iteration"]
        assert runtime["total_fps"]["mean"] == pytest.approx(steps * len(iteration) / sum(iteration))
        assert runtime["collection_fps"]["peak"] == pytest.approx(steps / min(collection))

    def test_learning_curves_raw_and_ema(self, training):
        """Return and episode length per iteration equal the records; the final EMA uses --ema_alpha."""
        learning = training.bundle["learning"]
        records = rank0_iterations(training)
        lengths = [record["mean_episode_length"] for record in records]
        assert learning["ep_length"]["series_per_iter"] == pytest.approx(lengths)
        assert learning["reward"]["series_per_iter"] == pytest.approx([r["mean_return"] for r in records])
        assert learning["ep_length"]["final_raw"] == pytest.approx(lengths[-1])
        assert learning["ep_length"]["final_ema"] == pytest.approx(ema(lengths, 0.1))
        assert learning["env_steps_per_iter"] == ROLLOUT * SINGLE_ENVS and learning["ema_alpha"] == 0.1

    def test_single_process_identity(self, training):
        """A plain run is one undistributed rank; the run section names library, envs and iterations."""
        run, extra = training.bundle["run"], training.bundle["extra"]
        assert (run["framework"], run["num_envs"], run["max_iterations"], run["seed"]) == ("rsl_rl", 64, 3, 42)
        assert extra == {
            "distributed": False, "world_size": 1, "local_world_size": 1, "num_nodes": 1,
            "num_envs_per_rank": SINGLE_ENVS, "workload_scope": "global", "measurement_scope": "rank0_process",
            "gpu_measurement_scope": "rank0_node",
        }  # fmt: skip
        phases = training.bundle["runtime"]["startup_time_s"]
        assert phases["first_step"] is None  # training never steps the task outside the library
        assert 0 < phases["first_iteration"] < training.bundle["runtime"]["total_wall_time_s"]


class TestRuntimeFigures:
    def test_step_timing_and_mode(self, runtime):
        """Only the timed steps count; the effective rate is envs / mean step time; the sync mode is named."""
        runtime_section = runtime.bundle["runtime"]
        timing = runtime_section["environment_step_timing"]
        assert timing["measurement_mode"] == "serialized_synchronized"
        assert timing["environment_step_calls"] == runtime_section["iterations_completed"] == 120
        assert runtime_section["warmup_iterations"] == 7
        fps, step = timing["environment_step_fps"], timing["environment_step_time_s"]
        assert fps["mean"] == pytest.approx(SINGLE_ENVS / step["mean"])
        assert fps["peak"] >= fps["mean"] and fps["std"] > 0
        assert runtime_section["total_fps"] is None and runtime.bundle["learning"] is None

    def test_default_output_path_and_no_library(self, runtime):
        """Without --output_path the bundle lands in results/benchmarks/ under the documented name."""
        assert runtime.path.name == f"runtime_{TASK}_none_1x{SINGLE_ENVS}_seed42.json"
        assert runtime.bundle["run"]["framework"] is None and runtime.bundle["run"]["max_iterations"] is None


class TestStartupFigures:
    def test_every_phase_timed(self, startup):
        """Every phase is measured on a completed startup run, and the total is their sum; Cartpole compiles nothing."""
        runtime = startup.bundle["runtime"]
        phases = dict(runtime["startup_time_s"])
        assert phases.pop("task_compile") is None
        assert set(phases) == {"python_imports", "task_config", "env_creation", "first_step", "first_iteration"}
        assert all(value is not None and value > 0 for value in phases.values()), phases
        assert phases["python_imports"] > phases["task_config"]  # importing torch dwarfs reading a YAML file
        assert runtime["total_wall_time_s"] == pytest.approx(sum(phases.values()))
        assert runtime["iterations_completed"] == 1 and startup.bundle["run"]["max_iterations"] is None


class TestMultiGpu:
    @pytest.mark.parametrize(
        ("name", "scope"),
        [("training_multigpu", "global"), ("runtime_multigpu", "rank0"), ("startup_multigpu", "rank0")],
    )
    def test_only_rank0_writes_and_extra_describes_the_job(self, request, name, scope):
        """Two ranks, one bundle: the output folder holds rank 0's file only, and `extra` gives the job's shape."""
        run: Run = request.getfixturevalue(name)
        assert [path.name for path in run.out_dir.iterdir()] == ["bundle.json"]
        assert run.bundle["extra"] == {
            "distributed": True, "world_size": 2, "local_world_size": 2, "num_nodes": 1,
            "num_envs_per_rank": RANK_ENVS, "workload_scope": scope, "measurement_scope": "rank0_process",
            "gpu_measurement_scope": "rank0_node",
        }  # fmt: skip
        expected_envs = RANK_ENVS * 2 if scope == "global" else RANK_ENVS
        assert run.bundle["run"]["num_envs"] == expected_envs

    def test_training_throughput_is_global(self, training_multigpu):
        """Global steps per iteration count both ranks, and total_fps.mean = steps / mean iteration time."""
        runtime = training_multigpu.bundle["runtime"]
        assert runtime["steps_per_iteration"] == ROLLOUT * RANK_ENVS * 2
        recomputed = runtime["steps_per_iteration"] / runtime["iteration_time_s"]["mean"]
        assert runtime["total_fps"]["mean"] == pytest.approx(recomputed, rel=1e-9)
        collection = runtime["steps_per_iteration"] / runtime["collection_time_s"]["mean"]
        assert runtime["collection_fps"]["mean"] == pytest.approx(collection, rel=1e-9)
        iteration = [record["iteration_s"] for record in rank0_iterations(training_multigpu)[1:]]
        assert runtime["iteration_time_s"]["mean"] == pytest.approx(statistics.fmean(iteration))

    def test_every_rank_timed_and_no_straggler(self, training_multigpu):
        """Both ranks' iterations break down into collection, update and collectives (the gradient all-reduce among
        them; each figure a median over the measured iterations, so they add up per iteration, not exactly as
        medians); two even ranks name no straggler."""
        ranks = training_multigpu.bundle["ranks"]
        assert [rank["rank"] for rank in ranks["per_rank"]] == [0, 1]
        assert ranks["straggler"] is None and ranks["iterations_measured"] == 4
        for rank in ranks["per_rank"]:
            assert 0 < rank["collective_s"] < rank["iteration_s"] and rank["collectives"]["all_reduce"]["bytes"] > 0
            assert rank["collection_compute_s"] > 0 and rank["update_compute_s"] > 0
        assert "ranks: straggler none" in training_multigpu.result.stdout

    @pytest.mark.parametrize(
        ("name", "slowest_by"), [("startup_multigpu", "startup_s"), ("runtime_multigpu", "step_s")]
    )
    def test_startup_and_runtime_name_each_ranks_figures(self, request, name, slowest_by):
        """Rank 0 gathers both ranks' figures (schema 1.2; a 1.1 bundle may not hold them) and names the slowest by
        its figure, with the excess over the other's, in the bundle and on the console; one process has a section of
        its one rank and no excess. The rank-0 fields keep their scope."""
        run: Run = request.getfixturevalue(name)
        ranks = run.bundle["ranks"]
        assert [rank["rank"] for rank in ranks["per_rank"]] == [0, 1] and ranks["slowest_by"] == slowest_by
        values = [rank[slowest_by] for rank in ranks["per_rank"]]
        assert min(values) > 0 and ranks["slowest_rank"] == values.index(max(values))
        assert ranks["slowest_rank_excess_s"] == pytest.approx(max(values) - min(values))
        assert f"ranks: slowest rank {ranks['slowest_rank']}, {slowest_by} " in run.result.stdout
        assert run.bundle["extra"]["workload_scope"] == "rank0"
        if name == "startup_multigpu":
            first = ranks["per_rank"][0]
            assert first["first_iteration_s"] == run.bundle["runtime"]["startup_time_s"]["first_iteration"]
            assert first["startup_s"] == pytest.approx(first["task_creation_s"] + first["first_iteration_s"])
        assert validation_errors(run.bundle) == []
        assert validation_errors(run.bundle | {"schema_version": "1.1"}) != []
        alone = request.getfixturevalue(name.removesuffix("_multigpu")).bundle["ranks"]
        assert len(alone["per_rank"]) == 1 and alone["slowest_rank_excess_s"] is None

    def test_rank1_wrote_no_bundle_anywhere(self, training_multigpu):
        """Rank 1 has its own run folder, but no JSON bundle appears outside the run folders."""
        root = training_multigpu.out_dir.parent
        stray = [path for path in root.rglob("*.json") if training_multigpu.log_root not in path.parents]
        assert stray == [training_multigpu.path]


class TestSchemaStrictness:
    def test_missing_field_is_rejected(self, training):
        """Dropping one required field anywhere fails validation, naming where."""
        for section, key in [
            ("run", "seed"),
            ("runtime", "total_fps"),
            ("extra", "workload_scope"),
            (None, "learning"),
        ]:
            bundle = copy.deepcopy(training.bundle)
            del (bundle[section] if section else bundle)[key]
            errors = validation_errors(bundle)
            assert errors and any(f"'{key}' is a required property" in error for error in errors), (key, errors)

    def test_mistyped_field_is_rejected(self, training):
        """A number as a string, a bad enum and an unknown key each fail."""
        for path, value in [
            (("runtime", "total_fps", "mean"), "10000"),
            (("run", "status"), "done"),
            (("extra", "world_size"), 1.5),
            (("resources", "devices"), {"gpu0": {"util_pct": None, "mem_gb": None}}),
        ]:
            bundle = copy.deepcopy(training.bundle)
            node = bundle
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            assert validation_errors(bundle), path
        bundle = copy.deepcopy(training.bundle)
        bundle["run"]["note"] = "x"
        assert validation_errors(bundle)

    def test_workflow_conditions(self, training, runtime):
        """Training needs learning curves and global scope; runtime needs step timing and no learning."""
        no_learning = copy.deepcopy(training.bundle) | {"learning": None}
        assert validation_errors(no_learning)
        rank0_training = copy.deepcopy(training.bundle)
        rank0_training["extra"]["workload_scope"] = "rank0"
        assert validation_errors(rank0_training)
        no_timing = copy.deepcopy(runtime.bundle)
        no_timing["runtime"]["environment_step_timing"] = None
        assert validation_errors(no_timing)

    def test_validate_command_reports_each_invalid_file(self, training, tmp_path):
        """One line per bad file (broken JSON, schema violation) and exit 1; the good file is not reported."""
        good, bad, broken = tmp_path / "good.json", tmp_path / "bad.json", tmp_path / "broken.json"
        good.write_text(json.dumps(training.bundle))
        bad.write_text(json.dumps({**training.bundle, "schema_version": 1.0}))
        broken.write_text("{not json")
        result = rlscale("bundle", "validate", str(good), str(bad), str(broken), cwd=tmp_path)
        assert result.returncode == 1
        lines = result.stderr.splitlines()
        assert len(lines) == 2 and lines[0].startswith(f"{bad}: invalid: schema_version")
        assert lines[1].startswith(f"{broken}: invalid:")


class TestFailureStatus:
    def test_crash_is_recorded_in_the_bundle(self, tmp_path_factory):
        """A rank that crashes at iteration 2 still leaves a valid bundle saying so, with the iterations it ran."""
        run = run_benchmark(
            tmp_path_factory, "training", "--num_envs", "32", "--max_iterations", "4",
            env={"RLSCALE_INJECT_FAULT": "crash:rank=0,iteration=2"},
        )  # fmt: skip
        assert run.result.returncode != 0 and "InjectedCrash" in run.result.stderr
        assert validation_errors(run.bundle) == []
        assert run.bundle["run"]["status"] == "crashed"
        assert run.bundle["runtime"]["iterations_completed"] == 2
        assert len(run.bundle["learning"]["reward"]["series_per_iter"]) == 2
        assert math.isfinite(run.bundle["runtime"]["total_fps"]["mean"])  # the one post-warm-up iteration


LIBRARIES = ("rsl_rl", "rl_games", "skrl")
SEEDS_ITERATIONS = 6  # enough for every library to end episodes at 32 envs, so the curves hold numbers
COLD_ONLY = ("python_imports", "task_config", "task_compile")


def run_seeds(factory, workflow: str, library: str, *seed_args: str, ranks: int = 1) -> dict[int, dict]:
    """A training benchmark of ``library`` with ``seed_args`` (``--seeds ...`` or ``--seed N``); bundles by seed."""
    root = factory.mktemp(f"{workflow}_{library}")
    args = ["--num_gpus", str(ranks)] if workflow.endswith("multigpu") else []
    args += ["--task", TASK, "--device", "cpu", "--rl_library", library, "--max_iterations", str(SEEDS_ITERATIONS)]
    args += ["--num_envs", str(RANK_ENVS), "--log_root", "logs", "--output_path", "out/seed{seed}.json", *seed_args]
    result = rlscale("benchmark", workflow, *args, cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    bundles = {int(path.stem.removeprefix("seed")): json.loads(path.read_text()) for path in (root / "out").iterdir()}
    if "--seeds" in seed_args:  # each repeat ran in a log root of its own
        manifests = [path for path in (root / "logs").rglob("manifest.json") if "rank_" not in path.parent.name]
        assert sorted(path.relative_to(root / "logs").parts[0] for path in manifests) == [
            f"seed{seed}" for seed in sorted(bundles)
        ]
    return bundles


class TestSeedsInOneProcess:
    """`--seeds`: one warm process runs the cell once per seed, and each repeat is the run a fresh process makes."""

    @pytest.mark.parametrize(
        ("workflow", "ranks", "library"),
        [
            ("training", 1, "rsl_rl"),  # the one-process path; each library's own state shows at 2 ranks too
            ("training_multigpu", 2, LIBRARIES[0]),
            *(pytest.param("training_multigpu", 2, library, marks=pytest.mark.extras) for library in LIBRARIES[1:]),
        ],
    )
    def test_second_repeat_is_a_fresh_run(self, tmp_path_factory, workflow, ranks, library):
        """Seed 1 after seed 2 in one process (one rank, or 2 gloo ranks sharing one process group) learns exactly
        as a fresh process with seed 1: the libraries are deterministic on CPU, so any state left by the first
        repeat (a global registry, an RNG, the process group) would show in the curve. The repeats run in the order
        given; the first bundle times the process start, the second has null python_imports, task_config and
        task_compile (paid once per process) but its own env creation and first iteration."""
        warm = run_seeds(tmp_path_factory, workflow, library, "--seeds", "2", "1", ranks=ranks)
        fresh = run_seeds(tmp_path_factory, workflow, library, "--seed", "1", ranks=ranks)
        assert sorted(warm) == [1, 2] and all(validation_errors(bundle) == [] for bundle in warm.values())
        assert [warm[seed]["run"]["seed"] for seed in (2, 1)] == [2, 1]
        assert warm[1]["learning"] == fresh[1]["learning"]
        assert warm[1]["learning"] != warm[2]["learning"]  # the seed reached the run
        assert math.isfinite(warm[1]["learning"]["ep_length"]["final_raw"])
        first, second = warm[2]["runtime"]["startup_time_s"], warm[1]["runtime"]["startup_time_s"]
        assert first["python_imports"] > 0 and first["task_config"] > 0
        assert [second[phase] for phase in COLD_ONLY] == [None, None, None]
        assert second["env_creation"] > 0 and second["first_iteration"] > 0
        if ranks > 1:  # the library's own gradient all-reduce was timed on every rank, in both repeats
            for bundle in warm.values():
                per_rank = bundle["ranks"]["per_rank"]
                assert [rank["collectives"]["all_reduce"]["calls"] > 0 for rank in per_rank] == [True, True]
                assert all(rank["collectives"]["all_reduce"]["bytes"] > 0 for rank in per_rank)


class TestRejections:
    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["training", "--seed", "1", "--seeds", "2", "3"], "--seed and --seeds are exclusive"),
            (["training", "--seeds", "2", "2"], "names a seed twice"),
            (["training", "--seeds", "1", "2", "--peer"], "--peer runs with one seed per process"),
            (["training_multigpu", "--seeds", "1", "2"], "must contain {seed} with several --seeds"),
            (["startup", "--seeds", "1", "2"], "unrecognized arguments"),
            (["training_multigpu", "--video"], "rlscale has no renderer"),
            (["training_multigpu", "--capture_env_sensors", "1"], "no sensors"),
            (["training_multigpu", "--check_success"], "no success term"),
            (["training_multigpu", "--rl_library", "skrl", "--ml_framework", "jax"], "use --ml_framework torch"),
            (["startup_multigpu", "--rl_library", "skrl", "--ml_framework", "jax"], "use --ml_framework torch"),
            (["training", "--video"], "rlscale has no renderer"),
            (["runtime", "--rl_library", "rl_games"], "without a library"),
            (["training", "--max_iterations", "2", "--warmup_iterations", "2"], "leaves none of the 2 iterations"),
            (["training", "--ema_alpha", "0"], "--ema_alpha must be in (0, 1]"),
            (["runtime", "--num_steps", "0"], "--num_steps >= 1"),
            (["play"], "unknown workflow 'play'"),
        ],
    )
    def test_exit_2_one_line_nothing_written(self, tmp_path, args, message):
        """Refused with exit 2 and one stderr line, before any file or folder exists."""
        common = ["--num_gpus", "2"] if args[0].endswith("multigpu") else []
        common += ["--task", TASK, "--device", "cpu", "--output_path", "out/bundle.json", "--log_root", "logs"]
        result = rlscale("benchmark", *args, *common, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr
        assert list(tmp_path.iterdir()) == []

    @pytest.mark.parametrize(("library", "framework"), [("rsl_rl", "torch"), ("rl_games", "torch"), ("skrl", "torch")])
    def test_training_multigpu_accepts_torch_libraries(self, tmp_path, library, framework):
        """rsl_rl, rl_games and skrl-torch pass every check and resolve to a torchrun command (dry run)."""
        result = rlscale(
            "benchmark", "training_multigpu", "--num_gpus", "2", "--rl_library", library, "--ml_framework", framework,
            "--task", TASK, "--device", "cpu", "--dry_run", cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "rlscale.launch.torchrun" in result.stdout and f"--rl_library {library}" in result.stdout
        assert list(tmp_path.iterdir()) == []


class TestLightDispatcher:
    def test_help_and_dry_run_do_not_import_torch(self, tmp_path):
        """`benchmark --help`, a workflow's --help and a multi-GPU --dry_run answer without importing torch."""
        code = (
            "import contextlib, io, sys\n"
            "from rlscale.cli import main\n"
            "for argv in (['benchmark', '--help'], ['benchmark', 'training', '--help'],\n"
            "             ['benchmark', 'runtime_multigpu', '--num_gpus', '2', '--device', 'cpu', '--dry_run']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "        main(argv)\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
        )
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
