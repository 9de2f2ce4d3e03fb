"""Tests of GPU counting without torch or pynvml: NVML through ctypes (a fake library), CUDA_VISIBLE_DEVICES, and the
evidence of NVIDIA hardware independent of NVML (fake device files and a fake nvidia-smi)."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

from rlscale.launch.gpus import (
    NVML_LIBRARY,
    NvmlError,
    gpu_cpu_affinities,
    nvidia_hardware_present,
    nvml_device_count,
    p2p_lines,
    visible_gpu_count,
)

NVML_ERRORS = {9: b"Driver Not Loaded", 13: b"Not Found", 999: b"Unknown Error"}


class FakeNvml:
    """Stand-in for the loaded ``libnvidia-ml.so.1``: the four functions the counter calls, recorded in order."""

    def __init__(self, count: int = 0, init_code: int = 0, count_code: int = 0):
        self.count, self.init_code, self.count_code = count, init_code, count_code
        self.calls: list[str] = []
        self.nvmlErrorString = lambda code: NVML_ERRORS.get(code)  # the counter sets .restype on it

    def nvmlInit_v2(self) -> int:
        self.calls.append("init")
        return self.init_code

    def nvmlDeviceGetCount_v2(self, count_pointer) -> int:
        self.calls.append("count")
        count_pointer.contents.value = self.count
        return self.count_code

    def nvmlShutdown(self) -> int:
        self.calls.append("shutdown")
        return 0


class FakeAffinityNvml(FakeNvml):
    """A fake NVML that also knows each GPU's handle (by index or UUID) and CPU affinity (a bitmask of words)."""

    def __init__(self, affinities: dict[str, set[int]], uuids: dict[str, str] | None = None):
        super().__init__(count=len(affinities))
        self.affinities, self.uuids = affinities, uuids or {}
        self.handles: list[str] = []

    def _handle(self, gpu: str, reference) -> int:
        self.handles.append(gpu)
        reference._obj.value = len(self.handles)  # the c_void_p given by ctypes.byref
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index, reference) -> int:
        return self._handle(str(index.value), reference)

    def nvmlDeviceGetHandleByUUID(self, uuid, reference) -> int:
        gpu = self.uuids.get(uuid.value.decode())
        return 13 if gpu is None else self._handle(gpu, reference)

    def nvmlDeviceGetCpuAffinity(self, handle, size, words) -> int:
        bits = ctypes.sizeof(ctypes.c_ulong) * 8
        for cpu in self.affinities[self.handles[handle.value - 1]]:
            assert cpu // bits < size.value
            words[cpu // bits] |= 1 << cpu % bits
        return 0


def loader_of(library: FakeNvml, loaded: list[str] | None = None):
    """A ``ctypes.CDLL`` stand-in that returns ``library`` and records the names it was asked for."""

    def load(name: str) -> FakeNvml:
        if loaded is not None:
            loaded.append(name)
        return library

    return load


class TestNvmlThroughCtypes:
    def test_counts_through_the_driver_library(self):
        """The count comes from nvmlDeviceGetCount_v2 of libnvidia-ml.so.1, between init and shutdown."""
        library, loaded = FakeNvml(count=4), []
        assert nvml_device_count(loader_of(library, loaded)) == 4
        assert loaded == [NVML_LIBRARY] == ["libnvidia-ml.so.1"]
        assert library.calls == ["init", "count", "shutdown"]

    def test_missing_library_is_an_oserror(self):
        """Without the driver's library the real loader raises OSError naming it."""
        with pytest.raises(OSError, match="libnvidia-ml-absent"):
            nvml_device_count(lambda name: ctypes.CDLL("libnvidia-ml-absent.so.1"))

    def test_failed_init_names_the_call_and_the_error(self):
        """A non-zero nvmlInit_v2 is a RuntimeError with NVML's own text; nothing to shut down."""
        library = FakeNvml(init_code=9)
        with pytest.raises(RuntimeError, match=r"nvmlInit_v2 failed with NVML error 9 \(Driver Not Loaded\)"):
            nvml_device_count(loader_of(library))
        assert library.calls == ["init"]

    def test_failed_count_still_shuts_down(self):
        """A non-zero nvmlDeviceGetCount_v2 raises after nvmlShutdown."""
        library = FakeNvml(count_code=999)
        with pytest.raises(RuntimeError, match="nvmlDeviceGetCount_v2 failed with NVML error 999"):
            nvml_device_count(loader_of(library))
        assert library.calls == ["init", "count", "shutdown"]

    def test_pynvml_is_never_imported(self, monkeypatch):
        """Counting works where ``import pynvml`` fails (the package is no dependency) and does not import it."""
        monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
        assert nvml_device_count(loader_of(FakeNvml(count=2))) == 2
        assert visible_gpu_count({}, lambda: nvml_device_count(loader_of(FakeNvml(count=3)))) == (3, "NVML")
        assert sys.modules["pynvml"] is None


class FakeP2pNvml(FakeAffinityNvml):
    """A fake NVML that answers P2P status: ``status[(first, second, capability)]``, OK (0) where not given."""

    def __init__(self, count: int, status: dict[tuple[int, int, int], int]):
        super().__init__({str(index): set() for index in range(count)})
        self.status = status

    def nvmlDeviceGetP2PStatus(self, first, second, capability, reference) -> int:
        key = (int(self.handles[first.value - 1]), int(self.handles[second.value - 1]), capability.value)
        reference._obj.value = self.status.get(key, 0)
        return 0


class TestP2pLines:
    def test_one_line_per_pair_with_read_and_nvlink(self):
        """NVML's P2P read and NVLink status of each pair, for the doctor's topology where nvidia-smi is missing."""
        library = FakeP2pNvml(3, {(0, 2, 0): 3, (0, 2, 2): 5, (1, 2, 2): 5})
        assert p2p_lines(loader_of(library)) == [
            "GPU0 - GPU1: P2P read OK, NVLink OK",
            "GPU0 - GPU2: P2P read IOH topology not supported, NVLink not supported",
            "GPU1 - GPU2: P2P read OK, NVLink not supported",
        ]
        assert library.calls[-1] == "shutdown"


class TestGpuCpuAffinities:
    def test_each_gpu_by_index_with_cpus_past_the_first_word(self):
        library = FakeAffinityNvml({"0": {0, 1, 2}, "1": {64, 65, 127}})
        assert gpu_cpu_affinities(["1", "0"], loader_of(library)) == [{64, 65, 127}, {0, 1, 2}]
        assert library.calls[-1] == "shutdown"

    def test_a_gpu_by_uuid(self):
        library = FakeAffinityNvml({"0": {3}, "1": {7}}, uuids={"GPU-b": "1"})
        assert gpu_cpu_affinities(["GPU-b"], loader_of(library)) == [{7}]

    def test_a_mig_id_is_an_nvml_error_and_still_shuts_down(self):
        library = FakeAffinityNvml({"0": {3}})
        with pytest.raises(NvmlError, match="nvmlDeviceGetHandleByUUID failed with NVML error 13"):
            gpu_cpu_affinities(["MIG-1c2d"], loader_of(library))
        assert library.calls[-1] == "shutdown"


class TestVisibleGpuCount:
    @pytest.mark.parametrize(("visible", "count"), [("", 0), ("0", 1), ("0,1", 2), ("GPU-a1, GPU-b2", 2)])
    def test_cuda_visible_devices_entries(self, visible, count):
        """A set CUDA_VISIBLE_DEVICES is counted by entries, without asking NVML."""
        assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": visible}, nvml_count=None) == (
            count,
            f"CUDA_VISIBLE_DEVICES={visible!r}",
        )

    @pytest.mark.parametrize(
        ("visible", "count", "stop"),
        [("-1", 0, "-1"), ("0,-1,1", 1, "-1"), ("GPU-a1,cuda0,GPU-b2", 1, "cuda0"), ("MIG-c3,2", 2, None)],
    )
    def test_counting_stops_where_cuda_does(self, visible, count, stop):
        """CUDA reads CUDA_VISIBLE_DEVICES up to its first entry that is no index or UUID, so -1 shows no GPU; the
        source names that entry."""
        found, source = visible_gpu_count({"CUDA_VISIBLE_DEVICES": visible}, nvml_count=None)
        assert found == count
        assert (f"CUDA stops at {stop!r}" in source) if stop else source == f"CUDA_VISIBLE_DEVICES={visible!r}"

    def test_nvml_when_unset(self):
        """Without CUDA_VISIBLE_DEVICES NVML counts."""
        assert visible_gpu_count({}, lambda: 8) == (8, "NVML")

    def test_nvml_failure_counts_zero_with_the_reason(self):
        """A failing NVML means no usable GPU; the reason is kept for the error line."""
        assert visible_gpu_count({}, lambda: ctypes.CDLL("libnvidia-ml-absent.so.1"))[0] == 0
        count, source = visible_gpu_count({}, lambda: nvml_device_count(loader_of(FakeNvml(init_code=9))))
        assert count == 0 and source == "NVML unavailable: nvmlInit_v2 failed with NVML error 9 (Driver Not Loaded)"

    def test_empty_entry_is_a_value_error(self):
        """A list with an empty entry is refused, quoting it."""
        with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES='0,,1' has an empty entry"):
            visible_gpu_count({"CUDA_VISIBLE_DEVICES": "0,,1"})


