"""Everything the ``aggregate`` rule writes (``scaling.csv``, the plots and ``summary.md``) and the
``parity_aggregate`` rule writes (``parity.csv``, ``parity_runs.csv`` and the parity plots)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from rlscale.benchmark.workflow import PHASES as STARTUP_PHASES
from rlscale.launch.probe_sweep import read_probe_sweep
from rlscale.manifest import read_manifest
from rlscale.study.aggregate import bundle_record, library_label, load_bundles, read_bundle, scaling_table
from rlscale.study.evaluation_table import RunEvaluation, evaluation_table, read_evaluation
from rlscale.study.job_times import read_job_times, timing_markdown
from rlscale.study.markdown import cell_text, markdown_table, with_interval
from rlscale.study.parity_table import NOT_REACHED, curve_frame, parity_table, run_table
from rlscale.study.plots import plot_learning_curves, plot_parity, plot_rank_time, plot_scaling
from rlscale.study.prediction_table import prediction_markdown, prediction_table
from rlscale.study.rank_table import rank_time_markdown, rank_time_table
from rlscale.study.train_runs import train_curves, train_table


def evidence_level(n_runs: int) -> str:
    """Isaac Lab's evidence levels: 1 run explores, 3 or more independent runs screen for regressions."""
    return "exploration" if n_runs < 3 else "regression screening"


ENV_ONLY_LABEL = "none (env only)"
"""The library column of a runtime bundle: the runtime benchmark steps the task without an RL library."""


def other_bundles_table(bundles: Sequence[Mapping]) -> pd.DataFrame:
    """Startup and runtime bundles, one row each with its library: rank 0's own values (``workload_scope: rank0``),
    never global rates."""
    rows = []
    for bundle in bundles:
        record = bundle_record(bundle)
        runtime = bundle.get("runtime") or {}
        startup = runtime.get("startup_time_s") or {}
        step = (runtime.get("environment_step_timing") or {}).get("environment_step_fps") or {}
        library = record["rl_library"]
        rows.append(
            {
                "workflow": record["workflow"],
                "task": record["task"],
                "library": library_label(library, record["ml_framework"]) if library else ENV_ONLY_LABEL,
                "world_size": record["world_size"],
                "num_envs_per_rank": record["num_envs_per_rank"],
                "scope": record["workload_scope"],
                **{f"{phase}_s": startup.get(phase) for phase in STARTUP_PHASES},
                "env_step_fps_rank0": step.get("mean"),
            }
        )
    return pd.DataFrame.from_records(rows)


PARITY_SHOWN = {
    "rl_library": "library",
    "variant": "variant",
    "world_size": "world size",
    "n_reached": "seeds reached",
    "env_steps_to_target_median": "env steps to target (median)",
    "env_steps_to_target_min": "steps min",
    "env_steps_to_target_max": "steps max",
    "wall_time_to_target_median_s": "wall time to target, s (median)",
    "wall_time_to_target_min_s": "time min",
    "wall_time_to_target_max_s": "time max",
    "env_steps_ratio": "env steps vs 1 rank",
    "learns_as_well": "learns as well",
    "wall_time_speedup": "wall-time speedup",
    "solves_sooner": "solves sooner",
}
"""Columns of ``parity.csv`` that ``summary.md`` shows, with their headings."""
TO_TARGET = [
    *("env_steps_to_target_median", "env_steps_to_target_min", "env_steps_to_target_max"),
    *("wall_time_to_target_median_s", "wall_time_to_target_min_s", "wall_time_to_target_max_s", "env_steps_ratio"),
]
"""Shown columns that are ``inf`` where runs did not reach the target."""


def _is_inf(value: object) -> bool:
    """Whether a cell of ``parity.csv`` is an infinite number (cells may be words, booleans or None)."""
    return isinstance(value, float) and math.isinf(value)


def parity_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """A task's rows of ``parity.csv`` as ``summary.md`` shows them: :data:`PARITY_SHOWN`, with words where a number
    would mislead: "not reached" for an infinite step count or time to the target (and its ratio), and for the speedup
    of a world size that did not reach it; "1 rank not reached" for a speedup over one rank that did not."""
    shown = rows[list(PARITY_SHOWN)].astype(object)
    for column in TO_TARGET:
        shown[column] = [NOT_REACHED if _is_inf(value) else value for value in shown[column]]
    shown["wall_time_speedup"] = [
        NOT_REACHED if outcome == NOT_REACHED else "1 rank not reached" if _is_inf(speedup) else speedup
        for outcome, speedup in zip(rows["outcome"], rows["wall_time_speedup"], strict=True)
    ]
    return shown.rename(columns=PARITY_SHOWN)


