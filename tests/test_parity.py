"""The parity stage: its config and cells, the verdicts computed from runs' records, the learning-rate scaling of each
adapter, and the normalizer sync across two gloo ranks."""

from __future__ import annotations

import copy
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from run_manifests import recorded_iterations, run_manifest

from rlscale.rl import load_adapter
from rlscale.rl.agent_defaults import agent_cfg
from rlscale.rl.progress import TrackedTask
from rlscale.rl.rank_scaling import learning_rate_factor
from rlscale.study.config import effective_config, validate_schema
from rlscale.study.parity import (
    BASE_VARIANT,
    parity_cells,
    parity_iterations,
    rollout_length,
    variant_knobs,
    variant_name,
    variant_options,
    variants,
)
from rlscale.study.parity_table import (
    NOT_REACHED,
    REACHED,
    best_value,
    curve_frame,
    first_crossing,
    parity_table,
    return_at,
    run_record,
    run_table,
)
from rlscale.study.plots import parity_figures
from rlscale.study.summary import parity_markdown

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
LIBRARIES = ("rsl_rl", "rl_games", "skrl")
CARTPOLE, ANT, GO1 = "Isaac-Cartpole-Direct", "Rlscale-Ant", "Rlscale-Go1-Flat"
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}
TWO_GPUS = {"CUDA_VISIBLE_DEVICES": "0,1"}


FULL_MATRIX = yaml.safe_load((ROOT / "config" / "studies" / "full_matrix.yaml").read_text())
"""The full-matrix study's overlay: Cartpole, Ant and the Go1, each with a parity target."""


