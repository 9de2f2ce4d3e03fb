"""Parity results from the runs' records: per run, the global env steps and wall time to the target, the best value
of the target's metric and the return at fixed fractions of the budget; per world size, their medians and spread,
whether it reached the target, the wall-time speedup over one rank and the "learns as well" verdict.

A run's record is its rank-0 manifest, whose ``iterations`` hold every iteration's global ``env_steps``, ``elapsed_s``
(wall time since training started), ``mean_return``, ``mean_episode_length`` and the task's ``metrics``. A run that
never reaches its target within the budget counts as ``inf`` steps and seconds: medians over seeds stay defined, and
a median of ``inf`` means most seeds did not reach it: the world size's ``outcome`` is then :data:`NOT_REACHED`, and
no speedup is computed for it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from rlscale.manifest import RecordedIteration, RunManifest

GROUP = ["task", "rl_library", "variant", "lr_scaling", "normalizer_sync", "world_size"]
"""Columns of one row of ``parity.csv``: the runs (seeds) of one cell."""
PAIR = ["task", "rl_library"]
"""Columns a world size shares with the one-rank row it is compared to (one rank has only the base variant)."""
COMPARISON_COLUMNS = [
    *("env_steps_ratio", "learns_as_well", "wall_time_speedup", "wall_time_speedup_low", "wall_time_speedup_high"),
    "solves_sooner",
]
"""Columns of ``parity.csv`` that compare a row with one rank (see :func:`parity_table`)."""
PARITY_COLUMNS = [
    *GROUP,
    *("num_envs_per_rank", "metric", "target", "direction", "max_env_steps", "n_runs", "n_reached", "outcome"),
    *("best_value", "env_steps_run"),
    *("env_steps_to_target_median", "env_steps_to_target_min", "env_steps_to_target_max"),
    *("wall_time_to_target_median_s", "wall_time_to_target_min_s", "wall_time_to_target_max_s"),
    *COMPARISON_COLUMNS,
]
"""Columns of ``parity.csv``, in order."""
REACHED, NOT_REACHED = "reached", "not reached"
"""``outcome`` of a world size whose median run reached the target within the budget, and of one whose did not."""


def metric_values(iterations: Sequence[RecordedIteration], metric: str) -> list[float]:
    """Each iteration's value of a target metric: a record field, or one of its task ``metrics`` (NaN if absent)."""
    return [record.value(metric) for record in iterations]


def best_value(iterations: Sequence[RecordedIteration], metric: str, direction: str = "at_least") -> float:
    """How far a run got: its metric's highest value (``direction`` ``at_most``: lowest) over its iterations, NaN when
    no iteration has one (no episode ever ended)."""
    values = [value for value in metric_values(iterations, metric) if not math.isnan(value)]
    if not values:
        return math.nan
    return max(values) if direction == "at_least" else min(values)


def first_crossing(
    iterations: Sequence[RecordedIteration], metric: str, target: float, direction: str = "at_least"
) -> tuple[float, float]:
    """Global env steps and wall time (s) at the end of the first iteration whose metric is at least ``target``
    (``direction`` ``at_most``: at most, for an error); ``(inf, inf)`` when none is (NaN, before any episode ended,
    is never at the target)."""
    reached = (lambda value: value >= target) if direction == "at_least" else (lambda value: value <= target)
    for record, value in zip(iterations, metric_values(iterations, metric), strict=True):
        if reached(value):
            return _recorded(record.env_steps), _recorded(record.elapsed_s)
    return math.inf, math.inf


def return_at(iterations: Sequence[RecordedIteration], env_steps: float) -> float:
    """Mean return of the last iteration that ended at or before ``env_steps`` global env steps (NaN if none)."""
    reached = [record.mean_return for record in iterations if _recorded(record.env_steps) <= env_steps]
    return reached[-1] if reached else math.nan


