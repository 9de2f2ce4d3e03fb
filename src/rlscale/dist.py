"""The rank environment, read in one place.

torchrun sets ``WORLD_SIZE``/``RANK``/``LOCAL_RANK``/``LOCAL_WORLD_SIZE``; skrl's JAX launcher sets ``JAX_WORLD_SIZE``/
``JAX_RANK``/``JAX_LOCAL_RANK``. A process started by neither is rank 0 of 1.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from dataclasses import dataclass

RUN_TIMESTAMP_ENV = "RLSCALE_RUN_TIMESTAMP"
"""Set by the launcher so that every rank of a job names the same run directory."""
STATUS_DIR_ENV = "RLSCALE_STATUS_DIR"
"""Set by the launcher: each rank leaves ``rank_<r>.json`` with its exit status there."""
HEARTBEAT_DIR_ENV = "RLSCALE_HEARTBEAT_DIR"
"""Set by the launcher: each rank keeps ``rank_<r>.heartbeat`` there (:mod:`rlscale.launch.heartbeat`)."""
HANG_TIMEOUT_ENV = "RLSCALE_HANG_TIMEOUT"
"""Set by the launcher: its ``--hang_timeout`` in seconds (0: no watchdog), which sizes the collective timeout."""
SUPERVISOR_PID_ENV = "RLSCALE_SUPERVISOR_PID"
"""Set by the launcher: its pid; a rank that outlives it stops itself (:mod:`rlscale.launch.orphans`)."""

MIN_COLLECTIVE_TIMEOUT_S = 60.0
"""Floor of the collective timeout, so a short test ``--hang_timeout`` does not cut a slow rendezvous short."""


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


def collective_timeout(environ: Mapping[str, str] | None = None) -> datetime.timedelta | None:
    """Timeout of the process groups of a job: twice ``--hang_timeout``, at least a minute; None without a watchdog.

    Longer than the heartbeat watchdog, which names the stalled rank, so it is the backstop: for startup, which the
    watchdog does not time, and for a rank whose native collective never returns. None keeps torch's default.
    """
    env = os.environ if environ is None else environ
    hang_timeout = float(env.get(HANG_TIMEOUT_ENV) or 0)
    if hang_timeout <= 0:
        return None
    return datetime.timedelta(seconds=max(MIN_COLLECTIVE_TIMEOUT_S, 2 * hang_timeout))