def not_reached_lines(task: str, rows: pd.DataFrame) -> list[str]:
    """Per world size of a task that did not reach the target: the budget it had and how far it got; then which
    budget to raise. No lines when every world size reached it."""
    missed = rows[rows["outcome"] == NOT_REACHED]
    if missed.empty:
        return []
    lines = ["Not reached within the budget:", ""]
    for row in missed.itertuples(index=False):
        best = "highest" if row.direction == "at_least" else "lowest"
        lines.append(
            f"- {row.rl_library}, {row.variant}, world size {row.world_size}: {row.n_reached} of {row.n_runs} seeds "
            f"reached it; the runs ran {row.env_steps_run:,.0f} env steps (budget {row.max_env_steps:,.0f}), best "
            f"{row.metric} {cell_text(row.best_value)} (each run's {best} value, median over seeds)."
        )
    budget = rows["max_env_steps"].iloc[0]
    return [
        *lines,
        "",
        f"To let them reach it, raise `parity.max_env_steps.{task}` above {budget:,.0f} (or relax "
        f"`parity.target.{task}`).",
        "",
    ]


def parity_markdown(parity: pd.DataFrame, figures: Sequence[str]) -> list[str]:
    """The parity section of ``summary.md``: one table per task, its target and budget, the world sizes that did not
    reach the target (:func:`not_reached_lines`), and the two figures."""
    lines = [
        "## Parity: do more ranks reach the target sooner, and learn as well?",
        "",
        "Each run trains for the same budget of global env steps at every world size, never resumed; the first",
        "iteration whose metric reaches the target gives its env steps and wall time (since training started) to the",
        "target, *not reached* when no iteration did. Medians, min and max are over seeds. *Learns as well*: the",
        "median env steps are at most (1 + tolerance) × one rank's. *Solves sooner*: one rank's median wall time over",
        "N ranks' (the speedup) is above 1. parity.csv holds the speedup's range and parity_runs.csv every run.",
        "",
    ]
    if parity.empty:
        return [*lines, "No parity runs (no task has a `parity.target`).", ""]
    for task, rows in parity.groupby("task", sort=False):
        first = rows.iloc[0]
        reached = "≤" if first["direction"] == "at_most" else "≥"
        lines += [
            f"### {task}: {first['metric']} {reached} {first['target']:g} within {first['max_env_steps']:,.0f} env "
            f"steps, {first['num_envs_per_rank']} envs per rank",
            "",
            markdown_table(parity_cells(rows)),
            "",
            *not_reached_lines(task, rows),
        ]
    return [*lines, *[f"![{Path(figure).stem}]({Path(figure).name})" for figure in figures], ""]


def evaluation_markdown(runs: Sequence[RunEvaluation], num_envs: int) -> list[str]:
    """The evaluation section of ``summary.md``: how the runs were measured, then one table per task of
    :func:`~rlscale.study.evaluation_table.evaluation_table` (no lines when the study evaluated no run)."""
    if not runs:
        return []
    lines = [
        "## Evaluation: tracking error and falls per world size",
        "",
        f"`rlscale evaluate` on fixed velocity commands, deterministically: {num_envs} envs per checkpoint, split",
        "among the task's evaluation commands, one episode each, without observation noise or pushes. Tracking error",
        "is the episode's mean |commanded − actual| linear velocity (x and y, base frame), the fall rate the share of",
        "episodes that ended in a fall. Train runs: the final checkpoint. Parity runs: each seed's final checkpoint,",
        "median over the seeds (runs); every checkpoint's result is in `evaluate/`.",
        "",
    ]
    for task, rows in evaluation_table(runs).groupby("task", sort=False):
        lines += [f"### {task}", "", markdown_table(rows.drop(columns=["task"])), ""]
    return lines


