"""Rank 0's own GPU memory in the bundle's ``resources``: NVML's per-process figure, read through ctypes (from a
fake ``libnvidia-ml`` here), and torch's peaks; null on the CPU and wherever they cannot be read, never estimated."""

from __future__ import annotations

import os

import pytest
import torch
from test_benchmark_units import FakeNvml, resources_schema_errors

from rlscale.benchmark.resources import (
    NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_VALUE_NOT_AVAILABLE,
    ProcessNvml,
    ResourceSampler,
)
from rlscale.launch.gpus import NvmlError

PID = os.getpid()


class FakeProcessLibrary:
    """Stand-in for the loaded ``libnvidia-ml.so.1`` whose GPU runs ``processes`` (pid, bytes used).

    It answers as NVML does: a buffer too small for every process is ``NVML_ERROR_INSUFFICIENT_SIZE`` with the count
    needed. A driver before 510 (``v3=False``) has only the ``_v2`` call.
    """

    def __init__(self, processes: list[tuple[int, int]], v3: bool = True, code: int = 0) -> None:
        self.processes, self.code = processes, code
        self.buffer_sizes: list[int] = []
        self.nvmlErrorString = lambda code: b"Unknown Error"
        name = f"nvmlDeviceGetComputeRunningProcesses_{'v3' if v3 else 'v2'}"
        setattr(self, name, self._list_processes)

    def nvmlInit_v2(self) -> int:
        return 0

    def _list_processes(self, handle, count_pointer, infos) -> int:
        self.buffer_sizes.append(count_pointer.contents.value)
        if self.code:
            return self.code
        if count_pointer.contents.value < len(self.processes):
            count_pointer.contents.value = len(self.processes)
            return NVML_ERROR_INSUFFICIENT_SIZE
        for info, (pid, used) in zip(infos, self.processes, strict=False):
            info.pid, info.usedGpuMemory = pid, used
        count_pointer.contents.value = len(self.processes)
        return 0


def process_memory(library: FakeProcessLibrary) -> float | None:
    return ProcessNvml(load_library=lambda name: library).process_memory_gib(handle=None, pid=PID)


class TestProcessMemoryThroughCtypes:
    def test_this_process_among_others(self):
        assert process_memory(FakeProcessLibrary([(1, 5 * 2**30), (PID, 3 * 2**29)])) == 1.5

    def test_a_driver_before_510_answers_through_v2(self):
        assert process_memory(FakeProcessLibrary([(PID, 2**30)], v3=False)) == 1.0

    def test_more_processes_than_the_first_buffer_holds(self):
        library = FakeProcessLibrary([(pid, 2**30) for pid in range(100)] + [(PID, 2**31)])
        assert process_memory(library) == 2.0
        assert library.buffer_sizes == [64, 117]

    @pytest.mark.parametrize(
        "processes",
        [[(1, 2**30)], [(PID, NVML_VALUE_NOT_AVAILABLE)], []],
        ids=["not listed (no context yet, or pids of another namespace)", "no figure", "no process"],
    )
    def test_no_figure_is_none(self, processes):
        assert process_memory(FakeProcessLibrary(processes)) is None

    def test_a_failing_call_names_itself(self):
        with pytest.raises(NvmlError, match=r"^nvmlDeviceGetComputeRunningProcesses_v3 failed with NVML error 999$"):
            process_memory(FakeProcessLibrary([(PID, 2**30)], code=999))


class FakeProcessNvml(FakeNvml):
    """:class:`FakeNvml` whose GPU ``handle`` lists this process with ``used[handle]`` GiB, one figure per sample."""

    def __init__(self, uuids: list[str], used: dict[int, list[float | None]]) -> None:
        super().__init__(uuids)
        self.used = used

    def process_memory_gib(self, handle: int, pid: int) -> float | None:
        assert pid == PID
        return self.used[handle].pop(0)


class TestSampler:
    def test_nvmls_figure_of_this_process_on_its_own_gpu(self):
        """Rank 0 runs on NVML's GPU 1 (cuda:0 here); only that GPU's figure for this process is sampled. A sample
        where NVML does not list the process yet is left out, not counted as zero."""
        nvml = FakeProcessNvml(["GPU-a", "GPU-b"], {0: [], 1: [None, 2.0, 4.0]})
        sampler = ResourceSampler([(0, "GPU-b")], own_gpu=0, interval=10, open_nvml=lambda: nvml)
        sampler.sample()
        sampler.sample()
        section = sampler.stop()
        assert section["gpu_process_mem_gb"] == {"mean": 3.0, "std": pytest.approx(2**0.5), "peak": 4.0}
        assert resources_schema_errors(section) == []

    def test_null_where_nvml_never_lists_the_process(self):
        nvml = FakeProcessNvml(["GPU-a"], {0: [None]})
        section = ResourceSampler([(0, "GPU-a")], own_gpu=0, interval=10, open_nvml=lambda: nvml).start().stop()
        assert section["gpu_process_mem_gb"] is None and section["gpu_mem_gb"]["mean"] == 1.0

    def test_a_cpu_run_reports_none_of_them(self):
        section = ResourceSampler([], None, interval=10).start().stop()
        own_memory = ("gpu_process_mem_gb", "torch_peak_allocated_gb", "torch_peak_reserved_gb")
        assert [section[key] for key in own_memory] == [None, None, None]
        assert resources_schema_errors(section) == []

    def test_torch_peaks_of_the_rank_device_since_start(self, monkeypatch):
        """Read from torch's allocator for this rank's CUDA index (faked: this host has no GPU), reset at start so
        that every run of one process reports its own peak."""
        resets = []
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", resets.append)
        monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: {1: 3 * 2**30}[device])
        monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device: {1: 5 * 2**29}[device])
        nvml, gpus = FakeNvml(["GPU-a", "GPU-b"]), [(0, "GPU-a"), (1, "GPU-b")]
        section = ResourceSampler(gpus, own_gpu=1, interval=10, open_nvml=lambda: nvml).start().stop()
        assert resets == [1]
        assert (section["torch_peak_allocated_gb"], section["torch_peak_reserved_gb"]) == (3.0, 2.5)
        assert resources_schema_errors(section) == []

    def test_no_torch_peaks_where_cuda_was_never_initialised(self, monkeypatch):
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
        nvml = FakeNvml(["GPU-a"])
        section = ResourceSampler([(0, "GPU-a")], own_gpu=0, interval=10, open_nvml=lambda: nvml).start().stop()
        assert (section["torch_peak_allocated_gb"], section["torch_peak_reserved_gb"]) == (None, None)
