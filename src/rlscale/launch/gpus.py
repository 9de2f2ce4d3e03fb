"""Count this host's GPUs without torch or any NVIDIA Python package.

NVML is read through ``ctypes`` from the driver's own ``libnvidia-ml.so.1``: the ``pynvml`` package (nvidia-ml-py) is
neither a dependency of rlscale nor brought by torch's CUDA wheels. Nothing here imports torch, so a launcher's
``--dry_run`` stays fast.
"""

from __future__ import annotations

import ctypes
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

GpuCounter = Callable[[], int]
T = TypeVar("T")

NVML_LIBRARY = "libnvidia-ml.so.1"
"""The NVML library every NVIDIA Linux driver installs."""

_NVML_STRING_SIZE = 96
"""NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_DEVICE_NAME_V2_BUFFER_SIZE."""
GIB = float(2**30)
_CPU_SET_WORDS = 64
"""Length of the ``unsigned long`` bitmask NVML fills with a GPU's CPU affinity: 4096 CPUs."""
_CPU_SET_WORD_BITS = 8 * ctypes.sizeof(ctypes.c_ulong)


P2P_CAPABILITIES = {"P2P read": 0, "NVLink": 2}
"""NVML_P2P_CAPS_INDEX_READ and NVML_P2P_CAPS_INDEX_NVLINK."""
P2P_STATUS = {
    0: "OK",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "IOH topology not supported",
    4: "disabled by regkey",
    5: "not supported",
    6: "unknown",
}
"""nvmlGpuP2PStatus_t."""


