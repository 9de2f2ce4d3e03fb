"""Tests of the study's aggregation: hand-built bundles and frames in, scaling table (computed by hand) out."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from run_manifests import manifest_data, run_manifest

from rlscale.benchmark.bundle import validation_errors
from rlscale.launch.probe_sweep import ProbeSweep, write_probe_sweep
from rlscale.study import summary
from rlscale.study.aggregate import RECORD_COLUMNS, IncompatibleBundlesError, load_bundles, scaling_table
from rlscale.study.markdown import markdown_table
from rlscale.study.plots import learning_curves_figure, scaling_figures
from rlscale.study.prediction_table import prediction_table
from rlscale.study.summary import ENV_ONLY_LABEL, other_bundles_table, write_study_outputs
from rlscale.study.train_runs import train_curves, train_table

CSV_COLUMNS = [
    "task", "rl_library", "ml_framework", "num_envs_per_rank", "world_size", "n_runs", "global_fps_median",
    "global_fps_iqr", "per_rank_fps_median", "speedup", "speedup_low", "speedup_high", "speedup_coverage",
    "efficiency", "efficiency_low", "efficiency_high", "peer_ratio_median", "peer_ratio_low", "peer_ratio_high",
    "peer_ratio_coverage", "schema_version",
]  # fmt: skip
"""The columns of ``scaling.csv``, in order: the file's contract with its readers, spelled out here."""


def mean_std(mean: float) -> dict:
    """A MeanStd object of the bundle schema."""
    return {"mean": mean, "std": 0.0, "peak": mean}


def make_bundle(
    fps: float,
    world_size: int = 1,
    num_envs: int = 64,
    task: str = "Isaac-Cartpole-Direct",
    library: str = "rsl_rl",
    seed: int = 1,
    workflow: str = "training",
    rewards: tuple[float, ...] = (1.0, 2.0, 3.0),
) -> dict:
    """A schema-valid bundle of one benchmark run whose global throughput is ``fps``."""
    steps = num_envs * world_size * 16
    return {
        "schema_version": "1.0",
        "run": {
            "run_id": f"{workflow}_{library}_{task}_seed{seed}",
            "workflow": workflow,
            "multigpu": True,
            "framework": library if workflow != "runtime" else None,
            "ml_framework": "torch",
            "task": task,
            "seed": seed,
            "device": "cpu",
            "start_time_utc": "2026-01-01T00:00:00+00:00",
            "end_time_utc": "2026-01-01T00:00:10+00:00",
            "duration_s": 10.0,
            "status": "completed",
            "num_envs": num_envs * world_size if workflow == "training" else num_envs,
            "max_iterations": len(rewards),
        },
        "versions": {
            **dict.fromkeys(("cuda", "rlscale", "rsl_rl", "rl_games", "skrl", "jax", "numpy", "git_commit")),
            "torch": "2.13.0",
            "python": "3.11.7",
            "git_dirty": None,
        },
        "hardware": {"hostname": "vm", "gpu_devices": [], "cpu_name": None, "cpu_count": 2, "ram_gb": 23.0},
        "runtime": {
            "startup_time_s": dict.fromkeys(
                ("python_imports", "task_config", "env_creation", "first_step", "first_iteration"), 0.1
            ),
            "iterations_completed": len(rewards),
            "warmup_iterations": 1,
            "total_wall_time_s": 1.0,
            "steps_per_iteration": steps,
            "iteration_time_s": mean_std(steps / fps),
            "collection_time_s": mean_std(steps / fps / 2),
            "learning_time_s": mean_std(steps / fps / 2),
            "collection_fps": mean_std(2 * fps),
            "total_fps": mean_std(fps),
            "iterations_per_s": mean_std(fps / steps),
            "environment_step_timing": None,
        },
        "resources": {
            **dict.fromkeys(("gpu_util_pct", "gpu_mem_gb", "cpu_util_pct", "ram_gb")),
            "devices": {},
            "samples": 0,
        },
        "learning": {
            "ema_alpha": 0.1,
            "reward": {"final_raw": rewards[-1], "final_ema": rewards[-1], "series_per_iter": list(rewards)},
            "ep_length": {"final_raw": 10.0, "final_ema": 10.0, "series_per_iter": [10.0] * len(rewards)},
            "env_steps_per_iter": steps,
        },
        "extra": {
            "distributed": True,
            "world_size": world_size,
            "local_world_size": world_size,
            "num_nodes": 1,
            "num_envs_per_rank": num_envs,
            "workload_scope": "global" if workflow == "training" else "rank0",
            "measurement_scope": "rank0_process",
            "gpu_measurement_scope": "rank0_node",
        },
    }


def cell_of(bundle: dict) -> dict:
    """The cell a bundle was produced for, as the workflow files it."""
    return {
        "task": bundle["run"]["task"],
        "rl_library": bundle["run"]["framework"],
        "ml_framework": "torch",
        "num_envs_per_rank": bundle["extra"]["num_envs_per_rank"],
        "world_size": bundle["extra"]["world_size"],
    }


