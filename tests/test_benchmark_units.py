"""Unit tests of the benchmark's pure parts: the statistics, the resource sampler and the bundle's writing."""

from __future__ import annotations

import json
import math
import time

import pytest
from jsonschema import Draft202012Validator

from rlscale.benchmark import bundle as bundles
from rlscale.benchmark.resources import Nvml, ResourceSampler, node_gpu_devices
from rlscale.benchmark.stats import (
    ema,
    mean_std,
    median_interval,
    rate_stats,
    ratio_of_medians_interval,
    sign_test_p,
    values_needed,
)


class TestStatistics:
    def test_rate_mean_is_total_work_over_total_time(self):
        """Two 1000-step iterations of 1 s and 3 s run at 500 steps/s, not at the 666.7 mean of their rates."""
        stats = rate_stats(1000, [1.0, 3.0])
        assert stats["mean"] == pytest.approx(500.0)
        assert stats["peak"] == pytest.approx(1000.0)
        assert stats["std"] == pytest.approx(math.sqrt(2) * (1000 - 1000 / 3) / 2)

    def test_plain_samples_and_missing_ones(self):
        """NaN samples are dropped; one sample has zero spread; none at all is null."""
        assert mean_std([2.0, float("nan"), 4.0]) == {"mean": 3.0, "std": pytest.approx(math.sqrt(2)), "peak": 4.0}
        assert mean_std([5.0]) == {"mean": 5.0, "std": 0.0, "peak": 5.0}
        assert mean_std([]) is None and rate_stats(10, []) is None

    def test_ema_skips_iterations_without_episodes(self):
        """The EMA starts at the first finite value and a NaN leaves it unchanged."""
        assert ema([float("nan"), 10.0, float("nan"), 20.0], 0.5) == pytest.approx(15.0)
        assert ema([float("nan")], 0.1) is None


def no_nvml():
    """Stand-in for opening NVML on a host without a driver."""
    raise OSError("libnvidia-ml.so.1: cannot open shared object file")


class FakeNvml:
    """NVML of a node whose GPU i (handle i) is 10 * (i + 1) % busy with i + 1 GiB of 140 GiB in use."""

    def __init__(self, uuids: list[str]) -> None:
        self.uuids = uuids
        self.shut_down = False

    def device_count(self) -> int:
        return len(self.uuids)

    def handle(self, index: int) -> int:
        return index

    def uuid(self, handle: int) -> str:
        return self.uuids[handle]

    def name(self, handle: int) -> str:
        return "NVIDIA H200"

    def compute_capability(self, handle: int) -> str:
        return "9.0"

    def memory_gib(self, handle: int) -> tuple[float, float]:
        return handle + 1.0, 140.0

    def utilization_pct(self, handle: int) -> float:
        return 10.0 * (handle + 1)

    def shutdown(self) -> None:
        self.shut_down = True


def resources_schema_errors(section: dict) -> list[str]:
    """Schema violations of a ``resources`` section on its own."""
    schema = bundles.schema()
    validator = Draft202012Validator({**schema["properties"]["resources"], "$defs": schema["$defs"]})
    return [error.message for error in validator.iter_errors(section)]


