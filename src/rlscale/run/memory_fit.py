"""Whether a run's envs fit its device, estimated before the task is built.

The estimate is the task's footprint (:mod:`rlscale.tasks.footprint`) plus the library's rollout buffer, per env,
times the envs of every rank sharing the device (CPU ranks share their host's RAM), against the memory the device
has free now. It counts what any library keeps per env at the least, not its networks' activations nor its copies of
the batch: a run it refuses cannot fit, one it lets through may still run out of memory (the task's build then says so
in one line, :class:`rlscale.tasks.graph.TaskDoesNotFit`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rlscale.device import Device
from rlscale.dist import rank_device, rank_info
from rlscale.tasks.footprint import VALUE_BYTES, EnvFootprint

ACTION_VALUES_PER_STEP = 3
"""Per rollout step, the action, its distribution's mean and its standard deviation (rsl_rl's rollout storage)."""
STEP_SCALARS = 6
"""Per rollout step, the reward, done flag, value, return, advantage and the action's log-probability."""


def bytes_per_env(footprint: EnvFootprint, rollout_steps: int) -> int:
    """Bytes one env takes at the least: the task's own, and ``rollout_steps`` steps of the library's rollout buffer."""
    per_step = footprint.observations + ACTION_VALUES_PER_STEP * footprint.actions + STEP_SCALARS
    return footprint.task_bytes + rollout_steps * per_step * VALUE_BYTES


@dataclass(frozen=True)
class DeviceMemory:
    """The memory a device has free for a run."""

    free_bytes: int
    holder: str
    """Whose memory it is, as a refusal names it: ``this host's RAM``, ``cuda:0``, ``GPU 1``."""


MemoryProbe = Callable[[Device], "DeviceMemory | None"]
"""Reads a device's free memory; None when it cannot tell (the run is then not estimated)."""


def device_memory(device: Device) -> DeviceMemory:
    """The host's available RAM for the CPU (psutil), else the free memory of this process's GPU (torch, which opens
    a CUDA context on it: a launcher, whose ranks use other GPUs, reads NVML instead)."""
    if not device.is_cuda:
        import psutil

        return DeviceMemory(psutil.virtual_memory().available, "this host's RAM")
    import torch

    own = rank_device(device, rank_info(), torch.cuda.device_count())
    return DeviceMemory(torch.cuda.mem_get_info(own.index)[0], str(own))


def memory_shortfall(
    task_id: str, num_envs: int, per_env: int, ranks: int, library: str, memory: DeviceMemory
) -> str | None:
    """Why ``num_envs`` envs on each of ``ranks`` ranks sharing a device cannot fit its ``memory``, naming the estimate,
    the limit and the most envs that could fit; None when they may."""
    needed = num_envs * per_env * ranks
    if needed <= memory.free_bytes:
        return None
    sharing, each = (f" x {ranks} ranks", " per rank") if ranks > 1 else ("", "")
    return (
        f"--num_envs {num_envs}: {task_id} needs at least {size_text(needed)} ({size_text(per_env)} per env{sharing}: "
        f"the task and {library}'s rollout buffer), but {memory.holder} has {size_text(memory.free_bytes)} "
        f"available; at most {memory.free_bytes // (per_env * ranks)} envs{each} could fit"
    )


def size_text(size: float) -> str:
    """``size`` bytes in the largest binary unit under it: ``212 B``, ``1.0 KiB``, ``23.1 GiB``."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    power = 0
    while size >= 1024 and power < len(units) - 1:
        size, power = size / 1024, power + 1
    return f"{size:.0f} B" if power == 0 else f"{size:.1f} {units[power]}"