def frame_of(bundles: list[dict]) -> pd.DataFrame:
    """Bundle records, as the aggregate rule builds them."""
    paths = [f"b{index}.json" for index in range(len(bundles))]
    return load_bundles(paths, [cell_of(bundle) for bundle in bundles], bundles=bundles)


def record(**overrides) -> dict:
    """One hand-built record of the bundle frame (a completed rsl_rl training run on CPU)."""
    base = {
        "path": "x.json",
        "schema_version": "1.0",
        "workflow": "training",
        "task": "T",
        "rl_library": "rsl_rl",
        "ml_framework": "torch",
        "seed": 1,
        "status": "completed",
        "device_type": "cpu",
        "num_envs_per_rank": 64,
        "world_size": 1,
        "num_nodes": 1,
        "workload_scope": "global",
        "measurement_scope": "rank0_process",
        "global_fps": 100.0,
    }
    return {**base, **overrides}


def train_manifest(world_size: int, returns: tuple[float | None, ...], start: int = 0, num_envs: int = 64) -> dict:
    """The manifest of a ``train`` run whose iterations from ``start`` on had ``returns``: 16 steps per env, so
    iteration k ends at (k + 1) × 16 × ``num_envs`` × ``world_size`` global env steps."""
    steps = 16 * num_envs * world_size
    iterations = [
        {"iteration": start + k, "env_steps": (start + k + 1) * steps, "elapsed_s": 0.5 * (k + 1), "mean_return": value}
        for k, value in enumerate(returns)
    ]
    return {
        "status": "completed",
        "args": {"ml_framework": "torch", "seed": 1},
        "num_envs": num_envs,
        "start_iteration": start,
        "iterations_completed": start + len(returns),
        "final_mean_return": returns[-1],
        "wall_time_s": 1.0,
        "iterations": iterations,
    }


class TestSyntheticBundles:
    def test_builder_matches_the_writer_schema(self):
        """The test bundles pass the schema the benchmark writer validates against, so the tests use real input."""
        assert validation_errors(make_bundle(1000.0, world_size=2)) == []


