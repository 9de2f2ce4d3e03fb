"""Figures of a study (matplotlib, Agg): throughput and efficiency against GPU count, the train runs' learning curves,
and the parity runs' target metric against global env steps and wall time.

The ``*_figure(s)`` functions build the figures (tests read what they draw); the ``plot_*`` functions write them.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # Jobs run headless; select the backend before pyplot is imported.
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from rlscale.study.aggregate import library_label  # noqa: E402
from rlscale.study.parity_table import NOT_REACHED  # noqa: E402

PANEL_SIZE = (4.5, 3.4)
"""Width and height of one subplot, in inches."""
TITLE_CHARACTERS_PER_INCH = 10
"""About how many characters of a figure's title (12 pt) fit in an inch: a longer title wraps instead of being cut."""


def _panels(keys: list[tuple], title: str, height: float = PANEL_SIZE[1]):
    """Return a figure with one subplot per key (at most three per row), each ``height`` inches high, and the axes,
    keyed."""
    columns = min(3, max(1, len(keys)))
    rows = max(1, math.ceil(len(keys) / columns))
    width = PANEL_SIZE[0] * columns
    figure, axes = plt.subplots(rows, columns, figsize=(width, height * rows), squeeze=False, constrained_layout=True)
    flat = list(axes.flat)
    for axis in flat[len(keys) :]:
        axis.set_visible(False)
    figure.suptitle(textwrap.fill(title, int(width * TITLE_CHARACTERS_PER_INCH)))
    return figure, dict(zip(keys, flat, strict=False))


def _gpu_axis(axis, world_sizes: list[int], device_label: str) -> None:
    """Log-2 x axis labelled with the world sizes that ran."""
    axis.set_xscale("log", base=2)
    axis.set_xticks(world_sizes, [str(size) for size in world_sizes])
    axis.set_xlabel(f"world size ({device_label})")
    axis.grid(True, alpha=0.3)


def scaling_figures(table: pd.DataFrame, device_label: str = "GPUs") -> dict[str, Figure]:
    """Global throughput (median, IQR bars) and weak-scaling efficiency (median, order-statistic interval bars) against
    world size, keyed ``throughput`` and ``efficiency``.

    One panel per task and per-rank env count, one line per library.
    """
    keys = sorted(table.groupby(["task", "num_envs_per_rank"]).groups)
    world_sizes = sorted(int(size) for size in table["world_size"].unique())
    figures = {}
    for name, column, ylabel in (
        ("throughput", "global_fps_median", "global env steps / s (training)"),
        ("efficiency", "efficiency", "efficiency vs N × single rank"),
    ):
        title = "Training throughput" if name == "throughput" else "Weak-scaling efficiency"
        figure, axes = _panels(keys, title)
        for (task, num_envs), axis in axes.items():
            panel = table[(table["task"] == task) & (table["num_envs_per_rank"] == num_envs)]
            for (library, framework), line in panel.groupby(["rl_library", "ml_framework"]):
                line = line.sort_values("world_size")
                label = library_label(library, framework)
                if name == "throughput":
                    axis.errorbar(
                        line["world_size"], line[column], yerr=line["global_fps_iqr"] / 2, marker="o", capsize=3,
                        label=label,
                    )  # fmt: skip
                else:  # Bars: the interval (aggregate.py) (NaN where the interval is unknown draws none).
                    below = line[column] - line["efficiency_low"]
                    above = line["efficiency_high"] - line[column]
                    axis.errorbar(
                        line["world_size"], line[column], yerr=[below, above], marker="o", capsize=3, label=label
                    )
            if name == "efficiency":
                axis.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="ideal")
            axis.set_ylim(bottom=0)  # A truncated axis would exaggerate small differences.
            _gpu_axis(axis, world_sizes, device_label)
            axis.set_ylabel(ylabel)
            axis.set_title(f"{task}, {num_envs} envs/rank", fontsize=10)
            axis.legend(fontsize=8)
        figures[name] = figure
    return figures


def count_label(value: float) -> str:
    """A count (env steps) to 3 significant digits with a k/M/G suffix: short enough for ticks and legends."""
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def _steps_axis(axis) -> None:
    """An x axis of global env steps: few ticks, each a short count (1.5M), not a shared offset."""
    axis.xaxis.set_major_locator(MaxNLocator(nbins=5))
    axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: count_label(value)))
    axis.set_xlabel("global env steps")