def summary_markdown(
    study: str,
    device: str,
    device_reason: str,
    table: pd.DataFrame,
    trains: pd.DataFrame,
    others: pd.DataFrame,
    figures: Sequence[str],
    parity: Sequence[str] = (),
    plan: Sequence[str] = (),
    evaluation: Sequence[str] = (),
    ranks: Sequence[str] = (),
    predictions: Sequence[str] = (),
) -> str:
    """Return ``summary.md``: the device and why, the plan as parsed (``plan``: its lines, each value with its source),
    the scaling table, how to read it, where each rank's time went (``ranks``), the predicted against the measured
    efficiency (``predictions``), the train runs, the parity
    section's lines (:func:`parity_markdown`), the evaluation section's (:func:`evaluation_markdown`) and the
    startup/runtime bundles."""
    shown = table.copy()
    labels = [library_label(*pair) for pair in zip(shown["rl_library"], shown["ml_framework"], strict=True)]
    shown.insert(1, "library", labels)
    shown = shown.drop(columns=["rl_library", "ml_framework"])
    for column, interval in (("speedup", "speedup"), ("efficiency", "efficiency"), ("peer_ratio_median", "peer_ratio")):
        coverage = "speedup_coverage" if interval == "efficiency" else f"{interval}_coverage"
        bounds = [f"{interval}_low", f"{interval}_high", coverage]
        shown[column] = [with_interval(*values) for values in shown[[column, *bounds]].itertuples(index=False)]
    shown = shown.drop(columns=[column for column in shown if column.endswith(("_low", "_high", "_coverage"))])
    levels = sorted({evidence_level(int(n)) for n in table["n_runs"]}) if len(table) else []
    lines = [
        f"# Scaling study `{study}`",
        "",
        f"Device: **{device}** ({'CPU ranks, gloo' if device == 'cpu' else 'one GPU per rank, NCCL'}).",
        f"Why: {device_reason}.",
        "",
        *(
            [
                "## Plan: what the config asked for, and where each value came from",
                "",
                *[f"- {line}" for line in plan],
                "",
            ]
            if plan
            else []
        ),
        "## Training throughput (weak scaling)",
        "",
        "Global FPS is `runtime.total_fps.mean` of each `training_multigpu` bundle (all ranks). Efficiency is the",
        "median global FPS over `world_size ×` the median global FPS of world size 1 at the **same per-rank env",
        "count**, task and library. IQR is the interquartile range over the runs (seeds) of a row. Speedup,",
        "efficiency and peer ratio read median [low–high]: a distribution-free interval of at least 95 % coverage",
        "(order statistics; for speedup and efficiency the ratio of the row's and the single rank's intervals,",
        "each at √0.95 ≈ 97.5 %, as they ran as separate jobs), or, with its coverage in brackets, the range of too",
        "few seeds.",
        "A peer ratio whose interval includes 1 does not tell rlscale and the peer apart.",
        "peer_ratio_median is the median over runs of rlscale ÷ the hand-written torchrun + library baseline,",
        "each measured side by side in the same run (`benchmark --peer`; – where the study ran no peer).",
        f"Evidence level: {', '.join(levels) or 'none'} (1 run explores; 3 or more independent runs screen).",
        "",
        markdown_table(shown),
        "",
        *[f"![{Path(figure).stem}]({Path(figure).name})" for figure in figures],
        "",
        *ranks,
        *predictions,
    ]
    if len(trains):
        lines += [
            "## Training runs (`train` rule)",
            "",
            "A run's segments are its first invocation and each `--resume auto` continuation (a rerun after a crash",
            "or a kill); iterations_trained and wall_time_s add up all of them (iterations redone after a crash",
            "included), wall_time_s is – when a segment ended without recording its own (killed outright).",
            "",
            markdown_table(trains),
            "",
        ]
    lines += [*parity, *evaluation]
    if len(others):
        lines += [
            "## Startup and runtime benchmarks (largest world size)",
            "",
            "Rank 0's own values while the other ranks share the host (`workload_scope: rank0`): not global rates.",
            "",
            markdown_table(others),
            "",
        ]
    return "\n".join(lines)