class TestEfficiency:
    def test_hand_computed_table(self):
        """Median, IQR, speedup and efficiency of a 1/2/4-rank study equal the values worked out by hand."""
        bundles = [
            make_bundle(1000.0, 1, seed=1),
            make_bundle(1200.0, 1, seed=2),
            make_bundle(1100.0, 1, seed=3),  # ws1: median 1100, IQR 1150 - 1050 = 100
            make_bundle(2000.0, 2, seed=1),
            make_bundle(2100.0, 2, seed=2),  # ws2: median 2050, IQR 2075 - 2025 = 50
            make_bundle(3300.0, 4, seed=1),  # ws4: median 3300, IQR 0
        ]
        table = scaling_table(frame_of(bundles))
        assert list(table.columns) == CSV_COLUMNS
        assert table["world_size"].tolist() == [1, 2, 4]
        assert table["n_runs"].tolist() == [3, 2, 1]
        assert table["global_fps_median"].tolist() == pytest.approx([1100.0, 2050.0, 3300.0])
        assert table["global_fps_iqr"].tolist() == pytest.approx([100.0, 50.0, 0.0])
        assert table["speedup"].tolist() == pytest.approx([1.0, 2050 / 1100, 3.0])
        assert table["efficiency"].tolist() == pytest.approx([1.0, 2050 / (2 * 1100), 3300 / (4 * 1100)])
        assert table["per_rank_fps_median"].tolist() == pytest.approx([1100.0, 1025.0, 825.0])

    def test_intervals_of_too_few_seeds_are_ranges_with_their_coverage(self):
        """Three and two seeds have no 97.5 % order-statistic interval, so each cell's median gets its range: 1-rank
        1000–1200 (coverage 1 - 2 / 8 = 0.75), 2-rank 2000–2100 (1 - 2 / 4 = 0.5), and the speedup 2000 / 1200 to
        2100 / 1000 with coverage 0.75 × 0.5. The single 4-rank run covers nothing (0). Rank 1 is its own baseline:
        exactly 1."""
        bundles = [
            *(make_bundle(fps, 1, seed=seed) for seed, fps in enumerate((1000.0, 1200.0, 1100.0))),
            *(make_bundle(fps, 2, seed=seed) for seed, fps in enumerate((2000.0, 2100.0))),
            make_bundle(3300.0, 4),
        ]
        table = scaling_table(frame_of(bundles))
        assert table["speedup_low"].tolist() == pytest.approx([1.0, 2000 / 1200, 3300 / 1200])
        assert table["speedup_high"].tolist() == pytest.approx([1.0, 2100 / 1000, 3300 / 1000])
        assert table["efficiency_low"].tolist() == pytest.approx([1.0, 2000 / 1200 / 2, 3300 / 1200 / 4])
        assert table["efficiency_high"].tolist() == pytest.approx([1.0, 2100 / 1000 / 2, 3300 / 1000 / 4])
        assert table["speedup_coverage"].tolist() == pytest.approx([1.0, 0.375, 0.0])

    def test_interval_of_enough_seeds_by_hand(self):
        """Ten seeds a side: each median's interval at sqrt(0.95) is [x(2), x(9)] (1 - 2 × 11 / 1024 = 0.9785; the
        next, [x(3), x(8)], only 0.8906), and the speedup's bounds divide them crosswise, covering 0.9785²."""
        single = [1000.0 + 10 * seed for seed in range(10)]  # x(2) = 1010, x(9) = 1080, median 1045
        double = [2000.0 + 20 * seed for seed in range(10)]  # x(2) = 2020, x(9) = 2160, median 2090
        bundles = [
            *(make_bundle(fps, 1, seed=seed) for seed, fps in enumerate(single)),
            *(make_bundle(fps, 2, seed=seed) for seed, fps in enumerate(double)),
        ]
        row = scaling_table(frame_of(bundles)).iloc[1]
        expected = [2090 / 1045, 2020 / 1080, 2160 / 1010, (1 - 22 / 1024) ** 2]
        assert row[["speedup", "speedup_low", "speedup_high", "speedup_coverage"]].tolist() == pytest.approx(expected)
        assert row[["efficiency_low", "efficiency_high"]].tolist() == pytest.approx([2020 / 1080 / 2, 2160 / 1010 / 2])

    def test_baseline_is_per_env_count_and_library(self):
        """Each world size divides by the single rank of its own per-rank env count and library, never another's."""
        bundles = [
            make_bundle(1000.0, 1, num_envs=64),
            make_bundle(1800.0, 2, num_envs=64),
            make_bundle(4000.0, 1, num_envs=256),
            make_bundle(6000.0, 2, num_envs=256),
            make_bundle(500.0, 1, library="skrl"),
            make_bundle(900.0, 2, library="skrl"),
        ]
        table = scaling_table(frame_of(bundles)).set_index(["rl_library", "num_envs_per_rank", "world_size"])
        assert table.loc[("rsl_rl", 64, 2), "efficiency"] == pytest.approx(1800 / (2 * 1000))
        assert table.loc[("rsl_rl", 256, 2), "efficiency"] == pytest.approx(6000 / (2 * 4000))
        assert table.loc[("skrl", 64, 2), "efficiency"] == pytest.approx(900 / (2 * 500))

    def test_peer_ratio_is_the_median_of_each_runs_own_ratio(self):
        """A row's peer ratio is the median of its bundles' side-by-side ratios; NaN where no run had a peer."""

        def with_peer(bundle: dict, ratio: float) -> dict:
            fps = bundle["runtime"]["total_fps"]["mean"]
            bundle["runtime"]["peer"] = {
                "library": "rsl_rl",
                "iterations_completed": 3,
                "iteration_time_s": mean_std(0.1),
                "total_fps": mean_std(fps / ratio),
                "total_fps_median": fps / ratio,
                "rlscale_total_fps_median": fps,
                "ratio_total_fps_median": ratio,
                "iteration_s_per_iter": [0.1, 0.1, 0.1],
                "total_wall_time_s": 1.0,
                "process_wall_time_s": 2.0,
            }
            assert validation_errors(bundle) == []
            return bundle

        bundles = [
            with_peer(make_bundle(1000.0, 1, seed=1), 1.2),
            with_peer(make_bundle(1100.0, 1, seed=2), 0.9),
            with_peer(make_bundle(1050.0, 1, seed=3), 1.05),
            make_bundle(2000.0, 2, seed=1),
        ]
        table = scaling_table(frame_of(bundles))
        assert table["peer_ratio_median"].iloc[0] == pytest.approx(1.05)
        # Three ratios have no 95 % interval: their range, covering 1 - 2 / 8.
        bounds = table.loc[0, ["peer_ratio_low", "peer_ratio_high", "peer_ratio_coverage"]].tolist()
        assert bounds == pytest.approx([0.9, 1.2, 0.75])
        assert table.loc[1, ["peer_ratio_median", "peer_ratio_low", "peer_ratio_high"]].isna().all()

    def test_no_single_rank_row_gives_nan(self):
        """Without a world-size-1 run there is nothing to divide by: efficiency is NaN, not a guess."""
        table = scaling_table(frame_of([make_bundle(1800.0, 2), make_bundle(3000.0, 4)]))
        assert table["efficiency"].isna().all()
        assert table[["speedup_low", "speedup_high", "efficiency_low", "efficiency_high"]].isna().all().all()
        assert table["global_fps_median"].tolist() == [1800.0, 3000.0]


