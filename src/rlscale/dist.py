"""The rank environment, read in one place.

torchrun sets ``WORLD_SIZE``/``RANK``/``LOCAL_RANK``/``LOCAL_WORLD_SIZE``; skrl's JAX launcher sets ``JAX_WORLD_SIZE``/
``JAX_RANK``/``JAX_LOCAL_RANK``. A process started by neither is rank 0 of 1.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

RUN_TIMESTAMP_ENV = "RLSCALE_RUN_TIMESTAMP"
"""Set by the launcher so that every rank of a job names the same run directory."""
STATUS_DIR_ENV = "RLSCALE_STATUS_DIR"
"""Set by the launcher: each rank leaves ``rank_<r>.json`` with its exit status there."""


@dataclass(frozen=True)
class RankInfo:
    """Where this process sits in the job."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """True on global rank 0, the only rank that writes the run directory's shared files."""
        return self.rank == 0

    @property
    def num_nodes(self) -> int:
        return max(1, self.world_size // self.local_world_size)


def rank_info(environ: Mapping[str, str] | None = None) -> RankInfo:
    """Read the rank variables of torchrun, or else of skrl's JAX launcher."""
    env = os.environ if environ is None else environ
    prefix = "" if "WORLD_SIZE" in env else "JAX_" if "JAX_WORLD_SIZE" in env else None
    if prefix is None:
        return RankInfo()
    world_size = int(env[f"{prefix}WORLD_SIZE"])
    # skrl's JAX launcher sets no local world size; rlscale's launcher exports it, else assume one node.
    local_world_size = int(env.get("LOCAL_WORLD_SIZE", world_size))
    return RankInfo(
        rank=int(env.get(f"{prefix}RANK", "0")),
        local_rank=int(env.get(f"{prefix}LOCAL_RANK", "0")),
        world_size=world_size,
        local_world_size=local_world_size,
    )


def rank_device(requested: str, rank: RankInfo, cuda_device_count: int) -> str:
    """This rank's device: ``cuda:{local_rank}``, or ``cuda:0`` when each rank sees one GPU; CPU stays CPU."""
    if requested == "cpu" or not rank.distributed:
        return requested
    return f"cuda:{rank.local_rank}" if rank.local_rank < cuda_device_count else "cuda:0"