class TestResourceSampler:
    def test_cpu_run_samples_process_and_leaves_gpu_null(self):
        """Without GPUs the sampler reports CPU and RAM only; GPU fields are null and devices empty."""
        sampler = ResourceSampler([], None, interval=0.05).start()
        deadline = time.perf_counter() + 0.4
        while time.perf_counter() < deadline:  # keep the CPU busy so that utilisation is measurable
            sum(range(1000))
        section = sampler.stop()
        assert section["samples"] >= 3
        assert section["cpu_util_pct"]["mean"] > 0 and section["ram_gb"]["peak"] > 0
        assert (section["gpu_util_pct"], section["gpu_mem_gb"], section["devices"]) == (None, None, {})

    def test_without_nvml_gpu_fields_are_null(self):
        """A CUDA run on a host whose NVML cannot load keeps its GPUs listed, with null figures, never invented."""
        section = ResourceSampler([(0, "GPU-a"), (1, None)], own_gpu=1, interval=10, open_nvml=no_nvml).start().stop()
        assert section["devices"] == {
            "0": {"uuid": "GPU-a", "util_pct": None, "mem_gb": None},
            "1": {"uuid": None, "util_pct": None, "mem_gb": None},
        }
        assert section["gpu_util_pct"] is None and section["gpu_mem_gb"] is None and section["samples"] == 1
        assert resources_schema_errors(section) == []

    def test_rank_narrowed_to_its_gpu_still_samples_the_node(self):
        """Rank 0 of a 2-GPU job sees only its own GPU (NVML's index 1) as cuda:0; devices covers both GPUs of the
        node by NVML index and UUID, and the top-level figures are rank 0's own GPU."""
        nvml = FakeNvml(["GPU-a", "GPU-b"])
        section = ResourceSampler([(0, "GPU-b")], own_gpu=0, interval=10, open_nvml=lambda: nvml).start().stop()
        assert {key: device["uuid"] for key, device in section["devices"].items()} == {"0": "GPU-a", "1": "GPU-b"}
        assert section["devices"]["0"]["util_pct"]["mean"] == 10.0
        assert section["gpu_util_pct"]["mean"] == 20.0 and section["gpu_mem_gb"]["mean"] == 2.0
        assert nvml.shut_down and resources_schema_errors(section) == []

    def test_own_gpu_by_its_cuda_visible_devices_entry(self, monkeypatch):
        """Where torch exposes no UUID, the rank's CUDA_VISIBLE_DEVICES entry names its NVML index."""
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        nvml = FakeNvml(["GPU-a", "GPU-b"])
        section = ResourceSampler([(0, None)], own_gpu=0, interval=10, open_nvml=lambda: nvml).start().stop()
        assert section["gpu_util_pct"]["mean"] == 20.0 and set(section["devices"]) == {"0", "1"}

    def test_hardware_lists_the_node_gpus(self):
        """hardware.gpu_devices from NVML lists every GPU of the node with its UUID; None without NVML."""
        devices = node_gpu_devices(lambda: FakeNvml(["GPU-a", "GPU-b"]))
        assert [device["uuid"] for device in devices] == ["GPU-a", "GPU-b"]
        assert devices[1] == {"name": "NVIDIA H200", "mem_gb": 140.0, "compute_cap": "9.0", "uuid": "GPU-b"}
        item_schema = bundles.schema()["properties"]["hardware"]["properties"]["gpu_devices"]["items"]
        assert all(not list(Draft202012Validator(item_schema).iter_errors(device)) for device in devices)
        assert node_gpu_devices(no_nvml) is None

    def test_bundle_hardware_names_every_gpu_of_the_node(self, monkeypatch):
        """A CUDA rank shown only its own GPU still lists the node's GPUs (rank0_node scope); a CPU run lists none."""
        node = node_gpu_devices(lambda: FakeNvml(["GPU-a", "GPU-b"]))
        monkeypatch.setattr(bundles, "node_gpu_devices", lambda: node)
        listed = bundles.hardware_section(on_cuda=True)["gpu_devices"]
        assert [device["uuid"] for device in listed] == ["GPU-a", "GPU-b"]
        assert bundles.hardware_section(on_cuda=False)["gpu_devices"] == []

    def test_real_nvml_without_a_driver_fails_to_open(self):
        """On this driverless host the ctypes reader cannot load libnvidia-ml; the sampler then lists null figures."""
        with pytest.raises(OSError):
            Nvml("libnvidia-ml-missing.so.1")


class TestWriting:
    def test_invalid_bundle_is_not_written(self, tmp_path):
        """Validation runs before the write: an invalid bundle raises and leaves no file, temporary or final."""
        with pytest.raises(bundles.InvalidBundle, match="required property"):
            bundles.write_bundle({"schema_version": "1.0"}, tmp_path / "b.json")
        assert list(tmp_path.iterdir()) == []

    def test_nan_becomes_null(self):
        """JSON has no NaN: missing statistics are written as null."""
        cleaned = bundles.without_nan({"a": [1.0, float("nan")], "b": {"c": float("inf")}})
        assert json.dumps(cleaned, allow_nan=False) == '{"a": [1.0, null], "b": {"c": null}}'