class TestIncompatibleBundles:
    def test_bundle_filed_under_another_env_count(self):
        """A bundle measuring 128 envs per rank filed in the 64-env cell is refused: a row never mixes env counts."""
        bundles = [make_bundle(1000.0, 1, num_envs=64), make_bundle(1900.0, 2, num_envs=128)]
        cells = [cell_of(bundles[0]), {**cell_of(bundles[1]), "num_envs_per_rank": 64}]
        with pytest.raises(IncompatibleBundlesError, match="num_envs_per_rank=128 but was filed under"):
            load_bundles(["a.json", "b.json"], cells, bundles=bundles)

    def test_bundle_filed_under_another_task(self):
        """A bundle of another task in a cell is refused."""
        bundle = make_bundle(1000.0, task="Isaac-Cartpole")
        with pytest.raises(IncompatibleBundlesError, match="task='Isaac-Cartpole'"):
            load_bundles(["a.json"], [{**cell_of(bundle), "task": "Isaac-Cartpole-Direct"}], bundles=[bundle])

    def test_schema_version_mixed_in_a_row(self):
        """Two schema versions in one row (hand-built frame) are refused, naming the column and the files."""
        frame = pd.DataFrame([record(path="old.json", schema_version="0.9"), record(path="new.json", seed=2)])
        with pytest.raises(IncompatibleBundlesError, match=r"schema_version differs.*old\.json"):
            scaling_table(frame)

    def test_schema_version_mixed_across_world_sizes(self):
        """A world size is not compared with a single rank of another schema version either."""
        frame = pd.DataFrame([record(), record(world_size=2, schema_version="2.0", global_fps=190.0)])
        with pytest.raises(IncompatibleBundlesError, match="schema_version differs"):
            scaling_table(frame)

    def test_bundle_not_matching_the_schema(self):
        """A bundle the writer's schema rejects (an unknown schema version) is refused before any number is read."""
        bundle = make_bundle(1000.0)
        bundle["schema_version"] = "2.0"
        with pytest.raises(IncompatibleBundlesError, match="does not match the bundle schema"):
            frame_of([bundle])

    def test_workload_scope_mixed(self):
        """A rank-0 (startup/runtime) figure is never compared with global training throughput."""
        frame = pd.DataFrame([record(), record(world_size=2, workload_scope="rank0", global_fps=150.0)])
        with pytest.raises(IncompatibleBundlesError, match="workload_scope differs"):
            scaling_table(frame)

    def test_unfinished_run(self):
        """A crashed run's bundle is refused rather than counted."""
        frame = pd.DataFrame([record(), record(path="bad.json", status="crashed", seed=2)])
        with pytest.raises(IncompatibleBundlesError, match=r"did not complete: bad\.json \(crashed\)"):
            scaling_table(frame)

    def test_compatible_frame_passes(self):
        """The same frame with matching versions and scopes aggregates (the refusals above are not blanket ones)."""
        frame = pd.DataFrame([record(), record(world_size=2, global_fps=190.0)], columns=RECORD_COLUMNS)
        assert scaling_table(frame)["efficiency"].tolist() == pytest.approx([1.0, 0.95])


class TestTrainCurves:
    def test_one_row_per_iteration_of_each_train_run(self):
        """Each train run's iterations with their global env steps and returns (NaN where no episode ended), filed
        under the run's task, library and world size; a resumed run's rows start where it resumed."""
        cells = [{"task": "T", "library": "skrl", "world_size": size} for size in (1, 2)]
        runs = [run_manifest(train_manifest(1, (None, 1.0))), run_manifest(train_manifest(2, (2.5,), start=3))]
        curves = train_curves(runs, cells)
        assert curves["world_size"].tolist() == [1, 1, 2] and set(curves["rl_library"]) == {"skrl"}
        assert curves["env_steps"].tolist() == [1024, 2048, 4 * 2048]
        assert math.isnan(curves["mean_return"].iloc[0]) and curves["mean_return"].tolist()[1:] == [1.0, 2.5]
        assert curves["start_iteration"].tolist() == [0, 0, 3] and curves["num_envs_per_rank"].tolist() == [64] * 3


def write_outputs(
    tmp_path,
    bundles: list[dict],
    others: list[dict],
    manifests: list[dict],
    plan: tuple[str, ...] = (),
    sweeps: tuple[ProbeSweep, ...] = (),
) -> dict:
    """Run the aggregate rule's function on these training bundles, startup/runtime bundles and train manifests (one
    per world size from 1, Isaac-Cartpole-Direct with rsl_rl), plan lines and probe sweeps (and the path of one that
    is missing, as a study probed before sweeps has); return its output paths."""
    paths, other_paths, manifest_paths = [], [], []
    for name, items, listed in (("training", bundles, paths), ("other", others, other_paths)):
        for index, bundle in enumerate(items):
            listed.append(tmp_path / f"{name}{index}.json")
            listed[-1].write_text(json.dumps(bundle))
    for index, manifest in enumerate(manifests):
        manifest_paths.append(tmp_path / f"manifest{index}.json")
        manifest_paths[-1].write_text(json.dumps(manifest_data(manifest)))
    sweep_paths = [tmp_path / f"ws{sweep.world_size}.json" for sweep in sweeps]
    for sweep, path in zip(sweeps, sweep_paths, strict=True):
        write_probe_sweep(sweep, path)
    out = {name: tmp_path / "out" / name for name in ("s.csv", "t.png", "e.png", "l.png", "r.png", "summary.md")}
    write_study_outputs(
        study="unit",
        device="cpu",
        device_reason="device: auto chose cpu with the cpu_fallback sizes: no GPU visible (NVML)",
        training_bundles=[str(path) for path in paths],
        training_cells=[cell_of(bundle) for bundle in bundles],
        other_bundles=[str(path) for path in other_paths],
        train_manifests=[str(path) for path in manifest_paths],
        train_cells=[
            {"task": "Isaac-Cartpole-Direct", "library": "rsl_rl", "world_size": size}
            for size in range(1, len(manifests) + 1)
        ],
        scaling_csv=out["s.csv"],
        throughput_plot=out["t.png"],
        efficiency_plot=out["e.png"],
        learning_plot=out["l.png"],
        rank_time_plot=out["r.png"],
        summary=out["summary.md"],
        plan=plan,
        probe_sweeps=[str(path) for path in [*sweep_paths, tmp_path / "ws8.json"]],  # ws8.json: a sweep never made
    )
    return out


