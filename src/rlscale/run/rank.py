"""A rank's process setup, shared by training, the benchmarks and ``nccl_probe``: its GPU, threads and process group.

Torch is imported inside the functions, so that resolving a run's spec on a launcher stays torch-free.
"""

from __future__ import annotations

import os

from rlscale.dist import RankInfo, collective_timeout, isolate_own_gpu, process_group_backend, rank_device, rank_info
from rlscale.tasks import get_spec


def isolate_gpu_if_task_asks(task_id: str, device: str | None, ml_framework: str) -> None:
    """Show this rank only its own GPU when its task asks (:attr:`~rlscale.tasks.registry.TaskSpec.own_gpu_per_rank`).

    skrl's JAX ranks are left alone: ``jax.distributed`` binds their GPU by ``JAX_LOCAL_RANK`` instead.

    Raises:
        UnknownTaskError: for a task id that is not registered.
        ValueError: from :func:`rlscale.dist.own_gpu_variables`.
    """
    if ml_framework == "torch" and get_spec(task_id).own_gpu_per_rank:
        isolate_own_gpu(device or "cuda")


def default_cpu_threads(device: str, local_world_size: int) -> int:
    """One thread per CPU rank (each rank is one core's worth of work); GPU ranks share the host's cores."""
    return 1 if device == "cpu" else max(1, (os.cpu_count() or 1) // local_world_size)


def place_rank(requested_device: str, cpu_threads: int | None) -> tuple[RankInfo, str]:
    """Put this rank on its device (``cuda:{local_rank}``, or the one GPU it sees) with its share of CPU threads.

    Returns:
        The rank and its torch device.
    """
    import torch

    rank = rank_info()
    cuda_devices = torch.cuda.device_count() if requested_device != "cpu" else 0
    device = rank_device(requested_device, rank, cuda_devices)
    torch.set_num_threads(cpu_threads or default_cpu_threads(device, rank.local_world_size))
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    return rank, device


def join_process_group(rank: RankInfo, device: str) -> None:
    """Join the job's process group (gloo for CPU ranks, NCCL for CUDA ones), with the job's collective timeout."""
    import torch.distributed as dist

    backend = process_group_backend(device)
    dist.init_process_group(backend, rank=rank.rank, world_size=rank.world_size, timeout=collective_timeout())
