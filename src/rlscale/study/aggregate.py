"""Scaling table of a study: benchmark bundles in, one row per task × library × per-rank env count × world size out.

Comparison rules (Isaac Lab's benchmark rules): scaling is weak scaling, so a world size is only
ever compared with a single rank that ran the **same per-rank env count**, task and library; only bundles with the
same schema version and the same measurement scopes are compared. Anything else raises
:class:`IncompatibleBundlesError` instead of producing a number.

``efficiency = median global FPS / (world_size × median global FPS of the world-size-1 row)`` of the same task,
library and per-rank env count, where a bundle's global FPS is ``runtime.total_fps.mean``. Every speedup, efficiency
and peer ratio comes with a distribution-free interval (``*_low``, ``*_high``) and its exact coverage
(``*_coverage``; :mod:`rlscale.benchmark.stats`): GPUs vary by about 15 % from run to run, so one number would
overstate what a handful of seeds show. Where the seeds are too few for 95 %, the interval is their range and the
coverage says how much less it holds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from rlscale.benchmark.stats import MedianInterval, median_interval, ratio_of_medians_interval

CELL = ["task", "rl_library", "ml_framework", "num_envs_per_rank", "world_size"]
"""Columns that identify a row of the scaling table."""
BASELINE = ["task", "rl_library", "ml_framework", "num_envs_per_rank"]
"""Columns a world size shares with the single-rank row it is compared to."""
UNIFORM = ["schema_version", "workflow", "workload_scope", "measurement_scope", "device_type"]
"""Columns that must have one value within every compared group: otherwise the numbers measure different things."""
SCALING_COLUMNS = [
    *CELL,
    "n_runs",
    "global_fps_median",
    "global_fps_iqr",
    "per_rank_fps_median",
    "speedup",
    "speedup_low",
    "speedup_high",
    "speedup_coverage",
    "efficiency",
    "efficiency_low",
    "efficiency_high",
    "peer_ratio_median",
    "peer_ratio_low",
    "peer_ratio_high",
    "peer_ratio_coverage",
    "schema_version",
]
"""Columns of ``scaling.csv``, in order."""
RECORD_COLUMNS = [
    *("path", "schema_version", "workflow", "task", "rl_library", "ml_framework", "seed", "status", "device_type"),
    *("num_envs_per_rank", "world_size", "num_nodes", "workload_scope", "measurement_scope", "global_fps"),
    "peer_ratio",
]
"""Columns of :func:`load_bundles`' frame, one per field of :func:`bundle_record`."""
COMPLETED = "completed"
"""``run.status`` of a bundle whose run finished."""


class IncompatibleBundlesError(ValueError):
    """Bundles that must not be compared or put in one row; the message names the files and the field."""


def read_bundle(path: str | Path) -> dict:
    """Read one benchmark bundle (JSON)."""
    return json.loads(Path(path).read_text())


def bundle_record(bundle: Mapping, path: str | Path | None = None) -> dict:
    """Flatten the fields of a bundle that the scaling table uses into one record.

    Raises:
        IncompatibleBundlesError: If a field the table needs is missing.
    """
    run, extra, runtime = bundle.get("run") or {}, bundle.get("extra") or {}, bundle.get("runtime") or {}
    world_size = int(extra.get("world_size") or 1)
    num_envs = extra.get("num_envs_per_rank")  # Every bundle has it; run.num_envs counts every rank's for training.
    total_fps = runtime.get("total_fps") or {}
    peer = runtime.get("peer") or {}
    record = {
        "path": None if path is None else str(path),
        "schema_version": bundle.get("schema_version"),
        "workflow": run.get("workflow"),
        "task": run.get("task"),
        "rl_library": run.get("framework"),
        "ml_framework": run.get("ml_framework") or "torch",
        "seed": run.get("seed"),
        "status": run.get("status"),
        "device_type": str(run.get("device") or "").partition(":")[0],
        "num_envs_per_rank": None if num_envs is None else int(num_envs),
        "world_size": world_size,
        "num_nodes": int(extra.get("num_nodes") or 1),
        "workload_scope": extra.get("workload_scope"),
        "measurement_scope": extra.get("measurement_scope"),
        "global_fps": total_fps.get("mean"),
        "peer_ratio": peer.get("ratio_total_fps_median"),
    }
    missing = [key for key in ("schema_version", "task", "num_envs_per_rank") if record[key] is None]
    if missing:
        raise IncompatibleBundlesError(f"bundle {path or '<in memory>'} lacks {', '.join(missing)}.")
    return record