def learning_curves_figure(curves: pd.DataFrame) -> Figure:
    """The ``train`` runs' mean return against global env steps (:func:`rlscale.study.train_runs.train_curves`), one
    panel per task and library, one line per world size; the legend says where a run resumed from a checkpoint."""
    keys = sorted(curves.groupby(["task", "rl_library", "ml_framework"]).groups) if len(curves) else []
    figure, axes = _panels(keys or [("no train runs",)], "Learning curves of the train runs")
    for (task, library, framework), axis in axes.items() if keys else ():
        panel = curves[
            (curves["task"] == task) & (curves["rl_library"] == library) & (curves["ml_framework"] == framework)
        ]
        for world_size, line in panel.groupby("world_size"):
            start = int(line["start_iteration"].iloc[0])
            resumed = f", resumed at iteration {start}" if start else ""
            axis.plot(line["env_steps"], line["mean_return"], label=f"world size {world_size}{resumed}")
        _steps_axis(axis)
        axis.set_ylabel("mean episode return")
        envs = ", ".join(str(count) for count in sorted(panel["num_envs_per_rank"].unique()))
        axis.set_title(f"{task}\n{library_label(library, framework)}, {envs} envs/rank", fontsize=10)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    return figure


PARITY_AXES = {"env_steps": ("env_steps", "global env steps"), "wall_time": ("elapsed_s", "wall time since start (s)")}
"""Parity figures: their curve column on the x axis, and its label."""
PARITY_PANEL_HEIGHT = 4.4
"""Height of a parity subplot, in inches: its legend (a line per world size, the target and the budget) sits below
it, off the curves."""
REACH_COLUMNS = {"env_steps": "env_steps_to_target_median", "wall_time": "wall_time_to_target_median_s"}
"""Per parity figure, the ``parity.csv`` column whose value marks where a world size reached the target."""


def metric_label(metric: str) -> str:
    """A target's metric as an axis names it: a record field in words, a task's ``Metrics/<name>`` as it is."""
    return metric if "/" in metric else metric.replace("_", " ")


def seed_band(runs: pd.DataFrame, x: str, points: int = 100) -> tuple[np.ndarray, ...]:
    """Median, min and max over seeds of the target's metric (``value``), each seed's curve interpolated on a common
    grid of ``x`` (where every seed has values: from the latest first point to the earliest last one)."""
    curves = [seed.dropna(subset=["value"]).sort_values(x) for _, seed in runs.groupby("seed")]
    curves = [curve for curve in curves if len(curve)]
    if not curves:
        return (np.array([]),) * 4
    grid = np.linspace(max(c[x].iloc[0] for c in curves), min(c[x].iloc[-1] for c in curves), points)
    values = np.array([np.interp(grid, c[x], c["value"]) for c in curves])
    return grid, np.median(values, axis=0), values.min(axis=0), values.max(axis=0)


def _reach_label(row: pd.Series, name: str) -> str:
    """Where a world size reached the target in a parity figure's legend, or how far it got if it did not."""
    if row["outcome"] == NOT_REACHED:
        return f"not reached, best {row['best_value']:.3g} in {count_label(row['env_steps_run'])} steps"
    reach = row[REACH_COLUMNS[name]]
    return f"reached at {count_label(reach)} steps" if name == "env_steps" else f"reached at {reach:.3g} s"


def parity_figures(curves: pd.DataFrame, table: pd.DataFrame) -> dict[str, Figure]:
    """The parity runs' value of their target's metric against global env steps and against wall time, keyed as
    :data:`PARITY_AXES`.

    Args:
        curves: Every run's iterations (:func:`rlscale.study.parity_table.curve_frame`).
        table: ``parity.csv`` of those runs (:func:`rlscale.study.parity_table.parity_table`).

    One panel per task, library and variant above one rank, one line per world size (the median over seeds) in a
    band from the seeds' min to max; one rank's runs (one variant) are drawn in each panel of their task and library.
    The target is a dashed line; a marker on it is where each world size reached it (its median over seeds, as in
    ``parity.csv``), and the legend says where, or that it was not reached and how far it got. The env-steps figure
    marks the budget with a dotted line.
    """
    above = curves[curves["world_size"] > 1] if len(curves) else curves
    keys = sorted(set(zip(above["task"], above["rl_library"], above["variant"], strict=True))) if len(above) else []
    if not keys and len(curves):  # one rank only: a panel per task and library
        keys = sorted(set(zip(curves["task"], curves["rl_library"], curves["variant"], strict=True)))
    rows = table.set_index(["task", "rl_library", "variant", "world_size"]).sort_index() if len(table) else table
    figures = {}
    for name, (x, xlabel) in PARITY_AXES.items():
        title = f"Parity: each task's target metric against {xlabel}"
        figure, axes = _panels(keys or [("no parity runs",)], title, PARITY_PANEL_HEIGHT)
        for (task, library, variant), axis in axes.items() if keys else ():
            mine = (curves["task"] == task) & (curves["rl_library"] == library)
            panel = curves[mine & ((curves["variant"] == variant) | (curves["world_size"] == 1))]
            target = rows.loc[(task, library, variant)].iloc[0]
            for world_size, runs in panel.groupby("world_size"):
                row = rows.loc[(task, library, runs["variant"].iloc[0], world_size)]
                grid, median, low, high = seed_band(runs, x)
                label = f"world size {world_size} ({runs['seed'].nunique()} seeds): {_reach_label(row, name)}"
                (line,) = axis.plot(grid, median, label=label)
                axis.fill_between(grid, low, high, color=line.get_color(), alpha=0.2)
                if row["outcome"] != NOT_REACHED:
                    reach = ([row[REACH_COLUMNS[name]]], [row["target"]])
                    axis.plot(*reach, marker="o", linestyle="none", color=line.get_color(), markeredgecolor="black")
            reached = "≤" if target["direction"] == "at_most" else "≥"
            goal = f"target {reached} {target['target']:g}"
            axis.axhline(target["target"], color="grey", linestyle="--", linewidth=1, label=goal)
            if name == "env_steps":
                budget = f"budget {count_label(target['max_env_steps'])} steps"
                axis.axvline(target["max_env_steps"], color="grey", linestyle=":", linewidth=1, label=budget)
                _steps_axis(axis)
            else:
                axis.xaxis.set_major_locator(MaxNLocator(nbins=5))
                axis.set_xlabel(xlabel)
            axis.set_ylabel(metric_label(target["metric"]))
            axis.set_title(f"{task}, {library}\n{variant}", fontsize=10)
            axis.grid(True, alpha=0.3)
            axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
        figures[name] = figure
    return figures


