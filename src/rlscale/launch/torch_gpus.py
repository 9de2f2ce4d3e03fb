"""Whether the torch that the ranks run can use the GPUs that a launch gives them.

The launcher's own counts (:mod:`rlscale.launch.ranks`) come from ``CUDA_VISIBLE_DEVICES`` and NVML, which know
nothing of torch: a CPU build of torch, or a ``CUDA_VISIBLE_DEVICES`` naming devices the driver does not have, would
let GPU ranks quietly fall back to the CPU. This asks torch itself, so only a real launch calls it (never a
``--dry_run``, which stays torch-free).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class TorchGpus:
    """What this interpreter's torch offers the ranks."""

    version: str
    """``torch.__version__``."""
    build: str | None
    """The CUDA (or ROCm) version torch was built with; None for a CPU-only build."""
    devices: int
    """CUDA devices torch sees under this environment's ``CUDA_VISIBLE_DEVICES``."""


TorchGpuProbe = Callable[[], TorchGpus]


def probe_torch_gpus() -> TorchGpus:
    """Ask this interpreter's torch (imported here) about CUDA; it creates no CUDA context."""
    import torch

    build = torch.version.cuda or getattr(torch.version, "hip", None)
    devices = torch.cuda.device_count() if build and torch.cuda.is_available() else 0
    return TorchGpus(torch.__version__, build, devices)


def gpu_rank_shortfall(ranks: int, source: str, torch_gpus: TorchGpus) -> str | None:
    """Why ``ranks`` GPU ranks cannot run on this node's torch, in one line; None when they can.

    Args:
        ranks: GPU ranks this node starts.
        source: Where the launcher counted the GPUs (``CUDA_VISIBLE_DEVICES='0,1'``, ``NVML``).
        torch_gpus: What torch offers (:func:`probe_torch_gpus`).
    """
    asked = f"{ranks} GPU rank(s) asked for ({source})"
    fix = "or pass --device cpu to run the ranks as CPU processes (gloo)"
    if torch_gpus.build is None:
        return f"{asked}, but torch {torch_gpus.version} was built without CUDA; install a CUDA build of torch, {fix}."
    if torch_gpus.devices == 0:
        return (
            f"{asked}, but torch {torch_gpus.version} (CUDA {torch_gpus.build}) sees no CUDA device: no driver, or "
            f"CUDA_VISIBLE_DEVICES names none that exists; list devices of `nvidia-smi -L`, {fix}."
        )
    if torch_gpus.devices < ranks:
        return (
            f"{asked}, but torch sees only {torch_gpus.devices} CUDA device(s): CUDA_VISIBLE_DEVICES names devices "
            f"torch cannot see; list devices of `nvidia-smi -L`, lower --num_gpus, {fix}."
        )
    return None
