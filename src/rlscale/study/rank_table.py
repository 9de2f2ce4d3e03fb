"""Where each rank's time went, per cell of a study: the training bundles' ``ranks`` sections
(:mod:`rlscale.benchmark.rank_breakdown`) side by side, one row per task × library × per-rank env count × world size
of two ranks or more.

Within a run, a figure is the mean over its ranks of each rank's median; across a cell's runs (seeds), the median.
Bundles without the section (schema 1.0, skrl with JAX) are left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean, median

import pandas as pd

from rlscale.benchmark.rank_breakdown import STRAGGLER_FLOOR_S, STRAGGLER_SHARE
from rlscale.study.aggregate import CELL, bundle_record, library_label
from rlscale.study.markdown import markdown_table

RANK_COLUMNS = [
    *("task", "library", "num_envs_per_rank", "world_size", "n_runs", "iteration_s", "compute_s", "collective_s"),
    *("communication_share", "wait_share", "slowest_rank", "slowest_rank_excess_s", "straggler"),
]
"""Columns of :func:`rank_time_table`, in order."""


def _run_row(bundle: Mapping) -> dict:
    ranks = bundle["ranks"]
    per_rank = ranks["per_rank"]
    return {
        **{key: bundle_record(bundle)[key] for key in CELL},
        **{name: fmean(rank[name] for rank in per_rank) for name in ("iteration_s", "compute_s", "collective_s")},
        "communication_share": ranks["communication_share"],
        "wait_share": ranks["wait_share"],
        "slowest_rank": ranks["slowest_rank"],
        "slowest_rank_excess_s": ranks["slowest_rank_excess_s"],
        "straggler": ranks["straggler"],
    }


def _most_common(values: Sequence) -> str:
    """The most frequent value with its count of the runs, e.g. ``1 (3/3)``; ``none`` when it is None."""
    value, count = Counter(values).most_common(1)[0]
    return f"{'none' if value is None else value} ({count}/{len(values)})"


def rank_time_table(bundles: Sequence[Mapping]) -> pd.DataFrame:
    """One row per cell of two ranks or more whose bundles have a ``ranks`` section (columns :data:`RANK_COLUMNS`);
    ``slowest_rank`` and ``straggler`` give the most frequent rank over the cell's runs."""
    runs = [_run_row(bundle) for bundle in bundles if bundle.get("ranks") and bundle["extra"]["world_size"] > 1]
    rows = []
    for cell, group in pd.DataFrame(runs, columns=[*CELL, *RANK_COLUMNS[5:]]).groupby(CELL, sort=True):
        figures = {name: median(group[name]) for name in RANK_COLUMNS[5:10]}
        rows.append(
            {
                "task": cell[0],
                "library": library_label(cell[1], cell[2]),
                "num_envs_per_rank": cell[3],
                "world_size": cell[4],
                "n_runs": len(group),
                **figures,
                "slowest_rank": _most_common(list(group["slowest_rank"])),
                "slowest_rank_excess_s": median(group["slowest_rank_excess_s"]),
                "straggler": _most_common([None if pd.isna(value) else int(value) for value in group["straggler"]]),
            }
        )
    return pd.DataFrame(rows, columns=RANK_COLUMNS)


def rank_time_markdown(table: pd.DataFrame, figure: str) -> list[str]:
    """The summary's section on ``table`` (none when it is empty), with the stacked bar of
    :func:`rlscale.study.plots.rank_time_figure` in the file ``figure``."""
    if not len(table):
        return []
    return [
        "## Where each rank's time went",
        "",
        "From the training bundles' `ranks` section: per iteration, compute (collection and update) plus time",
        "blocked in collectives. A rank's wait is its collective time less the smallest of any rank in that",
        "iteration; communication_share is the rest of the collective time, the transfer, as a share of the",
        "iteration. Each figure is the mean over ranks, then the median over runs. The straggler is the slowest",
        f"rank when its compute exceeds the others' median by over {STRAGGLER_SHARE:.0%} and {STRAGGLER_FLOOR_S} s,",
        "with the runs that named it (none: no straggler).",
        "",
        markdown_table(table),
        "",
        f"![rank_time]({Path(figure).name})",
        "",
    ]