def study_config(*overlays: dict, environ=TWO_GPUS) -> dict:
    """The default config with overlays merged key by key (as Snakemake's --configfile does), validated and
    resolved."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for overlay in overlays:
        config = merged(config, overlay)
    validate_schema(config, SCHEMA)
    return effective_config(config, environ, nvml_count=lambda: 0, hardware_probe=lambda: None)


def merged(base: dict, overlay: dict) -> dict:
    result = copy.deepcopy(base)
    for key, value in overlay.items():
        result[key] = (
            merged(result[key], value) if isinstance(value, dict) and isinstance(result.get(key), dict) else value
        )
    return result


def record(env_steps: float, elapsed_s: float, episode_length: float, mean_return: float, **metrics) -> dict:
    return {
        "env_steps": env_steps,
        "elapsed_s": elapsed_s,
        "mean_episode_length": episode_length,
        "mean_return": mean_return,
        "metrics": metrics,
    }


def run(world_size: int, seed: int, crossing: int | None, seconds_per_iteration: float, iterations: int = 10):
    """A manifest and its cell: Cartpole, 100 global env steps per iteration at any world size, the episode length
    at the target (290) from iteration index ``crossing`` on (never when None)."""
    steps = 100
    records = [
        record(
            (i + 1) * steps,
            (i + 1) * seconds_per_iteration,
            300.0 if crossing is not None and i >= crossing else 100.0 + i,
            float(i),
        )
        for i in range(iterations)
    ]
    cell = {
        "task": CARTPOLE,
        "rl_library": "rsl_rl",
        "variant": BASE_VARIANT,
        "lr_scaling": "none",
        "normalizer_sync": False,
        "world_size": world_size,
        "seed": seed,
        "num_envs_per_rank": 4,
        "max_env_steps": steps * iterations,
        "metric": "mean_episode_length",
        "target": 290.0,
        "direction": "at_least",
    }
    manifest = {
        "status": "completed",
        "world_size": world_size,
        "num_envs": 4,
        "args": {"task": CARTPOLE, "rl_library": "rsl_rl", "seed": seed, "lr_scaling": "none"},
        "iterations": records,
    }
    return manifest, cell


class MetricTask:
    """Two envs; env 0 ends an episode on every odd step, and the step's ``Metrics/speed`` log value is the step's
    index (a reward term's value stays constant)."""

    cfg, num_envs, device, num_actions = None, 2, torch.device("cpu"), 1
    observation_dims, max_episode_length, step_dt, is_finite_horizon = {"policy": 1}, 10, 0.1, False

    def __init__(self) -> None:
        self.calls = 0

    def step(self, actions):
        ended = torch.tensor([self.calls % 2 == 1, False])
        log = {"Episode_Reward/alive": torch.tensor(5.0), "Metrics/speed": torch.tensor(float(self.calls))}
        extras = {"episode_return": torch.ones(2), "episode_length": torch.full((2,), 10.0), "log": log}
        self.calls += 1
        return {"policy": torch.zeros(2, 1)}, torch.zeros(2), ended, torch.zeros(2, dtype=torch.bool), extras


def test_records_carry_global_steps_wall_time_and_task_metrics():
    """Each iteration record holds the global env steps so far, the wall time since training started, and each
    Metrics/ value averaged over the rollout's finished episodes (steps where none ended do not count)."""
    tracked = TrackedTask(MetricTask(), 4, start_iteration=0, total_iterations=2, world_size=3, stream=None)
    for _ in range(8):
        tracked.step(torch.zeros(2, 1))
    tracked.finish()
    first, second = tracked.records
    assert (first.env_steps, second.env_steps) == (4 * 2 * 3, 2 * 4 * 2 * 3)
    assert first.metrics == {"Metrics/speed": (1 + 3) / 2} and second.metrics == {"Metrics/speed": (5 + 7) / 2}
    assert 0 < first.elapsed_s < second.elapsed_s


class TestCrossing:
    def test_first_iteration_at_the_target(self):
        iterations = [record(10, 1.0, math.nan, math.nan), record(20, 2.0, 289.9, 5), record(30, 3.5, 290, 6)]
        iterations.append(record(40, 4.0, 250, 3))
        assert first_crossing(recorded_iterations(iterations), "mean_episode_length", 290) == (30.0, 3.5)
        assert first_crossing(recorded_iterations(iterations), "mean_episode_length", 300) == (math.inf, math.inf)

    def test_task_metric(self):
        iterations = [record(10, 1.0, 50, 1, **{"Metrics/forward_speed": s}) for s in (0.05, 0.31, 0.2)]
        assert first_crossing(recorded_iterations(iterations), "Metrics/forward_speed", 0.3) == (10.0, 1.0)
        iterations[1]["env_steps"] = 20
        iterations[0]["metrics"] = {}  # before the first episode ended
        assert first_crossing(recorded_iterations(iterations), "Metrics/forward_speed", 0.3) == (20.0, 1.0)

    def test_an_error_reaches_its_target_from_above(self):
        errors = (math.nan, 0.6, 0.3, 0.25, 0.31)  # NaN: no episode had ended yet
        iterations = [
            record(10 * (i + 1), float(i + 1), 50, 1, **{"Metrics/base_velocity/error_vel_xy": e})
            for i, e in enumerate(errors)
        ]
        assert first_crossing(
            recorded_iterations(iterations), "Metrics/base_velocity/error_vel_xy", 0.25, "at_most"
        ) == (40.0, 4.0)
        assert first_crossing(
            recorded_iterations(iterations), "Metrics/base_velocity/error_vel_xy", 0.2, "at_most"
        ) == (math.inf, math.inf)

    def test_best_value_in_the_targets_direction(self):
        """How far a run got: the highest value of its metric, or the lowest for an error; NaN iterations (before an
        episode ended) count for neither."""
        errors = [record(10, 1.0, 50, 1, **{"Metrics/error": e}) for e in (math.nan, 0.6, 0.3, 0.4)]
        assert best_value(recorded_iterations(errors), "Metrics/error", "at_most") == 0.3
        assert best_value(recorded_iterations(errors), "Metrics/error", "at_least") == 0.6
        assert math.isnan(best_value(recorded_iterations(errors[:1]), "Metrics/error", "at_most"))

    def test_return_at_checkpoints(self):
        iterations = [record(100 * (i + 1), i, 10, float(i)) for i in range(4)]
        assert return_at(recorded_iterations(iterations), 250) == 1.0
        assert return_at(recorded_iterations(iterations), 400) == 3.0
        assert math.isnan(return_at(recorded_iterations(iterations), 50))


class TestVerdicts:
    def runs(self, crossings: dict[int, list[int | None]], seconds: dict[int, float]) -> pd.DataFrame:
        pairs = [
            run(ws, seed, crossing, seconds[ws])
            for ws, seeds in crossings.items()
            for seed, crossing in enumerate(seeds)
        ]
        return run_table([run_manifest(manifest) for manifest, _ in pairs], [cell for _, cell in pairs], [0.5, 1.0])

    def test_learns_as_well_within_the_tolerance(self):
        # One rank reaches the target after 3, 4, 5 iterations (median 400 steps), two ranks after 4, 5, 5 (500).
        runs = self.runs({1: [2, 3, 4], 2: [3, 4, 4]}, {1: 1.0, 2: 0.5})
        assert runs["env_steps_to_target"].tolist() == [300, 400, 500, 400, 500, 500]
        strict = parity_table(runs, tolerance=0.2).set_index("world_size")
        assert strict.loc[2, "env_steps_ratio"] == pytest.approx(1.25)
        assert strict.loc[2, "learns_as_well"] is False  # 500 > 1.2 x 400
        assert parity_table(runs, tolerance=0.3).set_index("world_size").loc[2, "learns_as_well"] is True
        # Wall time: one rank 4 s (median), two ranks 5 iterations x 0.5 s = 2.5 s.
        assert strict.loc[2, "wall_time_speedup"] == pytest.approx(4.0 / 2.5)
        assert strict.loc[2, "wall_time_speedup_low"] == pytest.approx(3.0 / 2.5)
        assert strict.loc[2, "wall_time_speedup_high"] == pytest.approx(5.0 / 2.0)
        assert strict.loc[2, "solves_sooner"] is True
        assert strict.loc[1, "learns_as_well"] is None and strict.loc[1, "wall_time_speedup"] == pytest.approx(1.0)

    def test_not_reached_has_no_speedup_and_says_how_far_it_got(self):
        """A world size whose median seed never reached the target is "not reached" (its steps and time inf): it has
        no wall-time speedup (NaN, never 0) and does not solve sooner; its best value (median over seeds of each
        run's highest episode length) and the env steps it ran say how far it got."""
        runs = self.runs({1: [2, 3, None], 2: [4, None, None]}, {1: 1.0, 2: 0.5})
        table = parity_table(runs, tolerance=0.2).set_index("world_size")
        assert table.loc[1, "n_reached"] == 2 and table.loc[2, "n_reached"] == 1
        assert table.loc[1, "env_steps_to_target_median"] == 400 and math.isinf(
            table.loc[2, "env_steps_to_target_median"]
        )
        assert table["outcome"].tolist() == [REACHED, NOT_REACHED]
        assert math.isnan(table.loc[2, "wall_time_speedup"]) and math.isnan(table.loc[2, "wall_time_speedup_low"])
        assert table.loc[2, "learns_as_well"] is False and table.loc[2, "solves_sooner"] is False
        # Seeds of two ranks: one reached 300, two peaked at 100 + 9 (the last of 10 iterations).
        assert table.loc[2, "best_value"] == 109.0 and table.loc[1, "best_value"] == 300.0
        assert table.loc[2, "env_steps_run"] == 1000 and table.loc[2, "max_env_steps"] == 1000

    def test_summary_says_not_reached_with_the_budget_to_raise(self):
        """summary.md shows "not reached" in words where a number would be inf or no speedup, then the budget and best
        value of each world size that did not reach the target, and which budget to raise."""
        table = parity_table(self.runs({1: [2, 3, None], 2: [4, None, None]}, {1: 1.0, 2: 0.5}), tolerance=0.2)
        text = "\n".join(parity_markdown(table, []))
        row = next(line for line in text.splitlines() if line.startswith("| rsl_rl | lr-none_norm-library | 2 |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[4] == NOT_REACHED and cells[7] == NOT_REACHED  # median env steps and wall time to the target
        assert cells[12] == NOT_REACHED and cells[13] == "False"  # the speedup, and solves sooner
        assert (
            "- rsl_rl, lr-none_norm-library, world size 2: 1 of 3 seeds reached it; the runs ran 1,000 env steps "
            "(budget 1,000), best mean_episode_length 109 (each run's highest value, median over seeds)." in text
        )
        assert f"raise `parity.max_env_steps.{CARTPOLE}` above 1,000" in text

    def test_no_verdict_when_one_rank_never_reaches(self):
        table = parity_table(self.runs({1: [None] * 3, 2: [1, 2, 3]}, {1: 1.0, 2: 1.0}), 0.2).set_index("world_size")
        assert table.loc[2, "learns_as_well"] is None and math.isnan(table.loc[2, "env_steps_ratio"])
        assert math.isinf(table.loc[2, "wall_time_speedup"]) and table.loc[2, "solves_sooner"] is True
        assert table.loc[1, "solves_sooner"] is None

    def test_records_must_match_their_cell(self):
        manifest, cell = run(2, 1, 3, 1.0)
        assert run_record(run_manifest(manifest), cell, [1.0])["return_at_1"] == 9.0
        with pytest.raises(ValueError, match="world_size=2 but is filed under world_size=1"):
            run_record(run_manifest(manifest), {**cell, "world_size": 1}, [1.0])
        with pytest.raises(ValueError, match="not completed"):
            run_record(run_manifest({**manifest, "status": "interrupted"}), cell, [1.0])


class TestParityFigures:
    def test_target_metric_target_line_and_reach_markers(self, figures):
        """Each world size's line is the median over seeds of the target's metric (episode length here, not the
        return); the target is a horizontal line; a marker on it sits where the world size reached it (parity.csv's
        median), none where it did not, whose legend says so with its best value."""
        crossings = {1: [2, 3], 2: [None, None]}
        pairs = [
            run(ws, seed, crossing, 1.0 / ws) for ws, seeds in crossings.items() for seed, crossing in enumerate(seeds)
        ]
        manifests, cells = [run_manifest(m) for m, _ in pairs], [c for _, c in pairs]
        table = parity_table(run_table(manifests, cells, [1.0]), tolerance=0.2)
        built = parity_figures(curve_frame(manifests, cells), table)
        figures.extend(built.values())
        axis = next(axis for axis in built["env_steps"].axes if axis.get_visible())
        assert axis.get_ylabel() == "mean episode length" and axis.get_title() == f"{CARTPOLE}, rsl_rl\n{BASE_VARIANT}"
        lines = {line.get_label(): line for line in axis.get_lines()}
        one = lines["world size 1 (2 seeds): reached at 350 steps"]  # median of 300 and 400
        two = lines["world size 2 (2 seeds): not reached, best 109 in 1k steps"]
        # One rank's seed 0 is at the target (300) from its 3rd iteration (env steps 300) on, seed 1 from its 4th, at
        # 102 before it: halfway to the 4th, 201. At env steps 100 both are at their first episode length, 100.
        grid, median = one.get_xdata(), one.get_ydata()
        assert (grid[0], median[0]) == (100.0, 100.0) and median[-1] == 300.0
        assert np.interp(350.0, grid, median) == pytest.approx((300.0 + 201.0) / 2)
        assert two.get_ydata().tolist() == pytest.approx(np.linspace(100.0, 109.0, 100).tolist())
        target = lines["target ≥ 290"]
        assert list(target.get_ydata()) == [290.0, 290.0]
        markers = [line for line in axis.get_lines() if line.get_marker() == "o"]
        assert [(list(m.get_xdata()), list(m.get_ydata())) for m in markers] == [([350.0], [290.0])]
        assert list(lines["budget 1k steps"].get_xdata()) == [1000.0, 1000.0]
        wall = next(axis for axis in built["wall_time"].axes if axis.get_visible())
        wall_markers = [line for line in wall.get_lines() if line.get_marker() == "o"]
        assert [list(m.get_xdata()) for m in wall_markers] == [[3.5]]  # one rank: 1 s per iteration, median 3.5

    @pytest.mark.parametrize("tasks", [1, 2, 4])
    def test_titles_and_ticks_fit(self, tasks, figures):
        """At one, two and four panels, with long names (rl_games, a variant above one rank) and env steps in the
        millions, every title lies inside the figure and no two x tick labels overlap."""
        manifests, cells = [], []
        for index, ws in itertools.product(range(tasks), (1, 2)):
            manifest, cell = run(ws, 1, 3, 1.0 / ws)
            knobs = {"lr_scaling": "linear" if ws > 1 else "none", "normalizer_sync": ws > 1}
            names = {"task": f"{CARTPOLE}-{index}", "rl_library": "rl_games"}
            manifest["args"] |= {**names, **knobs}
            cell |= {**names, **knobs, "variant": variant_name(*knobs.values()), "max_env_steps": 80e6}
            for iteration in manifest["iterations"]:
                iteration["env_steps"] *= 80_000
            manifests.append(run_manifest(manifest))
            cells.append(cell)
        table = parity_table(run_table(manifests, cells, [1.0]), tolerance=0.2)
        for figure in parity_figures(curve_frame(manifests, cells), table).values():
            figures.append(figure)
            figure.canvas.draw()
            shown = [axis for axis in figure.axes if axis.get_visible()]
            for title in [*figure.texts, *(axis.title for axis in shown)]:  # figure.texts: the suptitle
                box = title.get_window_extent()
                assert figure.bbox.x0 <= box.x0 and box.x1 <= figure.bbox.x1, title.get_text()
            for axis in shown:
                ticks = [label for label in axis.get_xticklabels() if label.get_text()]
                boxes = [label.get_window_extent() for label in ticks]
                assert all(a.x1 < b.x0 for a, b in itertools.pairwise(boxes)), [label.get_text() for label in ticks]


class TestConfig:
    def test_variants(self):
        assert variant_knobs(variant_name("sqrt", True)) == ("sqrt", True)
        assert variant_options(variant_name("linear", True)) == ["--lr_scaling", "linear", "--sync_normalizer"]
        parity = {"lr_scaling": ["none", "linear"], "normalizer_sync": [False, True]}
        assert variants(parity, 1) == [BASE_VARIANT]
        assert len(set(variants(parity, 2))) == 4
        with pytest.raises(ValueError, match="not a parity variant"):
            variant_knobs("lr-cubic_norm-library")

    def test_gpu_cells(self):
        """The full-matrix study on a GPU host: Cartpole with every library, Ant and Go1 with rsl_rl, 3 seeds, world
        sizes 1 and 2, each run as many iterations as its budget of global env steps takes; Go1's target is an error,
        reached from above."""
        study = study_config(FULL_MATRIX)
        cells = parity_cells(study, list(LIBRARIES))
        pairs = {(cell["task"], cell["rl_library"]) for cell in cells}
        assert pairs == {(CARTPOLE, library) for library in LIBRARIES} | {(ANT, "rsl_rl"), (GO1, "rsl_rl")}
        assert len(cells) == len(pairs) * 2 * 3
        assert {cell["direction"] for cell in cells if cell["task"] == GO1} == {"at_most"}
        assert {cell["direction"] for cell in cells if cell["task"] != GO1} == {"at_least"}
        for cell in cells:
            budget = study["parity"]["max_env_steps"][cell["task"]]
            envs = study["parity"]["num_envs_per_rank"][cell["task"]]
            per_iteration = rollout_length(agent_cfg(cell["task"], cell["rl_library"]), cell["rl_library"]) * envs
            assert (cell["iterations"] - 1) * per_iteration * cell["world_size"] < budget
            assert cell["iterations"] * per_iteration * cell["world_size"] >= budget

    def test_cpu_fallback_uses_its_own_tasks(self):
        """On CPU the per-task parity keys are the fallback's (the GPU budgets never reach CPU ranks); the rest is
        merged: an overlay's axes stay."""
        overlay = yaml.safe_load((ROOT / "config" / "parity.yaml").read_text())
        study = study_config(overlay, environ=NO_GPU)
        assert study["device"] == "cpu"
        assert set(study["parity"]["target"]) == {CARTPOLE}
        assert study["parity"]["lr_scaling"] == overlay["parity"]["lr_scaling"]
        cells = parity_cells(study, [entry["name"] for entry in study["libraries"]])
        assert {cell["rl_library"] for cell in cells} == {"rsl_rl"}
        assert {cell["num_envs_per_rank"] for cell in cells} == {64}

    @pytest.mark.parametrize(
        ("parity", "message"),
        [
            ({"target": {"Isaac-Cartpole-Direct-v0": {"metric": "mean_return", "at_least": 1}}}, "alias"),
            ({"max_env_steps": {"No-Such-Task": 10}}, "No-Such-Task"),
            ({"max_env_steps": {CARTPOLE: None}}, "not of type"),
            ({"target": {CARTPOLE: {"metric": "speed", "at_least": 1}}}, "Metrics/<name>"),
            ({"libraries": {CARTPOLE: ["sb3"]}}, "not among the study's libraries"),
        ],
    )
    def test_refusals(self, parity, message):
        from rlscale.study.checks import check_config
        from rlscale.study.config import StudyConfigError

        with pytest.raises((ValueError, StudyConfigError), match=message):
            check_config(study_config(FULL_MATRIX, {"parity": parity}))

    def test_world_size_one_is_needed(self):
        from rlscale.study.checks import check_config

        with pytest.raises(ValueError, match=r"world_sizes \(from config/config.yaml\): \[2\] has no 1"):
            check_config(study_config({"world_sizes": [2]}))

    @pytest.mark.parametrize("library", LIBRARIES)
    def test_rollout_keys_match_the_adapters(self, library):
        for task in (CARTPOLE, ANT):
            cfg = agent_cfg(task, library)
            assert rollout_length(cfg, library) == load_adapter(library).rollout_length(cfg)
        assert parity_iterations(1000, 16, 4, 2) == 8 and parity_iterations(1001, 16, 4, 2) == 8


class TestLearningRateScaling:
    @pytest.mark.parametrize(("lr_scaling", "factor"), [("none", 1.0), ("linear", 4.0), ("sqrt", 2.0)])
    def test_factor(self, lr_scaling, factor):
        assert learning_rate_factor(lr_scaling, 4) == factor
        with pytest.raises(ValueError, match="cubic"):
            learning_rate_factor("cubic", 4)

    @pytest.mark.parametrize(
        ("library", "section", "key"),
        [
            ("rsl_rl", lambda cfg: cfg["algorithm"], "learning_rate"),
            ("rl_games", lambda cfg: cfg["params"]["config"], "learning_rate"),
            ("skrl", lambda cfg: cfg["agent"], "learning_rate"),
        ],
    )
    def test_each_library_scales_its_own_key(self, library, section, key):
        adapter = load_adapter(library)
        cfg = agent_cfg(CARTPOLE, library)
        before = section(cfg)[key]
        target = cfg["params"]["config"] if library == "rl_games" else cfg
        adapter.scale_learning_rate(target, learning_rate_factor("sqrt", 2))
        assert section(cfg)[key] == pytest.approx(before * math.sqrt(2))
        others = {name: value for name, value in section(cfg).items() if name != key}
        assert others == {name: value for name, value in section(agent_cfg(CARTPOLE, library)).items() if name != key}

    def test_skrl_scales_a_policy_and_a_value_rate(self):
        cfg = {"agent": {"learning_rate": [1e-3, 5e-4]}}
        load_adapter("skrl").scale_learning_rate(cfg, 3.0)
        assert cfg["agent"]["learning_rate"] == pytest.approx([3e-3, 1.5e-3])


def _sync_worker(rank: int, init_file: str, out_dir: str) -> None:
    """One of two gloo ranks: two rounds of rank-local batches into each library's normalizer, each followed by the
    sync; saves what each normalizer held before the first sync and at the end, and the batches it was fed."""
    import torch.distributed as dist
    from rl_games.algos_torch.running_mean_std import RunningMeanStd
    from skrl.resources.preprocessors.torch import RunningStandardScaler

    from rlscale.rl.rank_scaling import moments_syncs

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    generator = torch.Generator().manual_seed(rank)
    rl_games, skrl = RunningMeanStd((3,)), RunningStandardScaler(3, device="cpu")
    syncs = moments_syncs([rl_games], RunningMeanStd, "running_mean", "running_var", "count")
    syncs += moments_syncs([skrl], RunningStandardScaler, "running_mean", "running_variance", "current_count")
    saved = {"batches": [], "before": None}
    rl_games.train()
    for round_ in range(2):
        batch = torch.randn(50 + 30 * rank, 3, generator=generator, dtype=torch.float64) * (1 + rank) + 3 * rank
        saved["batches"].append(batch)
        rl_games(batch)
        skrl(batch, train=True)
        if round_ == 0:
            saved["before"] = [rl_games.running_mean.clone(), skrl.running_mean.clone()]
        for sync in syncs:
            sync()
    saved["rl_games"] = [rl_games.running_mean, rl_games.running_var, rl_games.count]
    saved["skrl"] = [skrl.running_mean, skrl.running_variance, skrl.current_count]
    torch.save(saved, Path(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


def test_synced_normalizers_are_equal_across_ranks(tmp_path):
    """After the sync both gloo ranks hold the same statistics, those one normalizer fed both ranks' batches holds
    (they differed before: each rank saw its own data)."""
    from rl_games.algos_torch.running_mean_std import RunningMeanStd
    from skrl.resources.preprocessors.torch import RunningStandardScaler

    torch.multiprocessing.spawn(_sync_worker, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    ranks = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(2)]
    assert not torch.allclose(ranks[0]["before"][0], ranks[1]["before"][0])
    pooled_rl_games, pooled_skrl = RunningMeanStd((3,)), RunningStandardScaler(3, device="cpu")
    pooled_rl_games.train()
    for round_ in range(2):
        for rank in ranks:
            pooled_rl_games(rank["batches"][round_])
            pooled_skrl(rank["batches"][round_], train=True)
    expected = {
        "rl_games": [pooled_rl_games.running_mean, pooled_rl_games.running_var, pooled_rl_games.count],
        "skrl": [pooled_skrl.running_mean, pooled_skrl.running_variance, pooled_skrl.current_count],
    }
    for library, values in expected.items():
        for name, first, second, value in zip(
            ("mean", "var", "count"), *(r[library] for r in ranks), values, strict=True
        ):
            assert torch.equal(first, second), (library, name)
            assert torch.allclose(first, value, rtol=1e-9), (library, name)