def fake_nvidia_smi(folder: Path, body: str) -> str:
    """Write an executable ``nvidia-smi`` stand-in running the shell ``body``; return its path."""
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


class TestNvidiaHardwarePresent:
    def test_device_file(self, tmp_path):
        """A /dev/nvidia<N> file is evidence, named in the phrase; nvidia-smi is not needed."""
        for name in ("nvidiactl", "nvidia-uvm", "nvidia1", "nvidia0"):
            (tmp_path / name).touch()
        found = nvidia_hardware_present(tmp_path, nvidia_smi=str(tmp_path / "absent"))
        assert found == f"{tmp_path / 'nvidia0'} exists"

    def test_control_files_alone_are_no_gpu(self, tmp_path):
        """nvidiactl and nvidia-uvm exist without a GPU (a driver in a container); they are not evidence."""
        (tmp_path / "nvidiactl").touch()
        (tmp_path / "nvidia-uvm").touch()
        assert nvidia_hardware_present(tmp_path, nvidia_smi=str(tmp_path / "absent")) is None

    def test_nvidia_smi_lists_gpus(self, tmp_path):
        """Without device files, GPU lines of `nvidia-smi -L` are evidence."""
        lines = "GPU 0: NVIDIA H200 (UUID: GPU-b9124bcb)\nGPU 1: NVIDIA H200 (UUID: GPU-c0ffee00)"
        smi = fake_nvidia_smi(tmp_path, f'[ "$1" = -L ] && printf "{lines}\\n"')
        assert nvidia_hardware_present(tmp_path / "dev", nvidia_smi=smi) == f"`{smi} -L` lists 2 GPU(s)"

    def test_failing_nvidia_smi(self, tmp_path):
        """nvidia-smi without a driver prints no GPU line: no evidence."""
        smi = fake_nvidia_smi(tmp_path, "echo 'NVIDIA-SMI has failed because it could not communicate'; exit 9")
        assert nvidia_hardware_present(tmp_path / "dev", nvidia_smi=smi) is None

    def test_missing_nvidia_smi(self, tmp_path):
        """No nvidia-smi on the host is no evidence, not an error."""
        assert nvidia_hardware_present(tmp_path, nvidia_smi=str(tmp_path / "absent")) is None

    def test_hung_nvidia_smi_is_bounded(self, tmp_path):
        """A hung nvidia-smi is given up after the timeout: the GPU it would list after its hang is never read."""
        smi = fake_nvidia_smi(tmp_path, "sleep 30; echo 'GPU 0: NVIDIA H200 (UUID: GPU-late)'")
        assert nvidia_hardware_present(tmp_path / "dev", nvidia_smi=smi, timeout_s=0.3) is None
