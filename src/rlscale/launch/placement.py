"""Rank placement, planned by each node's launcher for its own ranks: a share of the host's CPUs per local rank, near
its GPU, with as many threads as it has CPUs.

:func:`plan_cpu_shares` is the pure plan; :func:`plan_node` reads what it needs from the host (the CPUs this process
may use, which respects SLURM's cgroup and ``taskset``; each GPU's CPU affinity through NVML; which CPUs are threads
of one core). Torch-free, so that ``--dry_run`` stays fast. The launcher hands the plan to its ranks in
``$RLSCALE_PLACEMENT`` (:class:`rlscale.dist.NodePlacement`), each rank applies its share
(:func:`rlscale.run.rank.place_rank`) and its manifest records what is in effect.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from pathlib import Path

from rlscale.device import Device
from rlscale.dist import PLACEMENT_ENV, CpuShare, NodePlacement
from rlscale.launch.gpus import gpu_cpu_affinities

CPU_BINDINGS = ("auto", "none")
"""``--cpu_binding``: ``auto`` binds each rank to its CPU share; ``none`` leaves the ranks unbound, with
``cpus // local ranks`` threads per GPU rank and 1 per CPU rank."""

CPU_SYSFS = Path("/sys/devices/system/cpu")

AffinityReader = Callable[[Sequence[str]], Sequence[Iterable[int]]]
"""Returns the CPU affinity of each GPU named as in ``CUDA_VISIBLE_DEVICES``; raises when it cannot tell."""


def plan_cpu_shares(
    local_world_size: int,
    available_cpus: Iterable[int],
    gpu_affinities: Sequence[Iterable[int]] | None = None,
    core_of: Mapping[int, int] | None = None,
) -> tuple[CpuShare, ...]:
    """Split the CPUs over a node's ranks, one :class:`CpuShare` per local rank.

    Ranks whose GPUs have the same affinity split that set (within ``available_cpus``) into equal contiguous chunks;
    without affinities (NVML could not tell) all ranks split ``available_cpus``. A GPU whose affinity has no available
    CPU counts as having none. With fewer CPUs than ranks, ranks share CPUs, one each.

    Args:
        local_world_size: Ranks on this node.
        available_cpus: CPUs the launcher may use.
        gpu_affinities: CPU affinity of each local rank's GPU, or None.
        core_of: CPU → an id of its physical core; threads of one core are kept next to each other, so that a chunk
            boundary does not give two ranks the two threads of one core.
    """
    available = frozenset(available_cpus)
    if gpu_affinities is None:
        targets = [available] * local_world_size
    else:
        targets = [frozenset(affinity) & available or available for affinity in gpu_affinities]
    ranks_by_target: dict[frozenset[int], list[int]] = {}
    for local_rank, target in enumerate(targets):
        ranks_by_target.setdefault(target, []).append(local_rank)
    shares: dict[int, CpuShare] = {}
    core_of = core_of or {}
    for target, local_ranks in ranks_by_target.items():
        ordered = sorted(target, key=lambda cpu: (core_of.get(cpu, cpu), cpu))
        for position, local_rank in enumerate(local_ranks):
            chunk = _chunk(ordered, position, len(local_ranks))
            shares[local_rank] = CpuShare(tuple(sorted(chunk)), len(chunk))
    return tuple(shares[local_rank] for local_rank in range(local_world_size))


