"""Rank-sync audit: every rank hashes its policy parameters and all ranks compare the hashes.

Data-parallel PPO keeps ranks identical only while every gradient is all-reduced and every broadcast lands; a rank
that silently drifts trains a different policy. The digests go into the manifest, and a mismatch fails the run.
"""

from __future__ import annotations

import numpy as np
import torch

from rlscale.dist import RankInfo


class RankDivergence(RuntimeError):
    """Raised on every rank when the ranks' policy parameters differ."""


def gather_digests(digest: str, rank: RankInfo) -> list[str]:
    """All ranks' digests in rank order (a collective: every rank must call it at the same point)."""
    if not rank.distributed:
        return [digest]
    if torch.distributed.is_initialized():
        gathered: list[str | None] = [None] * rank.world_size
        torch.distributed.all_gather_object(gathered, digest)
        return [str(value) for value in gathered]
    # skrl's JAX path has no torch process group; JAX's own collectives carry the bytes instead.
    from jax.experimental import multihost_utils

    rows = multihost_utils.process_allgather(np.frombuffer(bytes.fromhex(digest), dtype=np.uint8))
    return [bytes(np.asarray(row, dtype=np.uint8)).hex() for row in np.asarray(rows)]


def any_rank(flag: bool, rank: RankInfo, device: str) -> bool:
    """Whether ``flag`` is set on any rank (a collective: every rank must call it at the same point). ``device`` is the
    rank's torch device, where NCCL needs the value."""
    if not rank.distributed:
        return flag
    if torch.distributed.is_initialized():
        value = torch.tensor([int(flag)], device=device)
        torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.MAX)
        return bool(value.item())
    from jax.experimental import multihost_utils  # skrl's JAX ranks, as in gather_digests

    return bool(np.asarray(multihost_utils.process_allgather(np.array([flag]))).any())


def check_digests(digests: list[str], iteration: int) -> None:
    """Raise naming the ranks whose parameters differ from rank 0's.

    Raises:
        RankDivergence: if any rank differs.
    """
    diverged = [index for index, digest in enumerate(digests) if digest != digests[0]]
    if diverged:
        raise RankDivergence(
            f"policy parameters diverged at iteration {iteration}: rank(s) {', '.join(map(str, diverged))} "
            f"differ from rank 0 ({len(digests)} ranks)"
        )