def plot_parity(curves: pd.DataFrame, table: pd.DataFrame, paths: dict[str, Path]) -> None:
    """Write :func:`parity_figures` to PNG files, keyed as :data:`PARITY_AXES`."""
    for name, figure in parity_figures(curves, table).items():
        _save(figure, paths[name])


def plot_scaling(table: pd.DataFrame, throughput_path: Path, efficiency_path: Path, device_label: str = "GPUs") -> None:
    """Write :func:`scaling_figures` to the two PNG files."""
    figures = scaling_figures(table, device_label)
    _save(figures["throughput"], throughput_path)
    _save(figures["efficiency"], efficiency_path)


RANK_TIME_PARTS = (
    ("compute", "compute (collection and update)", "tab:blue"),
    ("communication_share", "communication (the transfer)", "tab:orange"),
    ("wait_share", "waiting for the slowest rank", "tab:red"),
)
"""The stacked bar's parts of an iteration: the column of :func:`rlscale.study.rank_table.rank_time_table` (compute is
what the other two leave), its label and its colour."""


def rank_time_figure(table: pd.DataFrame) -> Figure:
    """One panel per task: for each library and world size of two ranks or more, a bar of an iteration's time split
    into compute, communication and waiting (shares, the means over ranks, medians over runs)."""
    if not len(table):
        figure, axis = plt.subplots(figsize=PANEL_SIZE, constrained_layout=True)
        axis.axis("off")
        axis.text(0.5, 0.5, "No cell ran on two ranks or more:\nno collectives to break down", ha="center", va="center")
        return figure
    tasks = sorted(set(table["task"]))
    figure, axes = _panels([(task,) for task in tasks], "Where an iteration's time went, per library and world size")
    for (task,), axis in axes.items():
        rows = table[table["task"] == task].sort_values(["library", "world_size"])
        labels = [f"{row.library}\n{row.world_size} ranks" for row in rows.itertuples()]
        shares = {"communication_share": rows["communication_share"], "wait_share": rows["wait_share"]}
        shares["compute"] = 1.0 - shares["communication_share"] - shares["wait_share"]
        bottom = np.zeros(len(rows))
        for column, label, colour in RANK_TIME_PARTS:
            axis.bar(labels, shares[column], bottom=bottom, label=label, color=colour)
            bottom += shares[column].to_numpy()
        axis.set_ylim(0, 1)
        axis.set_ylabel("share of an iteration")
        axis.set_title(task)
    next(iter(axes.values())).legend(loc="lower left", fontsize="small")
    return figure


def plot_rank_time(table: pd.DataFrame, path: Path) -> None:
    """Write :func:`rank_time_figure` to a PNG file."""
    _save(rank_time_figure(table), path)


def plot_learning_curves(curves: pd.DataFrame, path: Path) -> None:
    """Write :func:`learning_curves_figure` to a PNG file."""
    _save(learning_curves_figure(curves), path)


def _save(figure: Figure, path: Path) -> None:
    figure.savefig(path, dpi=110)
    plt.close(figure)  # pyplot keeps every open figure alive otherwise
