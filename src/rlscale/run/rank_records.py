"""Every rank's per-iteration records, gathered to global rank 0 once training is done, so that a report can say
where each rank's time went rather than rank 0's alone."""

from __future__ import annotations

import torch

from rlscale.dist import RankInfo
from rlscale.rl.progress import IterationRecord


def gather_records(records: list[IterationRecord], rank: RankInfo) -> list[list[IterationRecord]] | None:
    """All ranks' records in rank order on global rank 0; None on the other ranks, and on skrl's JAX ranks, which
    have no torch process group (a collective: every rank must call it at the same point)."""
    if not rank.distributed:
        return [list(records)]
    if not torch.distributed.is_initialized():
        return None
    gathered: list[list[IterationRecord] | None] | None = [None] * rank.world_size if rank.is_main else None
    torch.distributed.gather_object(list(records), gathered, dst=0)
    return gathered if rank.is_main else None
