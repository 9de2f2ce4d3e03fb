"""The ``resources`` section: a 1 Hz background sampler of the rank-0 process and its node's GPUs.

CPU and memory come from psutil for this process only (CPU % is summed over cores, so it can exceed 100). GPU
utilisation and memory come from NVML for whole devices, other processes included. Without NVML, or on a CPU run,
the GPU fields are null: a missing measurement is never replaced by an estimate.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence

import psutil

from rlscale.benchmark.stats import mean_std
from rlscale.manifest import cuda_uuid

GIB = float(2**30)
INTERVAL_S = 1.0


def visible_cuda_devices() -> list[tuple[int, str | None]]:
    """``(cuda index, NVML UUID or None)`` of every GPU this process sees, in CUDA's order."""
    import torch

    return [(index, cuda_uuid(index)) for index in range(torch.cuda.device_count())]


def _nvml_handles(devices: Sequence[tuple[int, str | None]]):
    """NVML module and one handle per CUDA index; None when NVML cannot be used.

    CUDA orders devices fastest-first and NVML by PCI bus, so a handle is found by UUID; failing that, by the
    ``CUDA_VISIBLE_DEVICES`` entry, and only then by the CUDA index itself.
    """
    try:
        import pynvml  # nvidia-ml-py; lazy, it is only needed on GPU runs

        pynvml.nvmlInit()
    except Exception:  # no package, driver or library: the GPU fields stay null
        return None, {}
    masked = [entry.strip() for entry in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    handles = {}
    for index, uuid in devices:
        candidates = []
        if uuid:
            candidates.append(lambda uuid=uuid: pynvml.nvmlDeviceGetHandleByUUID(uuid))
        if index < len(masked) and masked[index].isdigit():
            candidates.append(lambda entry=int(masked[index]): pynvml.nvmlDeviceGetHandleByIndex(entry))
        elif not masked:
            candidates.append(lambda index=index: pynvml.nvmlDeviceGetHandleByIndex(index))
        for candidate in candidates:
            with contextlib.suppress(Exception):
                handles[index] = candidate()
                break
    return pynvml, handles


class ResourceSampler:
    """Samples every ``interval`` seconds from :meth:`start` on a daemon thread, and once more at :meth:`stop`.

    Args:
        gpu_devices: ``(cuda index, uuid)`` of every GPU on the node; empty on a CPU run.
        own_gpu: CUDA index of this process's device (the top-level ``gpu_*`` fields), or None on the CPU.
        interval: Seconds between samples.
    """

    def __init__(
        self, gpu_devices: Sequence[tuple[int, str | None]], own_gpu: int | None, interval: float = INTERVAL_S
    ) -> None:
        self.interval = interval
        self.own_gpu = own_gpu
        self.gpu_indices = [index for index, _ in gpu_devices]
        self._nvml, self._handles = _nvml_handles(gpu_devices) if gpu_devices else (None, {})
        self._process = psutil.Process()
        self._cpu: list[float] = []
        self._ram: list[float] = []
        self._gpu_util: dict[int, list[float]] = {index: [] for index in self.gpu_indices}
        self._gpu_mem: dict[int, list[float]] = {index: [] for index in self.gpu_indices}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rlscale-resources", daemon=True)

    def start(self) -> ResourceSampler:
        self._process.cpu_percent(None)  # the first call only sets the reference point
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        """Take one sample of every source (also called by the thread)."""
        self._cpu.append(self._process.cpu_percent(None))
        self._ram.append(self._process.memory_info().rss / GIB)
        for index, handle in self._handles.items():
            with contextlib.suppress(Exception):  # a transient NVML error loses one sample, not the run
                util = self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu
                used = self._nvml.nvmlDeviceGetMemoryInfo(handle).used / GIB
                self._gpu_util[index].append(float(util))
                self._gpu_mem[index].append(float(used))

    def stop(self) -> dict:
        """Stop the thread, take a last sample (short runs get at least one) and return the ``resources`` section."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sample()
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
        devices = {
            str(index): {"util_pct": mean_std(self._gpu_util[index]), "mem_gb": mean_std(self._gpu_mem[index])}
            for index in self.gpu_indices
        }
        own = devices.get(str(self.own_gpu), {"util_pct": None, "mem_gb": None})
        return {
            "gpu_util_pct": own["util_pct"],
            "gpu_mem_gb": own["mem_gb"],
            "cpu_util_pct": mean_std(self._cpu),
            "ram_gb": mean_std(self._ram),
            "devices": devices,
            "samples": len(self._cpu),
        }