def load_bundles(
    paths: Iterable[str | Path], expected: Sequence[Mapping] | None = None, bundles: Sequence[Mapping] | None = None
) -> pd.DataFrame:
    """Read bundles into one record per row, checking each against the cell the workflow asked it to measure.

    Args:
        paths: Bundle files.
        expected: Optional, one mapping per path with any of ``task``, ``rl_library``, ``ml_framework``,
            ``num_envs_per_rank``, ``world_size``: the cell the file was produced for (the rule's wildcards). A
            bundle whose own values differ is refused, so one row can never mix, e.g., two per-rank env counts.
        bundles: Already-read bundle dicts, one per path (skips reading the files).

    Returns:
        One row per bundle, with the columns of :func:`bundle_record`.

    Raises:
        IncompatibleBundlesError: On a bundle that does not match the bundle schema, or does not measure the cell
            it was filed under.
    """
    from rlscale.benchmark.bundle import validation_errors  # The writer's schema: one jsonschema call on each side.

    paths = [str(path) for path in paths]
    bundles = list(bundles) if bundles is not None else [read_bundle(path) for path in paths]
    for bundle, path in zip(bundles, paths, strict=True):
        errors = validation_errors(bundle)
        if errors:
            raise IncompatibleBundlesError(f"bundle {path} does not match the bundle schema: {errors[0]}.")
    records = [bundle_record(bundle, path) for bundle, path in zip(bundles, paths, strict=True)]
    for record, cell in zip(records, expected or [{}] * len(records), strict=True):
        for key, value in cell.items():
            if str(record[key]) != str(value):
                raise IncompatibleBundlesError(
                    f"bundle {record['path']} has {key}={record[key]!r} but was filed under {key}={value!r}; it "
                    "cannot share a row with the bundles of that cell."
                )
    return pd.DataFrame.from_records(records, columns=RECORD_COLUMNS)


def check_compatible(frame: pd.DataFrame) -> None:
    """Refuse bundles that cannot be compared: unfinished runs, or mixed schema versions/scopes where compared.

    Every group of :data:`BASELINE` (a row and the single-rank row its efficiency divides by) must have one value of
    each :data:`UNIFORM` column.

    Raises:
        IncompatibleBundlesError: Naming the group, the column, the values and the files.
    """
    unfinished = frame[frame["status"] != COMPLETED]
    if len(unfinished):
        listed = ", ".join(f"{row.path} ({row.status})" for row in unfinished.itertuples())
        raise IncompatibleBundlesError(f"bundles of runs that did not complete: {listed}.")
    if frame["global_fps"].isna().any():
        missing = ", ".join(map(str, frame.loc[frame["global_fps"].isna(), "path"]))
        raise IncompatibleBundlesError(f"bundles without runtime.total_fps.mean: {missing}.")
    for key, group in frame.groupby(BASELINE, dropna=False):
        for column in UNIFORM:
            values = group[column].dropna().unique()
            if len(values) > 1 or (len(values) == 1 and group[column].isna().any()):
                cell = dict(zip(BASELINE, key, strict=True))
                raise IncompatibleBundlesError(
                    f"{column} differs within {cell}: {sorted(map(str, group[column].unique()))} "
                    f"(files: {', '.join(map(str, group['path']))}); compare only identical {column}s."
                )


