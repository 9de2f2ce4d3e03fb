"""How many ranks a node runs and how many GPUs they need: ``--num_gpus N|gpu|auto|cpu`` resolved against the GPUs
and CPUs this node has, and the split of a world size over nodes that study jobs ask for.

Torch-free, like :mod:`rlscale.launch.gpus` that counts the GPUs, so that a launcher's ``--dry_run`` stays fast.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rlscale.device import requested_kind
from rlscale.launch.gpus import NVML_LIBRARY, GpuCounter, nvidia_hardware_present, nvml_device_count, visible_gpu_count

GpuEvidence = Callable[[], str | None]
"""Returns evidence that the host has NVIDIA GPUs (``/dev/nvidia0 exists``), or None."""

NPROC_KEYWORDS = ("gpu", "cpu", "auto")
"""torchrun's keywords for ``--nproc_per_node``, accepted by ``--num_gpus``."""


@dataclass(frozen=True)
class NodeSplit:
    """A job's world size over its nodes: ``ranks_per_node`` ranks on each of ``nodes``, the one split that the study's
    rules (resources), its job launchers (grant, ``--num_gpus``) and the plan all read.

    Raises:
        ValueError: If ``nodes`` does not divide ``world_size``.
    """

    world_size: int
    nodes: int = 1

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.world_size % self.nodes:
            raise ValueError(f"world size {self.world_size} does not split evenly over {self.nodes} node(s)")

    @property
    def ranks_per_node(self) -> int:
        """Ranks each node runs (its launcher's ``--num_gpus``)."""
        return self.world_size // self.nodes

    def gpus_per_node(self, device: str) -> int:
        """GPUs each node needs: one per local rank on ``cuda``, none for CPU ranks."""
        return 0 if device == "cpu" else self.ranks_per_node


def available_cpus() -> int:
    """CPUs this process may run on, as torchrun counts them for ``--nproc_per_node cpu``."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def cpu_ranks_short_of_cores(ranks: int, cores: int) -> str | None:
    """The one rule for CPU ranks on a host, which the study and the launchers keep: each needs a core of its own, or
    they share cores and their timings mean nothing. Why ``ranks`` break it on ``cores``, as a phrase; None when they
    keep it."""
    return f"CPU ranks need a core each, and this host has {cores}" if ranks > cores else None


def _count(raw: str) -> int:
    """``--num_gpus N`` as an integer >= 1."""
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(
            f"--num_gpus/--nproc_per_node must be an integer >= 1, got {raw!r}; or torchrun's gpu, cpu or auto; omit "
            "it to use every visible GPU (1 process with --device cpu)."
        )
    return int(raw)


def resolve_ranks(
    num_gpus: str | int | None,
    device: str | None,
    *,
    jax: bool,
    dry_run: bool,
    environ: Mapping[str, str],
    nvml_count: GpuCounter = nvml_device_count,
    gpu_evidence: GpuEvidence = nvidia_hardware_present,
) -> tuple[int | str, bool]:
    """Return the ranks per node of ``--num_gpus`` and whether they run on the CPU.

    ``num_gpus`` is a count, a torchrun keyword or ``None`` (every visible GPU; 1 process with ``--device cpu``);
    ``cpu``, and ``auto`` without a visible GPU, make CPU ranks. The count is an ``int``, except for a dry run with
    no GPU countable here (``CUDA_VISIBLE_DEVICES`` unset, NVML finds none): there it stays ``gpu`` for torchrun to
    count on the node that runs the job, since a login node preparing a job has no GPU.

    Args:
        num_gpus: The launcher's ``--num_gpus``.
        device: The ``--device`` forwarded to the ranks, if any.
        jax: Whether skrl's JAX launcher starts the ranks; it takes a number, not torchrun's ``gpu``.
        dry_run: Whether the command is only printed.
        environ: Environment of the launch (``CUDA_VISIBLE_DEVICES``).
        nvml_count: GPU counter used when ``CUDA_VISIBLE_DEVICES`` is unset.
        gpu_evidence: Evidence of NVIDIA hardware, named in the error when NVML counts no GPU.

    Raises:
        ValueError: naming the option, the value and the fix, for a request this node cannot run.
    """
    raw = None if num_gpus is None else str(num_gpus)
    keyword = raw if raw in NPROC_KEYWORDS else None
    requested = _count(raw) if raw is not None and keyword is None else None
    device_kind = None if device is None else requested_kind(device)
    if keyword == "gpu" and device_kind == "cpu":
        raise ValueError(
            "--num_gpus gpu counts GPUs, but --device cpu makes the ranks CPU processes; pass the number of processes "
            "(e.g. --num_gpus 2) or --num_gpus cpu."
        )
    if keyword == "cpu" and device_kind not in (None, "cpu"):
        raise ValueError(f"--num_gpus cpu starts CPU processes, but --device {device} is forwarded; drop --device.")
    if device_kind == "cpu" or keyword == "cpu":
        return ((requested or 1) if keyword is None else available_cpus()), True
    cpu_fallback = keyword == "auto" and device_kind is None  # a forwarded GPU --device makes auto gpu
    visible, source = visible_gpu_count(environ, nvml_count)
    uncountable = visible == 0 and "CUDA_VISIBLE_DEVICES" not in environ
    if uncountable and dry_run and not cpu_fallback and (requested or not jax):
        return requested or "gpu", False
    if visible == 0:
        # NVIDIA hardware that NVML did not count is named, so that a broken driver setup is not taken for no GPU.
        evidence = None if "CUDA_VISIBLE_DEVICES" in environ else gpu_evidence()
        if cpu_fallback and evidence is None:
            return available_cpus(), True
        if evidence is not None:
            source += f", although {evidence}: is the NVIDIA driver's {NVML_LIBRARY} on the library path?"
        if cpu_fallback:
            raise ValueError(f"--num_gpus auto finds no GPU ({source}); to run CPU processes, pass --num_gpus cpu.")
        asked = f"--num_gpus={raw}" if raw else "the default --num_gpus (all visible GPUs)"
        raise ValueError(
            f"{asked} needs a GPU but none is visible ({source}); pass --device cpu to run the ranks as CPU "
            "processes (gloo), or expose GPUs via CUDA_VISIBLE_DEVICES."
        )
    if requested is not None and requested > visible:
        raise ValueError(
            f"--num_gpus/--nproc_per_node={requested} exceeds the {visible} GPU(s) visible ({source}); lower "
            "--num_gpus or expose more devices via CUDA_VISIBLE_DEVICES (e.g. CUDA_VISIBLE_DEVICES=0,1,2,3)."
        )
    return requested or visible, False