class NvmlError(RuntimeError):
    """An NVML call that did not return NVML_SUCCESS."""


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class Nvml:
    """The few NVML calls rlscale makes (counting GPUs here, sampling them in benchmarks), through ctypes; NVML is
    initialised on creation.

    Raises:
        OSError: when the driver's library cannot be loaded (``load_library`` stands in for ``ctypes.CDLL`` in tests).
        NvmlError: when NVML fails to initialise.
    """

    def __init__(self, library: str = NVML_LIBRARY, load_library: Callable[[str], Any] = ctypes.CDLL) -> None:
        self._lib = load_library(library)
        self._lib.nvmlErrorString.restype = ctypes.c_char_p
        self._check("nvmlInit_v2")

    def _check(self, function: str, *args) -> None:
        code = getattr(self._lib, function)(*args)
        if code != 0:
            reason = self._lib.nvmlErrorString(code)
            raise NvmlError(f"{function} failed with NVML error {code} ({reason.decode() if reason else 'unknown'})")

    def _string(self, function: str, handle) -> str:
        buffer = ctypes.create_string_buffer(_NVML_STRING_SIZE)
        self._check(function, handle, buffer, ctypes.c_uint(_NVML_STRING_SIZE))
        return buffer.value.decode()

    def device_count(self) -> int:
        count = ctypes.c_uint(0)
        self._check("nvmlDeviceGetCount_v2", ctypes.pointer(count))
        return count.value

    def handle(self, index: int) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        self._check("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.byref(handle))
        return handle

    def handle_by_uuid(self, uuid: str) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        self._check("nvmlDeviceGetHandleByUUID", ctypes.c_char_p(uuid.encode()), ctypes.byref(handle))
        return handle

    def handle_by_name(self, gpu: str) -> ctypes.c_void_p:
        """The GPU named as in ``CUDA_VISIBLE_DEVICES``: an index, taken as NVML's, or a ``GPU-`` UUID."""
        return self.handle(int(gpu)) if gpu.isdigit() else self.handle_by_uuid(gpu)

    def cpu_affinity(self, handle) -> frozenset[int]:
        """The CPUs close to the GPU (its NUMA node's, or the whole host's when NVML knows no closer ones)."""
        words = (ctypes.c_ulong * _CPU_SET_WORDS)()
        self._check("nvmlDeviceGetCpuAffinity", handle, ctypes.c_uint(_CPU_SET_WORDS), words)
        return frozenset(
            index * _CPU_SET_WORD_BITS + bit
            for index, word in enumerate(words)
            for bit in range(_CPU_SET_WORD_BITS)
            if word >> bit & 1
        )

    def uuid(self, handle) -> str:
        return self._string("nvmlDeviceGetUUID", handle)

    def name(self, handle) -> str:
        return self._string("nvmlDeviceGetName", handle)

    def compute_capability(self, handle) -> str:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check("nvmlDeviceGetCudaComputeCapability", handle, ctypes.byref(major), ctypes.byref(minor))
        return f"{major.value}.{minor.value}"

    def memory_gib(self, handle) -> tuple[float, float]:
        """``(used, total)`` memory of the whole device."""
        memory = _Memory()
        self._check("nvmlDeviceGetMemoryInfo", handle, ctypes.byref(memory))
        return memory.used / GIB, memory.total / GIB

    def free_bytes(self, handle) -> int:
        """Memory of the device that no process holds."""
        memory = _Memory()
        self._check("nvmlDeviceGetMemoryInfo", handle, ctypes.byref(memory))
        return memory.free

    def utilization_pct(self, handle) -> float:
        rates = _Utilization()
        self._check("nvmlDeviceGetUtilizationRates", handle, ctypes.byref(rates))
        return float(rates.gpu)

    def p2p_status(self, first, second, capability: int) -> int:
        """NVML's P2P status (:data:`P2P_STATUS`) between two GPUs for one capability (:data:`P2P_CAPABILITIES`)."""
        status = ctypes.c_int()
        self._check("nvmlDeviceGetP2PStatus", first, second, ctypes.c_int(capability), ctypes.byref(status))
        return status.value

    def shutdown(self) -> None:
        self._check("nvmlShutdown")


def nvml_device_count(load_library: Callable[[str], Any] = ctypes.CDLL) -> int:
    """Return NVML's GPU count.

    Raises ``OSError`` when the library cannot be loaded and :class:`NvmlError` (a ``RuntimeError``) when an NVML call
    fails (e.g. no driver loaded); ``load_library`` stands in for ``ctypes.CDLL`` in tests.
    """
    nvml = Nvml(load_library=load_library)
    try:
        return nvml.device_count()
    finally:
        nvml.shutdown()


def gpu_cpu_affinities(
    gpu_ids: Sequence[str], load_library: Callable[[str], Any] = ctypes.CDLL
) -> list[frozenset[int]]:
    """Return the CPU affinity (:meth:`Nvml.cpu_affinity`) of each GPU named as in ``CUDA_VISIBLE_DEVICES``: an index,
    taken as NVML's (PCI bus order, which is CUDA's too for GPUs of one model), or a ``GPU-`` UUID.

    Raises:
        OSError: when the library cannot be loaded.
        NvmlError: when an NVML call fails, e.g. for a MIG instance's ``MIG-`` id, which names no whole GPU.
    """
    return _each_gpu(gpu_ids, Nvml.cpu_affinity, load_library)


def free_gpu_memory(gpu_ids: Sequence[str], load_library: Callable[[str], Any] = ctypes.CDLL) -> list[int]:
    """Return the free bytes (:meth:`Nvml.free_bytes`) of each GPU named as in ``CUDA_VISIBLE_DEVICES``, as
    :func:`gpu_cpu_affinities` names them; unlike torch, NVML opens no CUDA context on them.

    Raises:
        OSError: when the library cannot be loaded.
        NvmlError: when an NVML call fails, e.g. for a MIG instance's ``MIG-`` id, which names no whole GPU.
    """
    return _each_gpu(gpu_ids, Nvml.free_bytes, load_library)


def _each_gpu(gpu_ids: Sequence[str], read: Callable[[Nvml, Any], T], load_library: Callable[[str], Any]) -> list[T]:
    """``read`` of each GPU named as in ``CUDA_VISIBLE_DEVICES``, through one NVML session."""
    nvml = Nvml(load_library=load_library)
    try:
        return [read(nvml, nvml.handle_by_name(gpu)) for gpu in gpu_ids]
    finally:
        nvml.shutdown()


def p2p_lines(load_library: Callable[[str], Any] = ctypes.CDLL) -> list[str]:
    """One line per pair of the GPUs NVML counts (NVML's indices): whether P2P reads and NVLink work between them.

    Raises:
        OSError: when the library cannot be loaded.
        NvmlError: when an NVML call fails.
    """
    nvml = Nvml(load_library=load_library)
    try:
        handles = [nvml.handle(index) for index in range(nvml.device_count())]
        return [
            f"GPU{first} - GPU{second}: "
            + ", ".join(
                f"{name} {P2P_STATUS.get(status, status)}"
                for name, capability in P2P_CAPABILITIES.items()
                for status in [nvml.p2p_status(handles[first], handles[second], capability)]
            )
            for first in range(len(handles))
            for second in range(first + 1, len(handles))
        ]
    finally:
        nvml.shutdown()


def cuda_device_entry(entry: str) -> bool:
    """Whether CUDA takes ``entry`` of ``CUDA_VISIBLE_DEVICES`` as a device: an index or a ``GPU-``/``MIG-`` UUID.

    CUDA stops at the first entry that is neither (``-1``, a name): that entry and every later one hide nothing but
    are not devices either.
    """
    return entry.isdigit() or entry.startswith(("GPU-", "MIG-"))


def visible_gpu_count(environ: Mapping[str, str], nvml_count: GpuCounter = nvml_device_count) -> tuple[int, str]:
    """Return the GPUs visible to this node's ranks (``CUDA_VISIBLE_DEVICES`` entries, else NVML) and the source.

    ``CUDA_VISIBLE_DEVICES`` counts as CUDA reads it: up to its first entry that names no device
    (:func:`cuda_device_entry`), so ``-1`` shows none. A failing NVML counts 0 GPUs, with the reason in the source.
    Raises ``ValueError`` for a ``CUDA_VISIBLE_DEVICES`` list with an empty entry.
    """
    raw = environ.get("CUDA_VISIBLE_DEVICES")
    if raw is not None:
        entries = [entry.strip() for entry in raw.split(",")]
        if raw.strip() and not all(entries):
            raise ValueError(
                f"CUDA_VISIBLE_DEVICES={raw!r} has an empty entry; list device indices or UUIDs separated by "
                "single commas, e.g. CUDA_VISIBLE_DEVICES=0,1."
            )
        source = f"CUDA_VISIBLE_DEVICES={raw!r}"
        stop = next((entry for entry in entries if entry and not cuda_device_entry(entry)), None)
        if stop is None:
            return sum(1 for entry in entries if entry), source
        # CUDA ignores the entry it cannot read and every later one, so -1 is the usual way to hide every GPU.
        return entries.index(stop), f"{source}, where CUDA stops at {stop!r}: not a device index or UUID"
    try:
        return nvml_count(), "NVML"
    except Exception as exc:  # No driver or no library both mean that no GPU can be used here.
        return 0, f"NVML unavailable: {exc or type(exc).__name__}"


def nvidia_hardware_present(
    dev_root: Path = Path("/dev"), nvidia_smi: str = "nvidia-smi", timeout_s: float = 10.0
) -> str | None:
    """Return one phrase of evidence that this host has NVIDIA GPUs, or ``None``.

    The evidence is independent of NVML: a ``dev_root/nvidia<N>`` device file, else GPU lines of ``nvidia_smi -L``
    (a missing, failing or slow ``nvidia-smi`` counts as no evidence). It tells "no GPU here" from "GPUs that NVML
    could not count", so that the second does not quietly fall back to CPU.
    """
    device_files = sorted(dev_root.glob("nvidia[0-9]*"))
    if device_files:
        return f"{device_files[0]} exists"
    try:
        listing = subprocess.run(
            [nvidia_smi, "-L"], capture_output=True, text=True, timeout=timeout_s, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    gpus = [line for line in listing.splitlines() if line.startswith("GPU ")]
    return f"`{nvidia_smi} -L` lists {len(gpus)} GPU(s)" if gpus else None