def _iqr(values: pd.Series) -> float:
    """Interquartile range (linear interpolation between order statistics, pandas' default)."""
    return float(values.quantile(0.75) - values.quantile(0.25))


def scaling_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Return the scaling table of :data:`SCALING_COLUMNS` from bundle records (see :func:`load_bundles`).

    ``speedup`` is the median global FPS over the single-rank median; ``efficiency`` is ``speedup / world_size``.
    Both are NaN where the study has no world-size-1 row for that task, library and per-rank env count.
    ``peer_ratio_median`` is the median over runs of each run's rlscale ÷ peer throughput (``benchmark --peer``).
    Each has an interval, ``*_low`` to ``*_high``, with its exact coverage: for the speedup and the efficiency the
    ratio of the row's and the single-rank row's order-statistic intervals (:func:`_speedup_intervals`), for the peer
    ratio the order-statistic interval of the row's runs (each ratio is paired within its run).
    """
    check_compatible(frame)
    grouped = frame.groupby(CELL, dropna=False)["global_fps"]
    table = grouped.agg(n_runs="count", global_fps_median="median", global_fps_iqr=_iqr).reset_index()
    table["schema_version"] = frame.groupby(CELL, dropna=False)["schema_version"].first().to_numpy()
    # Each bundle's own rlscale / peer ratio, both measured in that run; NaN where no run had a peer.
    table["peer_ratio_median"] = frame.groupby(CELL, dropna=False)["peer_ratio"].median().to_numpy()
    table["per_rank_fps_median"] = table["global_fps_median"] / table["world_size"]
    single = table[table["world_size"] == 1].set_index(BASELINE)["global_fps_median"].rename("single_rank_fps")
    table = table.join(single, on=BASELINE)
    table["speedup"] = table["global_fps_median"] / table["single_rank_fps"]
    table["efficiency"] = table["speedup"] / table["world_size"]
    table[["speedup_low", "speedup_high", "speedup_coverage"]] = _speedup_intervals(frame, table)
    table["efficiency_low"] = table["speedup_low"] / table["world_size"]
    table["efficiency_high"] = table["speedup_high"] / table["world_size"]
    peer = frame.groupby(CELL, dropna=False)["peer_ratio"].apply(lambda ratios: _bounds(median_interval(ratios)))
    table[["peer_ratio_low", "peer_ratio_high", "peer_ratio_coverage"]] = peer.tolist()
    return table.sort_values(CELL, ignore_index=True)[SCALING_COLUMNS]


def _bounds(interval: MedianInterval | None) -> tuple[float, float, float]:
    """An interval's ``(low, high, coverage)``; NaN for none."""
    return (math.nan,) * 3 if interval is None else (interval.low, interval.high, interval.coverage)


def _speedup_intervals(frame: pd.DataFrame, table: pd.DataFrame) -> list[tuple[float, float, float]]:
    """Interval of each row's speedup, one ``(low, high, coverage)`` per row of ``table``.

    The N-rank runs and the 1-rank runs are separate jobs with no pairing between them, so each cell's median gets
    its own interval and the ratio bounds them (:func:`rlscale.benchmark.stats.ratio_of_medians_interval`). The
    1-rank row is its own baseline: its speedup is 1 by definition, with no interval to speak of. NaN without a
    1-rank row.
    """
    fps = {key: group.tolist() for key, group in frame.groupby(CELL, dropna=False)["global_fps"]}
    bounds = []
    for row in table[CELL].itertuples(index=False, name=None):
        single = fps.get((*row[:-1], 1))
        if single is None:
            bounds.append((math.nan,) * 3)
        elif row[-1] == 1:
            bounds.append((1.0, 1.0, 1.0))
        else:
            bounds.append(_bounds(ratio_of_medians_interval(fps[row], single)))
    return bounds


def library_label(rl_library: str, ml_framework: str) -> str:
    """Name of a library line in plots and tables: ``skrl (jax)`` for a non-torch framework."""
    return rl_library if ml_framework == "torch" else f"{rl_library} ({ml_framework})"
