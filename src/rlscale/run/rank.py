"""A rank's process setup, shared by training, the benchmarks and ``nccl_probe``: its GPU, CPUs, threads and process
group.

Torch is imported inside the functions, so that resolving a run's spec on a launcher stays torch-free.
"""

from __future__ import annotations

import os

from rlscale.device import Device
from rlscale.dist import CpuShare, RankInfo, collective_timeout, isolate_own_gpu, node_placement, rank_device
from rlscale.tasks import get_spec


def isolate_gpu_if_task_asks(task_id: str, device: Device | None, ml_framework: str) -> None:
    """Show this rank of a CUDA job (``device`` None: CUDA if there is a GPU) only its own GPU, unless its task opts
    out (:attr:`~rlscale.tasks.registry.TaskSpec.ranks_see_all_gpus`). The one place a rank's GPU is isolated: a rank
    calls it before anything asks CUDA, resolving its spec included.

    skrl's JAX ranks are left alone: ``jax.distributed`` binds their GPU by ``JAX_LOCAL_RANK`` instead.

    Raises:
        UnknownTaskError: for a task id that is not registered.
        ValueError: from :func:`rlscale.dist.own_gpu_variables`.
    """
    on_cuda = device is None or device.is_cuda
    if on_cuda and ml_framework == "torch" and not get_spec(task_id).ranks_see_all_gpus:
        isolate_own_gpu()


def default_cpu_threads(device: Device, local_world_size: int) -> int:
    """Threads of an unbound rank: one per CPU rank (each rank is one core's worth of work); GPU ranks share the
    host's cores."""
    return max(1, (os.cpu_count() or 1) // local_world_size) if device.is_cuda else 1


def bind_cpus(rank: RankInfo) -> CpuShare | None:
    """Bind this process to its share of the CPUs, if its launcher planned one (:func:`rlscale.dist.node_placement`).

    Threads started afterwards (torch's and OpenMP's pools) inherit the binding, so this runs before torch computes.
    """
    placement = node_placement()
    share = None if placement is None else placement.share_of(rank.local_rank)
    if share is not None:
        os.sched_setaffinity(0, share.cpus)
    return share


def place_rank(rank: RankInfo, requested_device: Device, cpu_threads: int | None) -> Device:
    """Put this rank (:func:`rlscale.dist.rank_info`) on its device (``cuda:{local_rank}``, or the one GPU it sees) and
    its CPUs, with a thread per CPU (``cpu_threads`` if given; unbound, :func:`default_cpu_threads`).

    Returns:
        Its torch device.
    """
    share = bind_cpus(rank)
    import torch

    cuda_devices = torch.cuda.device_count() if requested_device.is_cuda else 0
    device = rank_device(requested_device, rank, cuda_devices)
    default_threads = share.threads if share is not None else default_cpu_threads(device, rank.local_world_size)
    torch.set_num_threads(cpu_threads or default_threads)
    if device.is_cuda:
        torch.cuda.set_device(torch.device(str(device)))
    return device


def join_process_group(rank: RankInfo, device: Device) -> None:
    """Join the job's process group (gloo for CPU ranks, NCCL for CUDA ones), with the job's collective timeout."""
    import torch.distributed as dist

    dist.init_process_group(device.backend, rank=rank.rank, world_size=rank.world_size, timeout=collective_timeout())


def allow_tf32(device: Device) -> bool:
    """Let CUDA run float32 matmuls and cuDNN convolutions in TF32; returns whether that applies (not on the CPU).

    ``set_float32_matmul_precision`` works from torch 2.6 to 2.13 without a warning and keeps
    ``torch.get_float32_matmul_precision``, which inductor's autotuning reads, answering; setting only the newer
    ``torch.backends.cuda.matmul.fp32_precision`` makes that call raise. cuDNN allows TF32 by default; set anyway.
    """
    if not device.is_cuda:
        return False
    import torch

    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True
    return True
