"""CPU/gloo shims for libraries whose distributed code assumes NCCL and CUDA, and the job's collective timeout.

The libraries hard-code ``init_process_group("nccl")`` and ``torch.cuda.set_device``, so none of them can run
multi-process on CPU as shipped; :func:`use_gloo_for_cpu_ranks` covers every library that creates its process group
through ``torch.distributed``. The rest are one library's own quirk, named after it and used by its adapter and its peer
script. Everything here but :func:`use_collective_timeout` acts only when the ranks run on the CPU; on CUDA the
libraries' own NCCL path runs untouched apart from that timeout.
"""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist

from rlscale.device import Device
from rlscale.dist import RankInfo, rank_cuda_index

_installed = False
_timeout_installed = False


def use_collective_timeout(timeout: datetime.timedelta | None) -> None:
    """Give every process group created without a ``timeout`` this one, on every backend; None changes nothing.

    The libraries create their process groups without a timeout, so torch's defaults (30 min on gloo, 10 min on NCCL)
    would apply whatever ``--hang_timeout`` says; :func:`rlscale.dist.collective_timeout` sizes this one from it. Like
    :func:`use_gloo_for_cpu_ranks`, it must run before ``import skrl``.
    """
    global _timeout_installed
    if timeout is None or _timeout_installed:
        return
    _timeout_installed = True
    original_init = dist.init_process_group

    def init_process_group(*args, **kwargs):
        if len(args) < 3:  # timeout is the third positional parameter
            kwargs.setdefault("timeout", timeout)
        return original_init(*args, **kwargs)

    dist.init_process_group = init_process_group


def use_gloo_for_cpu_ranks(device: str) -> None:
    """Route the libraries' NCCL process-group init to gloo and make ``cuda.set_device`` a no-op, on CPU ranks.

    Must run before ``import skrl``, which creates the process group at import time when ``WORLD_SIZE > 1``.
    """
    global _installed
    if not str(device).startswith("cpu") or _installed:
        return
    _installed = True
    original_init = dist.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        return original_init("gloo" if backend in (None, "nccl") else backend, *args, **kwargs)

    dist.init_process_group = init_process_group
    torch.cuda.set_device = lambda *args, **kwargs: None


class CpuPinnedConfig(dict):
    """rl_games config dict that keeps ``device`` on the CPU.

    With ``multi_gpu`` rl_games overwrites ``config['device']`` with ``cuda:LOCAL_RANK``; this subclass survives
    rl_games' deepcopy of the params and ignores that write.
    """

    def __setitem__(self, key, value):
        if key == "device" and str(value).startswith("cuda"):
            value = "cpu"
        super().__setitem__(key, value)


def configure_rsl_rl_runner(runner, rank: RankInfo) -> None:
    """Replacement for ``OnPolicyRunner._configure_multi_gpu`` that picks gloo for CPU ranks.

    rsl_rl raises unless ``device == cuda:LOCAL_RANK`` and always uses NCCL; this keeps its bookkeeping
    (``gpu_*`` attributes, ``cfg["multi_gpu"]``) identical and only chooses the backend by device. rsl_rl reads the
    rank variables itself; this takes the rank's place from the caller, who resolved it once.
    """
    runner.gpu_world_size = rank.world_size
    runner.is_distributed = rank.distributed
    if not runner.is_distributed:
        runner.gpu_local_rank = runner.gpu_global_rank = 0
        runner.cfg["multi_gpu"] = None
        return
    # rsl_rl's local rank is the index of the rank's GPU: 0 once the rank sees only its own GPU.
    device = Device.parse(str(runner.device))
    runner.gpu_local_rank = rank_cuda_index(rank, torch.cuda.device_count()) if device.is_cuda else rank.local_rank
    runner.gpu_global_rank = rank.rank
    runner.cfg["multi_gpu"] = {
        "global_rank": runner.gpu_global_rank,
        "local_rank": runner.gpu_local_rank,
        "world_size": runner.gpu_world_size,
    }
    if not dist.is_initialized():
        dist.init_process_group(device.backend, rank=runner.gpu_global_rank, world_size=runner.gpu_world_size)
