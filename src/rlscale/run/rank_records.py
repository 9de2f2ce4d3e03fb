"""Every rank's per-iteration records and cold-start phases, gathered to global rank 0 once training is done, so that
a report can say where each rank's time went rather than rank 0's alone."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlscale.dist import RankInfo
from rlscale.rl.progress import IterationRecord


@dataclass(frozen=True)
class RankStartup:
    """One rank's cold-start phases, in seconds (None: not reached)."""

    task_creation_s: float | None
    task_compile_s: float | None
    """The part of ``task_creation_s`` spent compiling the task's step."""
    first_iteration_s: float | None


@dataclass(frozen=True)
class RankReport:
    """What a rank tells global rank 0 at the end of its training."""

    records: list[IterationRecord]
    startup: RankStartup


def gather_reports(report: RankReport, rank: RankInfo) -> list[RankReport] | None:
    """All ranks' reports in rank order on global rank 0; None on the other ranks, and on skrl's JAX ranks, which
    have no torch process group (a collective: every rank must call it at the same point)."""
    if not rank.distributed:
        return [report]
    if not torch.distributed.is_initialized():
        return None
    gathered: list[RankReport | None] | None = [None] * rank.world_size if rank.is_main else None
    torch.distributed.gather_object(report, gathered, dst=0)
    return gathered if rank.is_main else None