def _recorded(value: float | None) -> float:
    """A record's env steps or elapsed time as a float (NaN where an older manifest did not record it)."""
    return math.nan if value is None else float(value)


def run_record(manifest: RunManifest, cell: Mapping, checkpoints: Sequence[float], path: str = "") -> dict:
    """One row of ``parity_runs.csv`` from a run's manifest and the cell it was filed under.

    Raises:
        ValueError: for a run that did not complete, or one that is not the cell's run (task, library, world size,
            seed, env count or knobs differ): its numbers would answer another question.
    """
    if manifest.status != "completed":
        raise ValueError(f"{path}: parity run status {manifest.status!r}, not completed; rerun it")
    args = manifest.args
    ran = {
        "task": args.task,
        "rl_library": args.rl_library,
        "world_size": manifest.world_size,
        "seed": args.seed,
        "num_envs_per_rank": manifest.num_envs,
        "lr_scaling": args.lr_scaling,
        "normalizer_sync": args.normalizer_sync,
    }
    for key, value in ran.items():
        if value != cell[key]:
            raise ValueError(f"{path}: the run has {key}={value!r} but is filed under {key}={cell[key]!r}")
    iterations = manifest.iterations
    env_steps, wall_time = first_crossing(iterations, cell["metric"], cell["target"], cell["direction"])
    last = iterations[-1] if iterations else None
    return {
        **{
            key: cell[key]
            for key in (*GROUP, "seed", "num_envs_per_rank", "metric", "target", "direction", "max_env_steps")
        },
        "reached": math.isfinite(env_steps),
        "env_steps_to_target": env_steps,
        "wall_time_to_target_s": wall_time,
        "best_value": best_value(iterations, cell["metric"], cell["direction"]),
        "iterations": len(iterations),
        "env_steps": None if last is None else last.env_steps,
        "wall_time_s": None if last is None else last.elapsed_s,
        **{
            f"return_at_{fraction:g}": return_at(iterations, fraction * cell["max_env_steps"])
            for fraction in checkpoints
        },
    }


def run_table(manifests: Sequence[RunManifest], cells: Sequence[Mapping], checkpoints: Sequence[float]) -> pd.DataFrame:
    """``parity_runs.csv``: one row per run (see :func:`run_record`)."""
    rows = [
        run_record(manifest, cell, checkpoints, cell.get("path", ""))
        for manifest, cell in zip(manifests, cells, strict=True)
    ]
    return pd.DataFrame.from_records(rows)


def _spread(values: pd.Series, name: str, unit: str = "") -> dict:
    """Median (``inf`` when most values are), min and max of the seeds' values."""
    stats = (("median", float(np.median(values))), ("min", float(values.min())), ("max", float(values.max())))
    return {f"{name}_{stat}{unit}": value for stat, value in stats}