def segmented_manifest(segments: list[tuple[int, int | None, float | None]], world_sizes=(2, 1)) -> dict:
    """A train run's manifest with these (first iteration, last iteration, wall time) segments; the top-level wall
    time is the last invocation's, as rank 0 writes it."""
    records = [
        {"start_time": f"2026-01-0{index + 1}T00:00:00+00:00", "world_size": world_sizes[index % len(world_sizes)],
         "num_envs_per_rank": 8, "first_iteration": first, "last_iteration": last, "wall_time_s": wall_time,
         "status": "completed" if wall_time else "running"}
        for index, (first, last, wall_time) in enumerate(segments)
    ]  # fmt: skip
    return {"segments": records, "wall_time_s": segments[-1][2]}


class TestTrainTable:
    def test_a_resumed_run_counts_every_segment(self):
        """Wall time and iterations trained add up over the run and each resume (a crash's redone iterations
        included); a segment killed without a record leaves the wall time unknown, not understated."""
        crashed_and_resumed = segmented_manifest([(0, 5, 30.0), (4, 9, 20.0)]) | {"iterations_completed": 10}
        killed_then_resumed = segmented_manifest([(0, None, None), (0, 9, 50.0)]) | {"iterations_completed": 10}
        cells = [{"task": "T", "world_size": 1}] * 2
        table = train_table([run_manifest(crashed_and_resumed), run_manifest(killed_then_resumed)], cells)
        assert table[["iterations", "segments", "iterations_trained"]].values.tolist() == [[10, 2, 12], [10, 2, 10]]
        assert table["wall_time_s"].tolist()[0] == 50.0 and pd.isna(table["wall_time_s"].tolist()[1])