class TestMedianInterval:
    """The exact order-statistic interval of a median, pinned on values worked out by hand.

    ``[x(k), x(n+1-k)]`` covers the median with ``1 - 2 P(Binomial(n, 1/2) <= k - 1)``; the largest ``k`` with at
    least 95 % is taken. Raw percentiles of the values (numpy's 2.5th of 1..9 is 1.2) or a bootstrap give other
    bounds than these.
    """

    @pytest.mark.parametrize(
        ("values", "expected"),
        [
            # n = 9: k = 2 covers 1 - 2 (1 + 9) / 512 = 0.9609; k = 3 only 1 - 2 (1 + 9 + 36) / 512 = 0.8203.
            ([9, 1, 8, 2, 7, 3, 6, 4, 5], (5, 2, 8, 1 - 20 / 512, 9)),
            # n = 17: k = 5 covers 1 - 2 (1 + 17 + 136 + 680 + 2380) / 2**17 = 0.95096.
            (list(range(17, 0, -1)), (9, 5, 13, 1 - 2 * 3214 / 2**17, 17)),
            # n = 6: only the range reaches 95 %: 1 - 2 / 64.
            ([0.8, 1.3, 1.0, 1.1, 0.9, 1.2], (1.05, 0.8, 1.3, 1 - 2 / 64, 6)),
            # n = 5: no 95 % interval; the range, with its own 1 - 2 / 32 = 93.75 %.
            ([0.91, 1.10, 0.97, 1.02, 0.95], (0.97, 0.91, 1.10, 0.9375, 5)),
        ],
        ids=["nine", "seventeen", "six", "five"],
    )
    def test_bounds_and_coverage(self, values, expected):
        assert tuple(median_interval(values)) == pytest.approx(expected)

    def test_missing_values_are_dropped(self):
        assert tuple(median_interval([2.0, 2.0, float("nan"), None, 2.0])) == (2.0, 2.0, 2.0, 0.75, 3)
        assert median_interval([None, float("nan")]) is None

    def test_other_confidence(self):
        """At 50 %, 9 values give k = 4: 1 - 2 (1 + 9 + 36 + 84) / 512 = 0.4922 < 0.5, so k = 3 (0.8203)."""
        assert tuple(median_interval(range(1, 10), confidence=0.5)) == pytest.approx((5, 3, 7, 1 - 92 / 512, 9))
        assert (values_needed(0.95), values_needed(0.99)) == (6, 8)  # 1 - 2 / 2**n reaches 95 % at 6, 99 % at 8

    @pytest.mark.parametrize(
        ("values", "p"),
        [
            ([1.1, 1.2, 1.3, 1.05, 1.4], 2 / 32),  # all 5 on one side
            ([0.9, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8], 2 * 10 / 512),  # 8 of 9 above
            ([1.0, 1.1, 1.2], 2 / 4),  # the tie with 1 is left out
            ([0.9, 1.1], 1.0),
        ],
    )
    def test_sign_test(self, values, p):
        assert sign_test_p(values) == pytest.approx(p)

    def test_ratio_of_independent_medians(self):
        """Each median's interval is taken at sqrt(0.95) = 0.9747, so that both hold with 95 %: for nine values a side
        that is their range (1 - 2 / 512 = 0.9961), as [x(2), x(8)] covers only 0.9609, enough at 0.95 itself but
        not here. The ratio's bounds divide the numerator's by the denominator's opposite bounds; its coverage is the
        product."""
        numerator = [float(value) for value in range(21, 30)]  # median 25
        denominator = [float(value) for value in range(11, 20)]  # median 15
        expected = (25 / 15, 21 / 19, 29 / 11, (1 - 2 / 512) ** 2, 9)
        assert tuple(ratio_of_medians_interval(numerator, denominator)) == pytest.approx(expected)


def test_schema_lists_every_workflow():
    """``bundle.schema.json`` cannot import Python: the loaded schema takes its workflow names from the registry."""
    from rlscale.benchmark.workflows import WORKFLOWS

    workflow = bundles.schema()["properties"]["run"]["properties"]["workflow"]
    assert workflow["enum"] == list(WORKFLOWS)
