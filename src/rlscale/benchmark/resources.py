"""The ``resources`` section: a 1 Hz background sampler of the rank-0 process and its node's GPUs.

CPU and memory come from psutil for this process only (CPU % is summed over cores, so it can exceed 100). GPU
utilisation and memory come from NVML for whole devices, other processes included, and for every GPU of the node
(``gpu_measurement_scope: rank0_node``): NVML ignores ``CUDA_VISIBLE_DEVICES``, which a rank of a multi-GPU job
narrows to its own GPU. Devices are keyed by NVML's index (nvidia-smi's) and carry their UUID;
:func:`node_gpu_devices` lists the same GPUs for ``hardware.gpu_devices``. NVML is read through ctypes from the
driver's own library, so no Python package is needed. Without NVML the devices are this process's GPUs by CUDA index,
with null figures, and a CPU run has none: a missing measurement is never replaced by an estimate.

This process's own share of its GPU is reported twice: NVML's per-process figure (``gpu_process_mem_gb``, sampled:
its CUDA context and every allocator in it, JAX's included) and torch's peaks at the end
(``torch_peak_allocated_gb``, ``torch_peak_reserved_gb``: torch's caching allocator only).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import psutil

from rlscale.benchmark.stats import mean_std
from rlscale.launch.gpus import GIB, Nvml, NvmlError
from rlscale.manifest import cuda_uuid

INTERVAL_S = 1.0
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_VALUE_NOT_AVAILABLE = 2**64 - 1
"""``usedGpuMemory`` of a process NVML has no figure for (``(unsigned long long)-1``)."""


class _ProcessInfo(ctypes.Structure):
    """``nvmlProcessInfo_t``, the entry of both ``nvmlDeviceGetComputeRunningProcesses_v3`` and ``_v2``."""

    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class ProcessNvml(Nvml):
    """:class:`~rlscale.launch.gpus.Nvml` that also reads one process's memory on a GPU."""

    def process_memory_gib(self, handle, pid: int) -> float | None:
        """GPU memory NVML counts for process ``pid`` on the device, or None when NVML lists no figure for it: the
        process has no CUDA context there yet, or it runs in a container whose pids NVML cannot see (NVML lists the
        host's).

        Raises:
            NvmlError: when NVML fails to list the device's processes.
        """
        name = "nvmlDeviceGetComputeRunningProcesses_v3"
        if not hasattr(self._lib, name):  # drivers before 510
            name = "nvmlDeviceGetComputeRunningProcesses_v2"
        capacity = 64
        for _ in range(3):  # processes may start between NVML's answer and the retry
            count = ctypes.c_uint(capacity)
            infos = (_ProcessInfo * capacity)()
            code = getattr(self._lib, name)(handle, ctypes.pointer(count), infos)
            if code != NVML_ERROR_INSUFFICIENT_SIZE:
                break
            capacity = count.value + 16
        if code != 0:
            raise NvmlError(f"{name} failed with NVML error {code}")
        used = [info.usedGpuMemory for info in infos[: count.value] if info.pid == pid]
        return used[0] / GIB if used and used[0] != NVML_VALUE_NOT_AVAILABLE else None


def visible_cuda_devices() -> list[tuple[int, str | None]]:
    """``(cuda index, NVML UUID or None)`` of every GPU this process sees, in CUDA's order."""
    import torch

    return [(index, cuda_uuid(index)) for index in range(torch.cuda.device_count())]


@dataclass(frozen=True)
class NodeGpu:
    """One GPU of the node as NVML lists it."""

    index: int
    """NVML's index, which nvidia-smi shows."""
    uuid: str
    handle: object


def node_gpus(nvml: Nvml) -> list[NodeGpu]:
    """Every GPU of the node, in NVML's order, whatever ``CUDA_VISIBLE_DEVICES`` shows this process."""
    gpus = []
    for index in range(nvml.device_count()):
        handle = nvml.handle(index)
        gpus.append(NodeGpu(index, nvml.uuid(handle), handle))
    return gpus


def node_gpu_devices(open_nvml: Callable[[], Nvml] = Nvml) -> list[dict] | None:
    """``hardware.gpu_devices`` of the node: every GPU NVML lists, with its UUID; None when NVML cannot be used."""
    try:
        nvml = open_nvml()
    except Exception:  # no driver or library
        return None
    try:
        devices = []
        for gpu in node_gpus(nvml):
            devices.append(
                {
                    "name": nvml.name(gpu.handle),
                    "mem_gb": nvml.memory_gib(gpu.handle)[1],
                    "compute_cap": nvml.compute_capability(gpu.handle),
                    "uuid": gpu.uuid,
                }
            )
        return devices
    except Exception:  # a device NVML cannot describe: no list rather than a partial one
        return None
    finally:
        with contextlib.suppress(Exception):
            nvml.shutdown()


