"""The rank environment, read in one place, and what follows from a rank's place in the job: its device and GPU,
its process-group backend and collective timeout, and the job's env steps per iteration.

torchrun sets ``WORLD_SIZE``/``RANK``/``LOCAL_RANK``/``LOCAL_WORLD_SIZE``; skrl's JAX launcher sets ``JAX_WORLD_SIZE``/
``JAX_RANK``/``JAX_LOCAL_RANK``. A process started by neither is rank 0 of 1.
"""

from __future__ import annotations

import datetime
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from rlscale.device import Device

RUN_TIMESTAMP_ENV = "RLSCALE_RUN_TIMESTAMP"
"""Set by the launcher so that every rank of a job names the same run directory."""
STATUS_DIR_ENV = "RLSCALE_STATUS_DIR"
"""Set by the launcher: each rank leaves ``rank_<r>.json`` with its exit status there."""
HEARTBEAT_DIR_ENV = "RLSCALE_HEARTBEAT_DIR"
"""Set by the launcher: each rank keeps ``rank_<r>.heartbeat`` there (:mod:`rlscale.heartbeat`)."""
HANG_TIMEOUT_ENV = "RLSCALE_HANG_TIMEOUT"
"""Set by the launcher: its ``--hang_timeout`` in seconds (0: no watchdog), which sizes the collective timeout."""
SUPERVISOR_PID_ENV = "RLSCALE_SUPERVISOR_PID"
"""Set by the launcher: its pid; a rank that outlives it stops itself (:mod:`rlscale.launch.orphans`)."""

LOG_ALL_RANKS_ENV = "RLSCALE_LOG_ALL_RANKS"
"""Set (to 1) by the launcher for ``--log_all_ranks`` under torchrun: every rank prints its progress lines and its
library's output to the console, which torchrun shows prefixed with the rank (:func:`logs_all_ranks`)."""

PLACEMENT_ENV = "RLSCALE_PLACEMENT"
"""Set by the launcher (:mod:`rlscale.launch.placement`): its node's :class:`NodePlacement` as JSON, each rank's CPU
share indexed by local rank."""

ISOLATED_LOCAL_RANK_ENV = "RLSCALE_LOCAL_RANK"
"""Set by :func:`isolate_own_gpu`: the rank's local rank, which ``LOCAL_RANK`` no longer tells once it reads 0 for the
libraries; :func:`rank_info` reads it first, so it answers the same before and after the isolation."""

COLLECTIVE_TIMEOUT_ENV = "RLSCALE_COLLECTIVE_TIMEOUT"
"""Seconds: the collective timeout itself, instead of the one sized from ``--hang_timeout``; it also gives a job
without the watchdog (``--hang_timeout 0``) a backstop shorter than torch's default, as the backstop's test does."""

RESTART_COUNT_ENV = "TORCHELASTIC_RESTART_COUNT"
"""Set by torchrun for its workers: how often it restarted the worker group after a rank failed (``--max_restarts``)."""
MAX_RESTARTS_ENV = "TORCHELASTIC_MAX_RESTARTS"
"""Set by torchrun for its workers: the ``--max_restarts`` it was given."""

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
        local_rank=int(env.get(ISOLATED_LOCAL_RANK_ENV) or env.get(f"{prefix}LOCAL_RANK", "0")),
        world_size=world_size,
        local_world_size=local_world_size,
    )


def logs_all_ranks(environ: Mapping[str, str] | None = None) -> bool:
    """Whether every rank of this job prints to the console (``--log_all_ranks``), not only global rank 0."""
    return (os.environ if environ is None else environ).get(LOG_ALL_RANKS_ENV) == "1"


@dataclass(frozen=True)
class Attempt:
    """Which attempt of torchrun's worker group this process runs in: 0 is the first, and each restart after a failed
    rank counts one more, up to ``max_restarts``; outside torchrun, attempt 0 of 0."""

    number: int = 0
    max_restarts: int = 0

    @property
    def restarted(self) -> bool:
        return self.number > 0

    def describe(self) -> str:
        return f"restart {self.number} of {self.max_restarts}"


def worker_attempt(environ: Mapping[str, str] | None = None) -> Attempt:
    """This worker group's attempt, as torchrun counts it in the workers' environment."""
    env = os.environ if environ is None else environ
    return Attempt(int(env.get(RESTART_COUNT_ENV) or 0), int(env.get(MAX_RESTARTS_ENV) or 0))


def rank_cuda_index(rank: RankInfo, cuda_device_count: int) -> int:
    """Index of this rank's GPU among those it sees: its local rank, or 0 when each rank sees only its own GPU."""
    return rank.local_rank if rank.local_rank < cuda_device_count else 0


def rank_device(requested: Device, rank: RankInfo, cuda_device_count: int) -> Device:
    """This rank's device: ``cuda:{rank_cuda_index}`` in a distributed job; CPU stays CPU, a lone rank keeps
    ``requested``."""
    if not requested.is_cuda or not rank.distributed:
        return requested
    return Device("cuda", rank_cuda_index(rank, cuda_device_count))


def global_env_steps(steps_per_env: int, envs_per_rank: int, world_size: int) -> int:
    """Env steps of one iteration over all ranks: ``steps_per_env`` (the rollout length) on each rank's envs."""
    return steps_per_env * envs_per_rank * world_size


@dataclass(frozen=True)
class CpuShare:
    """The CPUs one rank is bound to, and the threads it runs on them."""

    cpus: tuple[int, ...]
    threads: int


