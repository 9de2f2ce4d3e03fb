"""Where each rank's iteration time went: the training bundle's ``ranks`` section, from every rank's records.

Per iteration and rank: ``collection_compute_s`` (the rollout, less the collectives in it), ``update_compute_s`` (the
update, less its collectives) and ``collective_s`` (time blocked in collectives) add up to ``iteration_s``. Ranks meet
in every collective, so the one to arrive last, the straggler, waits least: a rank's ``wait_s`` is its collective time
less the smallest collective time of any rank in that iteration, and that smallest time is the transfer itself.
Each figure is the median over the measured iterations (warm-up left out).

A straggler is named only when the slowest rank's compute (``iteration_s - collective_s``) exceeds the median
compute of the other ranks by more than :data:`STRAGGLER_SHARE` of it and by more than :data:`STRAGGLER_FLOOR_S`:
ranks always differ a little (rank 0 also logs, and shares its host), and the slowest rank with its excess are in
the section either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean, median
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlscale.rl.progress import IterationRecord

STRAGGLER_SHARE = 0.25
"""How much more compute than the other ranks' median, as a share of it, makes the slowest rank a straggler."""
STRAGGLER_FLOOR_S = 0.1
"""The least excess compute per iteration, in seconds, that makes the slowest rank a straggler: below it, rank 0's
logging and a busy host's scheduling (tens of milliseconds on two CPU ranks) would name one in even runs."""
FIGURES = ("iteration_s", "collection_compute_s", "update_compute_s", "collective_s", "wait_s", "compute_s")


def _iteration_figures(records: Sequence[IterationRecord]) -> list[dict[str, float]]:
    """One iteration's figures on every rank (``records`` in rank order), ``wait_s`` included."""
    transfer = min(record.collectives.seconds for record in records)
    figures = []
    for record in records:
        collectives = record.collectives
        update_collective_s = collectives.seconds - collectives.rollout_seconds
        figures.append(
            {
                "iteration_s": record.iteration_s,
                "collection_compute_s": record.collection_s - collectives.rollout_seconds,
                "update_compute_s": record.iteration_s - record.collection_s - update_collective_s,
                "collective_s": collectives.seconds,
                "wait_s": collectives.seconds - transfer,
                "compute_s": record.iteration_s - collectives.seconds,
            }
        )
    return figures


def _collective_medians(records: Sequence[IterationRecord]) -> dict[str, dict[str, float]]:
    """Per kind of collective, the median calls and bytes per iteration of one rank."""
    kinds = sorted({kind for record in records for kind in record.collectives.by_kind})
    medians = {}
    for kind in kinds:
        tallies = [record.collectives.by_kind.get(kind) for record in records]
        medians[kind] = {
            "calls": median(tally.calls if tally else 0 for tally in tallies),
            "bytes": median(tally.bytes if tally else 0 for tally in tallies),
        }
    return medians


def straggler_of(compute_s: Sequence[float]) -> tuple[int, float | None, int | None]:
    """The slowest rank by compute, its excess over the other ranks' median compute (None with one rank), and the
    straggler: the slowest rank if that excess passes :data:`STRAGGLER_SHARE` and :data:`STRAGGLER_FLOOR_S`, else
    None."""
    slowest = max(range(len(compute_s)), key=compute_s.__getitem__)
    others = [value for rank, value in enumerate(compute_s) if rank != slowest]
    if not others:
        return slowest, None, None
    typical = median(others)
    excess = compute_s[slowest] - typical
    named = excess > STRAGGLER_SHARE * typical and excess > STRAGGLER_FLOOR_S
    return slowest, excess, slowest if named else None


def ranks_section(rank_records: Sequence[Sequence[IterationRecord]] | None, warmup: int) -> dict | None:
    """The ``ranks`` section from every rank's records in rank order, the first ``warmup`` iterations left out.

    None when there is nothing to break down: no records from every rank (the other ranks' records are gathered when
    training completes), no measured iteration, or collectives that were not timed (skrl's JAX ranks).
    """
    if not rank_records:
        return None
    measured = [list(records[warmup:]) for records in rank_records]
    iterations = min(len(records) for records in measured)
    if not iterations or any(record.collectives is None for records in measured for record in records):
        return None
    per_iteration = [_iteration_figures([records[index] for records in measured]) for index in range(iterations)]
    per_rank = []
    for rank, records in enumerate(measured):
        figures = {name: median(row[rank][name] for row in per_iteration) for name in FIGURES}
        transfer_s = median(row[rank]["collective_s"] - row[rank]["wait_s"] for row in per_iteration)
        per_rank.append(
            {
                "rank": rank,
                **figures,
                "communication_share": transfer_s / figures["iteration_s"],
                "wait_share": figures["wait_s"] / figures["iteration_s"],
                "collectives": _collective_medians(records[:iterations]),
            }
        )
    slowest, excess_s, straggler = straggler_of([figures["compute_s"] for figures in per_rank])
    return {
        "iterations_measured": iterations,
        "per_rank": per_rank,
        "slowest_rank": slowest,
        "slowest_rank_excess_s": excess_s,
        "straggler": straggler,
        "straggler_rule": {"share": STRAGGLER_SHARE, "floor_s": STRAGGLER_FLOOR_S},
        "communication_share": fmean(rank["communication_share"] for rank in per_rank),
        "wait_share": fmean(rank["wait_share"] for rank in per_rank),
    }


def rank_phases_section(per_rank: Sequence[Mapping[str, float | None]], slowest_by: str) -> dict | None:
    """The startup or runtime benchmark's ``ranks`` section: each rank's figures (in rank order), and the rank with
    the largest ``slowest_by`` with its excess over the other ranks' median. None without a figure from every rank."""
    if not per_rank or any(figures.get(slowest_by) is None for figures in per_rank):
        return None
    values = [figures[slowest_by] for figures in per_rank]
    slowest = max(range(len(values)), key=values.__getitem__)
    others = [value for rank, value in enumerate(values) if rank != slowest]
    return {
        "per_rank": [{"rank": rank, **figures} for rank, figures in enumerate(per_rank)],
        "slowest_by": slowest_by,
        "slowest_rank": slowest,
        "slowest_rank_excess_s": values[slowest] - median(others) if others else None,
    }