def own_node_index(
    node: Sequence[NodeGpu], devices: Sequence[tuple[int, str | None]], own_gpu: int, environ: Mapping[str, str]
) -> int | None:
    """NVML index of this process's GPU (CUDA index ``own_gpu``), or None when it cannot be told.

    CUDA orders devices fastest-first and NVML by PCI bus, so the GPU is found by UUID; failing that, by its
    ``CUDA_VISIBLE_DEVICES`` entry, and only then by the CUDA index itself.
    """
    uuid = dict(devices).get(own_gpu)
    indices = {gpu.index for gpu in node}
    for gpu in node:
        if uuid and gpu.uuid == uuid:
            return gpu.index
    masked = [entry.strip() for entry in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    if own_gpu < len(masked):
        return int(masked[own_gpu]) if masked[own_gpu].isdigit() and int(masked[own_gpu]) in indices else None
    return own_gpu if not masked and own_gpu in indices else None


def torch_peak_memory_gib(cuda_index: int | None) -> tuple[float | None, float | None]:
    """torch's peak allocated and reserved memory on CUDA device ``cuda_index`` since the last reset; None for both
    on the CPU or where this process never initialised CUDA."""
    if cuda_index is None:
        return None, None
    import torch

    if not torch.cuda.is_initialized():
        return None, None
    return torch.cuda.max_memory_allocated(cuda_index) / GIB, torch.cuda.max_memory_reserved(cuda_index) / GIB


class ResourceSampler:
    """Samples every ``interval`` seconds from :meth:`start` on a daemon thread, and once more at :meth:`stop`.

    Args:
        gpu_devices: ``(cuda index, uuid)`` of every GPU this process sees; empty on a CPU run, which samples no GPU.
        own_gpu: CUDA index of this process's device (the top-level ``gpu_*`` fields), or None on the CPU.
        interval: Seconds between samples.
        open_nvml: Opens NVML; without it, this process's GPUs are listed with null figures.
    """

    def __init__(
        self,
        gpu_devices: Sequence[tuple[int, str | None]],
        own_gpu: int | None,
        interval: float = INTERVAL_S,
        open_nvml: Callable[[], ProcessNvml] = ProcessNvml,
    ) -> None:
        self.interval = interval
        self._own_cuda = own_gpu if gpu_devices else None
        self._nvml, self._node = None, []
        if gpu_devices:
            with contextlib.suppress(Exception):  # no driver or library: the GPU figures stay null
                self._nvml = open_nvml()
                self._node = node_gpus(self._nvml)
        if self._node:
            self._uuids = {str(gpu.index): gpu.uuid for gpu in self._node}
            own = None if own_gpu is None else own_node_index(self._node, gpu_devices, own_gpu, os.environ)
        else:
            self._uuids = {str(index): uuid for index, uuid in gpu_devices}
            own = own_gpu
        self._own_key = None if own is None else str(own)
        self._own_handle = next((gpu.handle for gpu in self._node if str(gpu.index) == self._own_key), None)
        self._process_mem: list[float] = []
        self._process = psutil.Process()
        self._cpu: list[float] = []
        self._ram: list[float] = []
        self._gpu_util: dict[str, list[float]] = {key: [] for key in self._uuids}
        self._gpu_mem: dict[str, list[float]] = {key: [] for key in self._uuids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rlscale-resources", daemon=True)

    def start(self) -> ResourceSampler:
        """Start sampling; torch's peaks count from here, so that each run of a process reports its own."""
        if self._own_cuda is not None:
            import torch

            if torch.cuda.is_initialized():
                torch.cuda.reset_peak_memory_stats(self._own_cuda)
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
        for gpu in self._node:
            with contextlib.suppress(Exception):  # a transient NVML error loses one sample, not the run
                util = self._nvml.utilization_pct(gpu.handle)
                used = self._nvml.memory_gib(gpu.handle)[0]
                self._gpu_util[str(gpu.index)].append(util)
                self._gpu_mem[str(gpu.index)].append(used)
        if self._own_handle is not None:
            with contextlib.suppress(Exception):
                used = self._nvml.process_memory_gib(self._own_handle, os.getpid())
                if used is not None:
                    self._process_mem.append(used)

    def stop(self) -> dict:
        """Stop the thread, take a last sample (short runs get at least one) and return the ``resources`` section."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sample()
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.shutdown()
        devices = {
            key: {"uuid": uuid, "util_pct": mean_std(self._gpu_util[key]), "mem_gb": mean_std(self._gpu_mem[key])}
            for key, uuid in self._uuids.items()
        }
        own = devices.get(self._own_key, {"util_pct": None, "mem_gb": None})
        peak_allocated, peak_reserved = torch_peak_memory_gib(self._own_cuda)
        return {
            "gpu_util_pct": own["util_pct"],
            "gpu_mem_gb": own["mem_gb"],
            "gpu_process_mem_gb": mean_std(self._process_mem),
            "torch_peak_allocated_gb": peak_allocated,
            "torch_peak_reserved_gb": peak_reserved,
            "cpu_util_pct": mean_std(self._cpu),
            "ram_gb": mean_std(self._ram),
            "devices": devices,
            "samples": len(self._cpu),
        }