@dataclass(frozen=True)
class NodePlacement:
    """How a node's launcher placed its ranks: the ``--cpu_binding`` mode, where the GPUs' CPU affinity came from
    (``nvml``, or ``none`` when NVML could not tell or was not asked), and each local rank's CPU share (none: the
    ranks are left unbound)."""

    binding: str
    gpu_affinity: str
    shares: tuple[CpuShare, ...] = ()

    def to_json(self) -> str:
        shares = [{"cpus": list(share.cpus), "threads": share.threads} for share in self.shares]
        return json.dumps({"binding": self.binding, "gpu_affinity": self.gpu_affinity, "shares": shares})

    @classmethod
    def from_json(cls, text: str) -> NodePlacement:
        data = json.loads(text)
        shares = tuple(CpuShare(tuple(share["cpus"]), share["threads"]) for share in data["shares"])
        return cls(data["binding"], data["gpu_affinity"], shares)

    def share_of(self, local_rank: int) -> CpuShare | None:
        return self.shares[local_rank] if local_rank < len(self.shares) else None


def node_placement(environ: Mapping[str, str] | None = None) -> NodePlacement | None:
    """The launcher's placement of this node's ranks (``$RLSCALE_PLACEMENT``); None for a process it did not place."""
    text = (os.environ if environ is None else environ).get(PLACEMENT_ENV)
    return None if not text else NodePlacement.from_json(text)


def own_gpu_variables(environ: Mapping[str, str], rank: RankInfo) -> dict[str, str]:
    """The variables that leave a CUDA rank only its own GPU, as ``cuda:0``: ``CUDA_VISIBLE_DEVICES`` narrowed to the
    local rank's entry and ``LOCAL_RANK`` 0, since rsl_rl, rl_games and skrl bind ``cuda:{LOCAL_RANK}``; the local
    rank itself moves to :data:`ISOLATED_LOCAL_RANK_ENV`, where :func:`rank_info` (and the placement, indexed by it)
    still finds it.

    A rank that already sees one GPU (a scheduler bound it) keeps it.

    Raises:
        ValueError: when ``CUDA_VISIBLE_DEVICES`` lists fewer GPUs than the local rank needs.
    """
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    visible = None if listed is None else [entry.strip() for entry in listed.split(",") if entry.strip()]
    if visible is None:
        own = str(rank.local_rank)
    elif len(visible) == 1:
        own = visible[0]
    elif rank.local_rank < len(visible):
        own = visible[rank.local_rank]
    else:
        raise ValueError(f"local rank {rank.local_rank} has no GPU: CUDA_VISIBLE_DEVICES={listed!r}")
    return {"CUDA_VISIBLE_DEVICES": own, "LOCAL_RANK": "0", ISOLATED_LOCAL_RANK_ENV: str(rank.local_rank)}


def isolate_own_gpu() -> None:
    """Leave this rank of a job only its own GPU (:func:`own_gpu_variables`); a no-op alone.

    CUDA reads ``CUDA_VISIBLE_DEVICES`` once, when the process first asks it anything, so this must run before any
    ``torch.cuda`` call (even ``is_available``) and before JAX starts.

    Raises:
        RuntimeError: when CUDA had already started and still shows this rank more than one GPU.
    """
    rank = rank_info()
    if not rank.distributed:
        return
    os.environ.update(own_gpu_variables(os.environ, rank))
    import torch

    # Ask the CUDA runtime itself: torch.cuda.device_count() counts through NVML and the variable just set.
    if torch.cuda._is_compiled() and torch._C._cuda_getDeviceCount() > 1:
        raise RuntimeError("CUDA started before this rank's GPU was isolated; isolate_own_gpu must run first")


def collective_timeout(environ: Mapping[str, str] | None = None) -> datetime.timedelta | None:
    """Timeout of the process groups of a job: ``$RLSCALE_COLLECTIVE_TIMEOUT`` seconds if set, else twice
    ``--hang_timeout`` and at least a minute; None without a watchdog.

    Longer than the heartbeat watchdog, which names the stalled rank, so it is the backstop: for startup, which the
    watchdog does not time, and for a rank whose native collective never returns. None keeps torch's default (30 min
    on gloo, 10 min on NCCL).

    Raises:
        ValueError: for a variable that is not a number of seconds (:func:`rlscale.run.args.check_options` refuses it
            before a launch).
    """
    env = os.environ if environ is None else environ
    collective = env_seconds(env, COLLECTIVE_TIMEOUT_ENV, allow_zero=False)
    if collective is not None:
        return datetime.timedelta(seconds=collective)
    hang_timeout = env_seconds(env, HANG_TIMEOUT_ENV, allow_zero=True) or 0.0
    if hang_timeout <= 0:
        return None
    return datetime.timedelta(seconds=max(MIN_COLLECTIVE_TIMEOUT_S, 2 * hang_timeout))


def env_seconds(
    env: Mapping[str, str], name: str, *, allow_zero: bool, when_unset: str = "for the default"
) -> float | None:
    """``$name`` as a finite number of seconds, None when unset or empty (``when_unset`` says what that means).

    Raises:
        ValueError: one line naming the variable, its value and what it must be.
    """
    raw = env.get(name)
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value >= 0 if allow_zero else value > 0) or not math.isfinite(value):
        least = ">= 0 (0: none)" if allow_zero else "> 0"
        raise ValueError(f"{name}={raw!r} must be a number of seconds {least}; unset it {when_unset}")
    return value
