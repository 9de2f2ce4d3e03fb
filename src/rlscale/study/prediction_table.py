"""Predicted against measured, per multi-rank cell of a study: the scaling model
(:mod:`rlscale.benchmark.scaling_model`) run on the cell's 1-rank training bundles, beside the efficiency that
``scaling.csv`` measured.

The compute comes from each 1-rank seed's bundle, and the predicted efficiency is the median over those seeds. The
collectives per iteration come from the cell's own bundles' ``ranks`` section: a count of what the ranks exchange,
not a time. The link's cost is the fit of the probe's sweep at the cell's world size, for the links within and
between nodes alike. Without a sweep the fit accepts, communication is taken as free, and the table says so. Cells
without a ``ranks`` section (schema 1.0, skrl with JAX) or without 1-rank bundles are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import median

import pandas as pd

from rlscale.benchmark.scaling_model import CostModel, LinkCost, predict, relative_error
from rlscale.benchmark.scaling_profile import measured_collectives, profile_of
from rlscale.launch.probe_sweep import ProbeSweep, fit_sweep
from rlscale.study.aggregate import BASELINE, CELL, COMPLETED, bundle_record, library_label
from rlscale.study.markdown import markdown_table

PREDICTION_COLUMNS = [
    *("task", "library", "num_envs_per_rank", "world_size", "measured_efficiency", "predicted_efficiency", "error"),
    *("predicted_communication_share", "link"),
]
"""Columns of :func:`prediction_table`, in order."""
FREE_LINK = LinkCost(0.0, math.inf)
"""The cost where no sweep tells one: none."""


def link_of(sweep: ProbeSweep | None) -> tuple[LinkCost, str]:
    """The link under a probe's sweep and how the table names it; :data:`FREE_LINK` without a sweep, or with one the
    fit refuses."""
    if sweep is None:
        return FREE_LINK, "none: no probe sweep, communication free"
    try:
        link = LinkCost.from_fit(fit_sweep(sweep))
    except ValueError as error:
        return FREE_LINK, f"none ({error}), communication free"
    return link, f"probe sweep: {link.latency_s * 1e6:.3g} µs per step, {link.bandwidth_bytes_per_s / 1e9:.3g} GB/s"


def prediction_table(
    bundles: Sequence[Mapping], scaling: pd.DataFrame, sweeps: Mapping[int, ProbeSweep]
) -> pd.DataFrame:
    """One row per cell of two ranks or more with a ``ranks`` section and 1-rank bundles (:data:`PREDICTION_COLUMNS`):
    ``scaling`` (the scaling table) gives the measured efficiency, ``sweeps`` the probe's sweep per world size."""
    cells: dict[tuple, list[Mapping]] = {}
    for bundle in bundles:
        if bundle["run"]["status"] == COMPLETED:
            record = bundle_record(bundle)
            cells.setdefault(tuple(record[key] for key in CELL), []).append(bundle)
    measured = scaling.set_index(CELL)["efficiency"]
    rows = []
    for cell, group in sorted(cells.items()):
        counted = [bundle for bundle in group if bundle.get("ranks")]
        singles = cells.get((*cell[: len(BASELINE)], 1), [])
        if cell[-1] < 2 or not counted or not singles:
            continue
        collectives = measured_collectives(counted[0])
        link, link_text = link_of(sweeps.get(cell[-1]))
        nodes = counted[0]["extra"]["num_nodes"]
        predictions = [
            predict(profile_of(bundle, collectives), CostModel(link, link), nodes, cell[-1] // nodes)
            for bundle in singles
        ]
        predicted = median(prediction.efficiency for prediction in predictions)
        rows.append(
            {
                "task": cell[0],
                "library": library_label(cell[1], cell[2]),
                "num_envs_per_rank": cell[3],
                "world_size": cell[4],
                "measured_efficiency": measured[cell],
                "predicted_efficiency": predicted,
                "error": relative_error(predicted, measured[cell]),
                "predicted_communication_share": median(p.communication_share for p in predictions),
                "link": link_text,
            }
        )
    return pd.DataFrame(rows, columns=PREDICTION_COLUMNS)


def prediction_markdown(table: pd.DataFrame) -> list[str]:
    """The summary's section on ``table``; none when it is empty."""
    if not len(table):
        return []
    return [
        "## Predicted against measured efficiency",
        "",
        "`rlscale benchmark predict`'s model on each 1-rank bundle: its compute, plus the ring cost of the",
        "collectives the cell's ranks called (their `ranks` section), priced by the probe's sweep at that world size",
        "(`link`). The predicted efficiency is the median over the 1-rank seeds; error is (predicted − measured) /",
        "measured. The model assumes each rank computes as fast as the lone rank did: a positive error is compute",
        "that slowed at N ranks, or collectives that cost more than the probe's (docs/benchmarks.md, 'Where the",
        "model misses').",
        "",
        markdown_table(table),
        "",
    ]