def write_study_outputs(
    *,
    study: str,
    device: str,
    device_reason: str,
    training_bundles: Sequence[str],
    training_cells: Sequence[Mapping],
    other_bundles: Sequence[str],
    train_manifests: Sequence[str],
    train_cells: Sequence[Mapping],
    scaling_csv: Path,
    throughput_plot: Path,
    efficiency_plot: Path,
    learning_plot: Path,
    rank_time_plot: Path,
    summary: Path,
    parity_csv: Path | None = None,
    plan: Sequence[str] = (),
    evaluations: Sequence[str] = (),
    evaluation_cells: Sequence[Mapping] = (),
    evaluation_envs: int = 0,
    job_times: Path | None = None,
    job_timing_csv: Path | None = None,
    probe_sweeps: Sequence[str] = (),
) -> pd.DataFrame:
    """Aggregate a study's bundles and write the CSV, the four plots and the summary.

    Args:
        study: Study name.
        device: ``cuda`` or ``cpu``.
        device_reason: Why the study runs there (``device_reason`` of the effective config).
        training_bundles: ``training_multigpu`` bundle files.
        training_cells: Per training bundle, the cell it was filed under (see :func:`load_bundles`).
        other_bundles: ``startup_multigpu``/``runtime_multigpu`` bundle files.
        train_manifests: Manifests of the ``train`` rule's runs.
        train_cells: Per manifest, its task, library and world size.
        scaling_csv: Output scaling table.
        throughput_plot: Output throughput figure.
        efficiency_plot: Output efficiency figure.
        learning_plot: Output figure of the train runs' learning curves.
        rank_time_plot: Output figure of where each multi-rank cell's iterations went.
        summary: Output Markdown summary.
        plan: The plan's lines as the workflow printed them when parsed (:func:`rlscale.study.plan_summary.plan_lines`).
        parity_csv: The parity stage's table (:func:`write_parity_outputs`), its plots beside it; None leaves the
            parity section out.
        evaluations: The evaluation stage's files, one per evaluated run; none leaves its section out.
        evaluation_cells: Per evaluation file, the run it evaluated (:func:`rlscale.study.evaluation.evaluation_cells`).
        evaluation_envs: Envs of each evaluation (``evaluation.num_envs``).
        job_times: The jobs' time records (:mod:`rlscale.study.job_times`); None or a missing file leaves the
            timing section out.
        job_timing_csv: Output table of those records (written when given, empty without records).
        probe_sweeps: Where the probe's sweeps (``rlscale nccl_probe --sizes``) go, which price the collectives of
            the predicted against measured table; those missing are left out.

    Returns:
        The scaling table.
    """
    bundles = [read_bundle(path) for path in training_bundles]
    table = scaling_table(load_bundles(training_bundles, training_cells, bundles=bundles))
    Path(scaling_csv).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(scaling_csv, index=False)
    device_label = "CPU ranks" if device == "cpu" else "GPUs"
    plot_scaling(table, Path(throughput_plot), Path(efficiency_plot), device_label)
    manifests = [read_manifest(Path(path)) for path in train_manifests]
    plot_learning_curves(train_curves(manifests, train_cells), Path(learning_plot))
    others = other_bundles_table([read_bundle(path) for path in other_bundles])
    figures = [str(throughput_plot), str(efficiency_plot), str(learning_plot)]
    parity = []
    if parity_csv is not None:
        plots = [Path(parity_csv).with_name(f"parity_{name}.png") for name in ("env_steps", "wall_time")]
        parity = parity_markdown(pd.read_csv(parity_csv), [str(plot) for plot in plots])
    trains = train_table(manifests, train_cells)
    runs = [read_evaluation(path, cell) for path, cell in zip(evaluations, evaluation_cells, strict=True)]
    evaluation = evaluation_markdown(runs, evaluation_envs)
    timing = read_job_times(job_times)
    if job_timing_csv is not None:
        timing.to_csv(job_timing_csv, index=False)
    rank_times = rank_time_table(bundles)
    plot_rank_time(rank_times, Path(rank_time_plot))
    ranks = rank_time_markdown(rank_times, str(rank_time_plot))
    present = [path for path in probe_sweeps if Path(path).exists()]  # none from a study probed before sweeps
    sweeps = {sweep.world_size: sweep for sweep in map(read_probe_sweep, present)}
    predictions = prediction_markdown(prediction_table(bundles, table, sweeps))
    text = summary_markdown(
        study, device, device_reason, table, trains, others, figures, parity, plan, evaluation, ranks, predictions
    )
    Path(summary).write_text(text + "\n".join(timing_markdown(timing)))
    return table


def write_parity_outputs(
    *,
    records: Sequence[str],
    cells: Sequence[Mapping],
    tolerance: float,
    checkpoints: Sequence[float],
    parity_csv: Path,
    runs_csv: Path,
    plots: Mapping[str, Path],
) -> pd.DataFrame:
    """Read the parity runs' records and write ``parity.csv``, ``parity_runs.csv`` and the parity plots.

    Args:
        records: The runs' manifests, one per cell.
        cells: Per record, the run it was filed under (:func:`rlscale.study.parity.parity_cells`).
        tolerance: ``parity.tolerance`` of the "learns as well" verdict.
        checkpoints: ``parity.checkpoints``, fractions of the budget.
        parity_csv: Output table per world size.
        runs_csv: Output table per run.
        plots: Output figures, keyed as :data:`rlscale.study.plots.PARITY_AXES`.

    Returns:
        The table per world size.
    """
    manifests = [read_manifest(Path(path)) for path in records]
    cells = [{**cell, "path": str(path)} for cell, path in zip(cells, records, strict=True)]
    runs = run_table(manifests, cells, checkpoints)
    table = parity_table(runs, tolerance)
    Path(parity_csv).parent.mkdir(parents=True, exist_ok=True)
    runs.to_csv(runs_csv, index=False)
    table.to_csv(parity_csv, index=False)
    plot_parity(curve_frame(manifests, cells), table, {name: Path(path) for name, path in plots.items()})
    return table