def parity_table(runs: pd.DataFrame, tolerance: float) -> pd.DataFrame:
    """``parity.csv``: per task × library × variant × world size, the env steps and wall time to the target (median
    over seeds, min and max), and the comparison with the same task and library at one rank.

    * ``outcome``: :data:`REACHED` when the median seed reached the target, else :data:`NOT_REACHED`; with it how far
      the runs got: ``best_value``, the median over seeds of each run's best value of the target's metric, and
      ``env_steps_run``, the global env steps they ran (the budget, rounded up to whole iterations).
    * ``env_steps_ratio``: median env steps of N ranks over those of one rank; ``learns_as_well`` is
      ``env_steps_ratio <= 1 + tolerance`` (None when one rank's median never reached the target).
    * ``wall_time_speedup``: one rank's median wall time to the target over N ranks'; ``_low`` and ``_high`` pair the
      extremes (one rank's fastest seed with N ranks' slowest, and the reverse); each is NaN where N ranks' time is
      ``inf`` (not reached: no speedup) and ``inf`` where only one rank's is. ``solves_sooner`` is
      ``wall_time_speedup > 1``, False when N ranks did not reach the target and one rank did, None when neither did.
    """
    if runs.empty:
        return pd.DataFrame(columns=PARITY_COLUMNS)
    rows = []
    for key, group in runs.groupby(GROUP, sort=True):
        first = group.iloc[0]
        rows.append(
            {
                **dict(zip(GROUP, key, strict=True)),
                **{
                    name: first[name]
                    for name in ("num_envs_per_rank", "metric", "target", "direction", "max_env_steps")
                },
                "n_runs": len(group),
                "n_reached": int(group["reached"].sum()),
                "outcome": REACHED if np.isfinite(np.median(group["env_steps_to_target"])) else NOT_REACHED,
                "best_value": float(group["best_value"].median()),
                "env_steps_run": float(group["env_steps"].max()),
                **_spread(group["env_steps_to_target"], "env_steps_to_target"),
                **_spread(group["wall_time_to_target_s"], "wall_time_to_target", "_s"),
            }
        )
    table = pd.DataFrame.from_records(rows)
    single = table[table["world_size"] == 1].set_index(PAIR)
    comparisons = [_compare(row, single, tolerance) for _, row in table.iterrows()]
    table = pd.concat([table, pd.DataFrame.from_records(comparisons, index=table.index)], axis=1)
    return table[PARITY_COLUMNS]


def _ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator`` with ``x / inf`` NaN (the denominator's runs did not reach the target: no ratio to
    speak of, never 0) and ``inf / x`` inf."""
    if math.isinf(denominator):
        return math.nan
    return numerator / denominator if denominator else math.nan


def _compare(row: pd.Series, single: pd.DataFrame, tolerance: float) -> dict:
    """The comparison of one row with the one-rank row of its task and library (all None without one); one rank's own
    row gets its ratios (1) but no verdicts."""
    key = (row["task"], row["rl_library"])
    if key not in single.index:
        return dict.fromkeys(COMPARISON_COLUMNS)
    one = single.loc[key]
    baseline = row["world_size"] == 1
    steps_ratio = _ratio(row["env_steps_to_target_median"], one["env_steps_to_target_median"])
    speedup = _ratio(one["wall_time_to_target_median_s"], row["wall_time_to_target_median_s"])
    reached, one_reached = (math.isfinite(r["wall_time_to_target_median_s"]) for r in (row, one))
    return {
        "env_steps_ratio": steps_ratio,
        "learns_as_well": None
        if baseline or math.isinf(one["env_steps_to_target_median"])
        else bool(steps_ratio <= 1 + tolerance),
        "wall_time_speedup": speedup,
        "wall_time_speedup_low": _ratio(one["wall_time_to_target_min_s"], row["wall_time_to_target_max_s"]),
        "wall_time_speedup_high": _ratio(one["wall_time_to_target_max_s"], row["wall_time_to_target_min_s"]),
        "solves_sooner": None if baseline or not (reached or one_reached) else reached and bool(speedup > 1),
    }


CURVE_COLUMNS = ["task", "rl_library", "variant", "world_size", "seed", "metric", "env_steps", "elapsed_s", "value"]
"""Columns of :func:`curve_frame`."""


def curve_frame(manifests: Sequence[RunManifest], cells: Sequence[Mapping]) -> pd.DataFrame:
    """Every run's value of its target's metric per iteration (``value``, NaN before an episode ended) against
    global env steps and wall time, one row per iteration."""
    rows = []
    for manifest, cell in zip(manifests, cells, strict=True):
        iterations = manifest.iterations
        for record, value in zip(iterations, metric_values(iterations, cell["metric"]), strict=True):
            rows.append(
                {
                    **{key: cell[key] for key in ("task", "rl_library", "variant", "world_size", "seed", "metric")},
                    "env_steps": record.env_steps,
                    "elapsed_s": record.elapsed_s,
                    "value": value,
                }
            )
    return pd.DataFrame.from_records(rows, columns=CURVE_COLUMNS)
