"""Figures of a study (matplotlib, Agg): throughput and efficiency against GPU count, learning curves, and the parity
runs' return against global env steps and wall time.

The ``*_figure(s)`` functions build the figures (tests read what they draw); the ``plot_*`` functions write them.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # Jobs run headless; select the backend before pyplot is imported.
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from rlscale.study.aggregate import library_label  # noqa: E402

PANEL_SIZE = (4.5, 3.4)
"""Width and height of one subplot, in inches."""


def _panels(keys: list[tuple], title: str):
    """Return a figure with one subplot per key (at most three per row) and the axes, keyed."""
    columns = min(3, max(1, len(keys)))
    rows = max(1, math.ceil(len(keys) / columns))
    figure, axes = plt.subplots(
        rows, columns, figsize=(PANEL_SIZE[0] * columns, PANEL_SIZE[1] * rows), squeeze=False, constrained_layout=True
    )
    flat = list(axes.flat)
    for axis in flat[len(keys) :]:
        axis.set_visible(False)
    figure.suptitle(title)
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


def learning_curves_figure(curves: pd.DataFrame) -> Figure:
    """The mean return against global env steps, one line per world size (median over seeds).

    One panel per task and library, each at the largest per-rank env count the study ran, so that the lines differ
    only in world size.
    """
    keys = sorted(curves.groupby(["task", "rl_library", "ml_framework"]).groups) if len(curves) else []
    figure, axes = _panels(keys or [("no learning curves",)], "Learning curves (median over seeds)")
    for (task, library, framework), axis in axes.items() if keys else ():
        panel = curves[
            (curves["task"] == task) & (curves["rl_library"] == library) & (curves["ml_framework"] == framework)
        ]
        panel = panel[panel["num_envs_per_rank"] == panel["num_envs_per_rank"].max()]
        for world_size, line in panel.groupby("world_size"):
            median = line.groupby("env_steps")["mean_return"].median()
            axis.plot(median.index, median.to_numpy(), label=f"world size {world_size}")
        axis.set_xlabel("global env steps")
        axis.set_ylabel("mean episode return")
        num_envs = panel["num_envs_per_rank"].max()
        axis.set_title(f"{task}, {library_label(library, framework)}, {num_envs} envs/rank", fontsize=10)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    return figure


PARITY_AXES = {"env_steps": ("env_steps", "global env steps"), "wall_time": ("elapsed_s", "wall time since start (s)")}
"""Parity figures: their curve column on the x axis, and its label."""


def seed_band(runs: pd.DataFrame, x: str, points: int = 100) -> tuple[np.ndarray, ...]:
    """Median, min and max over seeds of the mean return, each seed's curve interpolated on a common grid of ``x``
    (where every seed has values: from the latest first point to the earliest last one)."""
    curves = [seed.dropna(subset=["mean_return"]).sort_values(x) for _, seed in runs.groupby("seed")]
    curves = [curve for curve in curves if len(curve)]
    if not curves:
        return (np.array([]),) * 4
    grid = np.linspace(max(c[x].iloc[0] for c in curves), min(c[x].iloc[-1] for c in curves), points)
    values = np.array([np.interp(grid, c[x], c["mean_return"]) for c in curves])
    return grid, np.median(values, axis=0), values.min(axis=0), values.max(axis=0)


def parity_figures(curves: pd.DataFrame) -> dict[str, Figure]:
    """The parity runs' mean return against global env steps and against wall time, keyed as :data:`PARITY_AXES`.

    One panel per task, library and variant above one rank, one line per world size (the median over seeds) in a
    band from the seeds' min to max; one rank's runs (one variant) are drawn in each panel of their task and library.
    """
    above = curves[curves["world_size"] > 1] if len(curves) else curves
    keys = sorted(set(zip(above["task"], above["rl_library"], above["variant"], strict=True))) if len(above) else []
    if not keys and len(curves):  # one rank only: a panel per task and library
        keys = sorted(set(zip(curves["task"], curves["rl_library"], curves["variant"], strict=True)))
    figures = {}
    for name, (x, xlabel) in PARITY_AXES.items():
        figure, axes = _panels(keys or [("no parity runs",)], f"Parity: return against {xlabel.split(' (')[0]}")
        for (task, library, variant), axis in axes.items() if keys else ():
            mine = (curves["task"] == task) & (curves["rl_library"] == library)
            panel = curves[mine & ((curves["variant"] == variant) | (curves["world_size"] == 1))]
            for world_size, runs in panel.groupby("world_size"):
                grid, median, low, high = seed_band(runs, x)
                (line,) = axis.plot(grid, median, label=f"world size {world_size} ({runs['seed'].nunique()} seeds)")
                axis.fill_between(grid, low, high, color=line.get_color(), alpha=0.2)
            axis.set_xlabel(xlabel)
            axis.set_ylabel("mean episode return")
            axis.set_title(f"{task}, {library}, {variant}", fontsize=10)
            axis.grid(True, alpha=0.3)
            axis.legend(fontsize=8)
        figures[name] = figure
    return figures


def plot_parity(curves: pd.DataFrame, paths: dict[str, Path]) -> None:
    """Write :func:`parity_figures` to PNG files, keyed as :data:`PARITY_AXES`."""
    for name, figure in parity_figures(curves).items():
        _save(figure, paths[name])


def plot_scaling(table: pd.DataFrame, throughput_path: Path, efficiency_path: Path, device_label: str = "GPUs") -> None:
    """Write :func:`scaling_figures` to the two PNG files."""
    figures = scaling_figures(table, device_label)
    _save(figures["throughput"], throughput_path)
    _save(figures["efficiency"], efficiency_path)


def plot_learning_curves(curves: pd.DataFrame, path: Path) -> None:
    """Write :func:`learning_curves_figure` to a PNG file."""
    _save(learning_curves_figure(curves), path)


def _save(figure: Figure, path: Path) -> None:
    figure.savefig(path, dpi=110)
    plt.close(figure)  # pyplot keeps every open figure alive otherwise