class TestStudyOutputs:
    def test_writes_csv_plots_and_summary(self, tmp_path):
        """The aggregate rule's function writes a CSV equal to the table, four PNGs and a summary with the table."""
        bundles = [make_bundle(1000.0, 1), make_bundle(1600.0, 2), make_bundle(900.0, 2, seed=2)]
        out = write_outputs(tmp_path, bundles, [make_bundle(1.0, 2, workflow="runtime")], [train_manifest(1, (2.0,))])
        written = pd.read_csv(out["s.csv"])
        assert list(written.columns) == CSV_COLUMNS
        assert written["efficiency"].tolist() == pytest.approx([1.0, 1250 / 2000])  # median(1600, 900) = 1250
        for name in ("t.png", "e.png", "l.png", "r.png"):  # r.png: no cell has a ranks section, and it says so
            assert out[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        text = out["summary.md"].read_text()
        assert "| Isaac-Cartpole-Direct | rsl_rl | 64 | 2 | 2 | 1,250 |" in text
        assert "| 1 | 1 | – |" in text  # The 1-rank row: its speedup and efficiency of 1, with no interval to quote.
        # Efficiency at 2 ranks: 1250 / 2000, between the ranges' 900 / 1000 / 2 and 1600 / 1000 / 2; one 1-rank seed
        # and two 2-rank seeds cover the medians with 0 × 0.5, which the summary says.
        assert "| 0.625 [0.45–0.8] (0.0%) |" in text
        assert "runtime" in text and "rank0" in text
        assert "Why: device: auto chose cpu with the cpu_fallback sizes: no GPU visible (NVML)." in text

    def test_one_run_per_cell_quotes_no_interval(self, tmp_path):
        """With one seed per world size the speedup and efficiency have no spread: the summary prints the bare
        ratios, never a range of one value that would read as certainty."""
        text = write_outputs(tmp_path, [make_bundle(1000.0, 1), make_bundle(1600.0, 2)], [], [])["summary.md"]
        row = next(
            line
            for line in text.read_text().splitlines()
            if line.startswith("| Isaac-Cartpole-Direct | rsl_rl | 64 | 2 |")
        )
        assert "| 1.6 | 0.8 | – |" in row and "[" not in row, row

    def test_summary_starts_with_the_plan(self, tmp_path):
        """summary.md carries the plan the workflow printed, each value with its source, before the results."""
        plan = ("plan: unit on cpu, world sizes [1]", "plan values (source): world_sizes [1] (mine.yaml)")
        text = write_outputs(tmp_path, [make_bundle(1000.0, 1)], [], [], plan)["summary.md"].read_text()
        section = "## Plan: what the config asked for, and where each value came from\n\n"
        assert f"{section}- {plan[0]}\n- {plan[1]}\n" in text
        assert text.index(section) < text.index("## Training throughput")

    def test_startup_table_names_each_library(self, tmp_path):
        """summary.md's startup/runtime table has a library column: one startup row per library, the runtime row
        (which steps the task alone) says it had none."""
        others = [
            make_bundle(1.0, 2, workflow="startup", library="rsl_rl"),
            make_bundle(1.0, 2, workflow="startup", library="skrl"),
            make_bundle(1.0, 2, workflow="runtime"),
        ]
        table = other_bundles_table(others)
        assert table["library"].tolist() == ["rsl_rl", "skrl", ENV_ONLY_LABEL]
        text = write_outputs(tmp_path, [make_bundle(1000.0, 1)], others, [])["summary.md"].read_text()
        assert "| workflow | task | library | world_size |" in text
        assert "| startup | Isaac-Cartpole-Direct | skrl | 2 | 64 | rank0 |" in text

    def test_learning_curves_are_the_train_runs(self, tmp_path, monkeypatch):
        """learning_curves.png draws the train runs' manifests (their iterations' returns and global env steps), not
        the training benchmarks' short runs."""
        drawn = []
        monkeypatch.setattr(summary, "plot_learning_curves", lambda curves, path: drawn.append(curves))
        bundles = [make_bundle(1000.0, 1, rewards=(1.0, 2.0, 3.0)), make_bundle(1800.0, 2, rewards=(1.0, 2.0, 3.0))]
        write_outputs(tmp_path, bundles, [], [train_manifest(1, (10.0, 20.0, 30.0, 40.0)), train_manifest(2, (50.0,))])
        (curves,) = drawn
        assert curves["world_size"].tolist() == [1, 1, 1, 1, 2]
        assert curves["mean_return"].tolist() == [10.0, 20.0, 30.0, 40.0, 50.0]
        assert curves["env_steps"].tolist() == [1024, 2048, 3072, 4096, 2048]


def panels(figure) -> dict[str, object]:
    """The figure's visible subplots, keyed by their titles."""
    return {axis.get_title(): axis for axis in figure.axes if axis.get_visible()}


class TestPlots:
    """What the figures draw, read back from matplotlib: the table's figures, one line per library or world size."""

    @pytest.fixture
    def table(self) -> pd.DataFrame:
        bundles = [
            make_bundle(1000.0, 1, seed=1),
            make_bundle(1200.0, 1, seed=2),  # rsl_rl at 1 rank: median 1100, IQR 100
            make_bundle(1800.0, 2),
            make_bundle(500.0, 1, library="skrl"),
            make_bundle(900.0, 2, library="skrl"),
            make_bundle(4000.0, 1, num_envs=256),
            make_bundle(7000.0, 2, num_envs=256),
        ]
        return scaling_table(frame_of(bundles))

    def test_throughput_panels_lines_and_iqr_bars(self, table, figures):
        """One panel per per-rank env count; in it one line per library through the median FPS at each world size,
        with bars spanning the IQR; the x axis names the ranks and ticks the world sizes that ran."""
        figure = scaling_figures(table, "CPU ranks")["throughput"]
        figures.append(figure)
        by_title = panels(figure)
        assert list(by_title) == ["Isaac-Cartpole-Direct, 64 envs/rank", "Isaac-Cartpole-Direct, 256 envs/rank"]
        axis = by_title["Isaac-Cartpole-Direct, 64 envs/rank"]
        lines = {container.get_label(): container for container in axis.containers}
        assert sorted(lines) == ["rsl_rl", "skrl"]
        assert lines["rsl_rl"].lines[0].get_xdata().tolist() == [1, 2]
        assert lines["rsl_rl"].lines[0].get_ydata().tolist() == pytest.approx([1100.0, 1800.0])
        assert lines["skrl"].lines[0].get_ydata().tolist() == pytest.approx([500.0, 900.0])
        rank1_bar = lines["rsl_rl"].lines[2][0].get_segments()[0]
        assert rank1_bar.ravel().tolist() == pytest.approx([1, 1050.0, 1, 1150.0])  # median ± IQR / 2, at 1 rank
        assert axis.get_xlabel() == "world size (CPU ranks)" and axis.get_xscale() == "log"
        assert [label.get_text() for label in axis.get_xticklabels()] == ["1", "2"]
        assert axis.get_ylabel() == "global env steps / s (training)" and axis.get_ylim()[0] == 0
        other = by_title["Isaac-Cartpole-Direct, 256 envs/rank"]
        assert [container.get_label() for container in other.containers] == ["rsl_rl"]
        assert other.containers[0].lines[0].get_ydata().tolist() == pytest.approx([4000.0, 7000.0])

    def test_efficiency_lines_and_the_ideal(self, table, figures):
        """Each library's efficiency against the world size, and the ideal 1.0 as a reference line."""
        figure = scaling_figures(table)["efficiency"]
        figures.append(figure)
        axis = panels(figure)["Isaac-Cartpole-Direct, 64 envs/rank"]
        lines = {container.get_label(): container for container in axis.containers}
        assert sorted(lines) == ["rsl_rl", "skrl"]
        assert lines["rsl_rl"].lines[0].get_ydata().tolist() == pytest.approx([1.0, 1800 / (2 * 1100)])
        assert lines["skrl"].lines[0].get_ydata().tolist() == pytest.approx([1.0, 900 / (2 * 500)])
        # The bars span the interval: the range of the 1-rank seeds, 1000 to 1200, bounds the 2-rank run's.
        rank2_bar = lines["rsl_rl"].lines[2][0].get_segments()[1]
        assert rank2_bar.ravel().tolist() == pytest.approx([2, 1800 / 1200 / 2, 2, 1800 / 1000 / 2])
        ideal = [line for line in axis.get_lines() if line.get_label() == "ideal"]
        assert len(ideal) == 1 and list(ideal[0].get_ydata()) == [1.0, 1.0]
        assert axis.get_xlabel() == "world size (GPUs)" and axis.get_ylabel() == "efficiency vs N × single rank"

    def test_learning_curves_one_line_per_world_size(self, figures):
        """One panel per task and library; in it one line per world size, the train run's return against global env
        steps; a resumed run's line says where it resumed."""
        cells = [
            {"task": "Isaac-Cartpole-Direct", "library": library, "world_size": size}
            for library, size in (("rsl_rl", 1), ("rsl_rl", 2), ("skrl", 1))
        ]
        manifests = [
            train_manifest(1, (1.0, 2.0, 3.0)),
            train_manifest(2, (6.0, 8.0), start=1),
            train_manifest(1, (5.0,)),
        ]
        figure = learning_curves_figure(train_curves([run_manifest(manifest) for manifest in manifests], cells))
        figures.append(figure)
        by_title = panels(figure)
        assert sorted(by_title) == [
            "Isaac-Cartpole-Direct\nrsl_rl, 64 envs/rank",
            "Isaac-Cartpole-Direct\nskrl, 64 envs/rank",
        ]
        axis = by_title["Isaac-Cartpole-Direct\nrsl_rl, 64 envs/rank"]
        lines = {line.get_label(): line for line in axis.get_lines()}
        assert sorted(lines) == ["world size 1", "world size 2, resumed at iteration 1"]
        assert lines["world size 1"].get_xdata().tolist() == [1024, 2048, 3072]  # 64 envs x 16 steps per iteration
        assert lines["world size 1"].get_ydata().tolist() == [1.0, 2.0, 3.0]
        assert lines["world size 2, resumed at iteration 1"].get_xdata().tolist() == [4096, 6144]
        assert (axis.get_xlabel(), axis.get_ylabel()) == ("global env steps", "mean episode return")
        assert [axis.xaxis.get_major_formatter()(value, 0) for value in (0, 1500, 2e6)] == ["0", "1.5k", "2M"]


class TestMarkdownTable:
    def test_cells_formatted(self):
        """Large floats get thousands separators, small ones 3 significant digits, NaN a dash."""
        text = markdown_table(pd.DataFrame({"a": [12345.6, 0.123456, float("nan")], "b": ["x", "y", "z"]}))
        assert text.splitlines() == ["| a | b |", "|---|---|", "| 12,346 | x |", "| 0.123 | y |", "| – | z |"]


def with_ranks(bundle: dict, compute_s: tuple[float, ...], straggler: int | None) -> dict:
    """``bundle`` as schema 1.1 with a ``ranks`` section: each rank's compute, 0.1 s of transfer, and the waits that
    lockstep ranks of 1 s iterations have; ``straggler`` as the breakdown named it."""
    slowest = max(compute_s)
    per_rank = [
        {
            "rank": rank, "iteration_s": 1.0, "collection_compute_s": compute / 2, "update_compute_s": compute / 2,
            "collective_s": 1.0 - compute, "wait_s": slowest - compute, "compute_s": compute,
            "communication_share": 0.1, "wait_share": slowest - compute,
            "collectives": {"all_reduce": {"calls": 8, "bytes": 4096}},
        }
        for rank, compute in enumerate(compute_s)
    ]  # fmt: skip
    ranks = {
        "iterations_measured": 5, "per_rank": per_rank, "slowest_rank": compute_s.index(slowest),
        "slowest_rank_excess_s": slowest - min(compute_s), "straggler": straggler,
        "straggler_rule": {"share": 0.25, "floor_s": 0.1}, "communication_share": 0.1,
        "wait_share": sum(rank["wait_share"] for rank in per_rank) / len(per_rank),
    }  # fmt: skip
    return bundle | {"schema_version": "1.1", "ranks": ranks}


class TestRankTimeTable:
    def test_summary_says_where_each_rank_s_time_went(self, tmp_path):
        """Two-rank runs with a ranks section get a row per cell: figures are the mean over ranks, then the median
        over runs; the straggler is the one most runs named, with how many named it."""
        bundles = [
            with_ranks(make_bundle(1000.0, 1), (0.9,), None),
            with_ranks(make_bundle(1600.0, 2), (0.5, 0.9), 1),
            with_ranks(make_bundle(1500.0, 2, seed=2), (0.5, 0.7), 1),
            with_ranks(make_bundle(1550.0, 2, seed=3), (0.5, 0.55), None),
        ]
        assert all(validation_errors(bundle) == [] for bundle in bundles)
        out = write_outputs(tmp_path, bundles, [], [])
        text = out["summary.md"].read_text()
        section = text[text.index("## Where each rank's time went") :].split("\n## ")[0]
        assert "![rank_time](r.png)" in section and out["r.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        rows = [line for line in section.splitlines() if line.startswith("| Isaac-Cartpole-Direct")]
        # compute means over ranks: 0.7, 0.6, 0.525 -> median 0.6; waits 0.2, 0.1, 0.025 -> median 0.1
        assert rows == [
            "| Isaac-Cartpole-Direct | rsl_rl | 64 | 2 | 3 | 1 | 0.6 | 0.4 | 0.1 | 0.1 | 1 (3/3) | 0.2 | 1 (2/3) |"
        ]

    def test_no_section_without_ranks(self, tmp_path):
        """Bundles of schema 1.0 have no ranks section: the summary leaves the part out rather than show blanks."""
        text = write_outputs(tmp_path, [make_bundle(1000.0, 1), make_bundle(1600.0, 2)], [], [])["summary.md"]
        assert "Where each rank's time went" not in text.read_text()


def sweep(world_size: int, latency_s: float, bandwidth: float) -> ProbeSweep:
    """A probe sweep whose all-reduce times lie exactly on ``latency_s + size / bandwidth``."""
    sizes = [4096, 1 << 20]
    seconds = [latency_s + size / bandwidth for size in sizes]
    return ProbeSweep("gloo", "cpu", world_size, 5, sizes, seconds, [[time] * world_size for time in seconds])


class TestPredictionTable:
    """One 1-rank bundle of 1 s iterations (1024 env steps) and a 2-rank one at 1600 env steps/s (efficiency
    0.78125) whose ranks called 8 all-reduces of 4096 bytes in all per iteration."""

    BUNDLES = (with_ranks(make_bundle(1024.0, 1), (1.0,), None), with_ranks(make_bundle(1600.0, 2), (0.5, 0.9), 1))

    def test_predicted_by_hand(self):
        """A 2-rank sweep of 1 ms + size / 1 GB/s is 0.5 ms per ring step and 1 GB/s on the link: the iteration gains
        4096 B / 1 GB/s + 8 calls × 2 steps × 0.5 ms = 8.004096 ms."""
        bundles = list(self.BUNDLES)
        table = prediction_table(bundles, scaling_table(frame_of(bundles)), {2: sweep(2, 1e-3, 1e9)})
        (row,) = table.to_dict("records")
        predicted = 1 / 1.008004096
        assert (row["library"], row["num_envs_per_rank"], row["world_size"]) == ("rsl_rl", 64, 2)
        assert row["measured_efficiency"] == pytest.approx(0.78125)
        assert row["predicted_efficiency"] == pytest.approx(predicted)
        assert row["error"] == pytest.approx((predicted - 0.78125) / 0.78125)
        assert row["predicted_communication_share"] == pytest.approx(0.008004096 / 1.008004096)
        assert row["link"] == "probe sweep: 500 µs per step, 1 GB/s"

    def test_without_a_sweep_communication_is_free_and_said_so(self, tmp_path):
        text = write_outputs(tmp_path, list(self.BUNDLES), [], [])["summary.md"].read_text()
        section = text[text.index("## Predicted against measured efficiency") :]
        rows = [line for line in section.splitlines() if line.startswith("| Isaac-Cartpole-Direct")]
        free = "none: no probe sweep, communication free"
        assert rows == [f"| Isaac-Cartpole-Direct | rsl_rl | 64 | 2 | 0.781 | 1 | 0.28 | 0 | {free} |"]

    def test_the_summary_prices_with_the_study_s_sweep(self, tmp_path):
        text = write_outputs(tmp_path, list(self.BUNDLES), [], [], sweeps=(sweep(2, 1e-3, 1e9),))["summary.md"]
        assert "| 0.781 | 0.992 | 0.27 | 0.00794 | probe sweep: 500 µs per step, 1 GB/s |" in text.read_text()

    def test_no_section_without_ranks(self, tmp_path):
        bundles = [make_bundle(1024.0, 1), make_bundle(1600.0, 2)]
        assert "Predicted against measured" not in write_outputs(tmp_path, bundles, [], [])["summary.md"].read_text()