def _chunk(ordered: list[int], position: int, parts: int) -> list[int]:
    """The ``position``-th of ``parts`` near-equal contiguous chunks of ``ordered``; one shared CPU when too few."""
    if len(ordered) < parts:
        return [ordered[position * len(ordered) // parts]]
    return ordered[position * len(ordered) // parts : (position + 1) * len(ordered) // parts]


def parse_cpu_list(text: str) -> list[int]:
    """CPUs of a Linux CPU list (``0-3,8,10-11``), as sysfs and ``taskset -c`` write them."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def format_cpu_list(cpus: Iterable[int]) -> str:
    """A Linux CPU list of ``cpus``: runs written ``first-last``."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)


def read_core_of(cpus: Iterable[int], sysfs: Path = CPU_SYSFS) -> dict[int, int]:
    """CPU → the lowest CPU among the threads of its core (sysfs ``thread_siblings_list``); CPUs sysfs does not
    describe are left out."""
    core_of = {}
    for cpu in cpus:
        try:
            siblings = parse_cpu_list((sysfs / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text())
        except (OSError, ValueError):
            continue
        core_of[cpu] = min(siblings, default=cpu)
    return core_of


def local_gpu_ids(environ: Mapping[str, str], local_world_size: int) -> list[str]:
    """Each local rank's GPU, named as in ``CUDA_VISIBLE_DEVICES`` (its entry, else its index)."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(index) for index in range(local_world_size)]
    return [entry.strip() for entry in listed.split(",") if entry.strip()][:local_world_size]


def plan_node(
    binding: str,
    local_world_size: int,
    on_cpu: bool,
    environ: Mapping[str, str],
    *,
    available_cpus: Iterable[int] | None = None,
    read_affinities: AffinityReader = gpu_cpu_affinities,
    core_of: Mapping[int, int] | None = None,
) -> NodePlacement:
    """Plan the placement of this node's ranks (:func:`plan_cpu_shares`) for ``--cpu_binding binding``.

    Args:
        binding: One of :data:`CPU_BINDINGS`.
        local_world_size: Ranks on this node.
        on_cpu: Whether the ranks are CPU processes: those are left unbound, to the kernel's balancing, as a job cannot
            see the other jobs on its host.
        environ: Environment of the launch (``CUDA_VISIBLE_DEVICES``).
        available_cpus: CPUs the launcher may use; default ``os.sched_getaffinity(0)``.
        read_affinities: Reads the GPUs' CPU affinity (NVML).
        core_of: CPU → its core; default read from sysfs.
    """
    if binding == "none":
        return NodePlacement("none", "none")
    if on_cpu:  # other jobs share this host's cores; pinning each job's ranks to the same CPUs would pile them up
        return NodePlacement("auto", "none")
    available = sorted(os.sched_getaffinity(0) if available_cpus is None else available_cpus)
    try:
        affinities = read_affinities(local_gpu_ids(environ, local_world_size))
    except Exception:  # no driver, no library, a MIG id: the CPUs are still split, only not by GPU
        affinities = None
    core_of = read_core_of(available) if core_of is None else core_of
    shares = plan_cpu_shares(local_world_size, available, affinities, core_of)
    return NodePlacement("auto", "none" if affinities is None else "nvml", shares)


def describe_placement(placement: NodePlacement) -> list[str]:
    """One console line per local rank (one in all for unbound ranks)."""
    if not placement.shares:
        return [f"[INFO] cpu binding {placement.binding}: ranks left unbound"]
    return [
        f"[INFO] cpu binding {placement.binding}: local rank {local_rank}: {describe_share(share)}; "
        f"GPU affinity: {placement.gpu_affinity}"
        for local_rank, share in enumerate(placement.shares)
    ]


def describe_share(share: CpuShare) -> str:
    """``CPU 3 (1 thread)``, ``CPUs 0-15 (16 threads)``, ``CPUs 0,2 (2 threads)``: the thread count in brackets, so
    that it never reads as one more CPU of the list."""
    cpus = f"CPU {share.cpus[0]}" if len(share.cpus) == 1 else f"CPUs {format_cpu_list(share.cpus)}"
    threads = "1 thread" if share.threads == 1 else f"{share.threads} threads"
    return f"{cpus} ({threads})"


def bind_this_process(
    device: Device | None,
    environ: MutableMapping[str, str] = os.environ,
    read_affinities: AffinityReader = gpu_cpu_affinities,
) -> None:
    """Place a process no launcher started (``rlscale train``, a single-process benchmark) as local rank 0 of 1: on
    its GPU's CPUs, when NVML tells which they are. A CPU process, one NVML cannot tell about, and one that already
    has a placement are left as they are.

    Args:
        device: The process's ``--device`` (None: CUDA if there is a GPU).
        environ: Where ``$RLSCALE_PLACEMENT`` is set, for :func:`rlscale.run.rank.place_rank` to apply.
        read_affinities: Reads the GPU's CPU affinity (NVML).
    """
    if PLACEMENT_ENV in environ or (device is not None and not device.is_cuda):
        return
    index = 0 if device is None else device.index or 0
    gpu = local_gpu_ids(environ, index + 1)[index:]
    if not gpu:  # the run refuses a device it cannot see
        return
    placement = plan_node("auto", 1, False, {"CUDA_VISIBLE_DEVICES": gpu[0]}, read_affinities=read_affinities)
    if placement.gpu_affinity == "nvml":
        environ[PLACEMENT_ENV] = placement.to_json()
