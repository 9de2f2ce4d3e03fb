"""Unit tests of the benchmark's pure parts: the statistics, the resource sampler and the bundle's writing."""

from __future__ import annotations

import json
import math
import sys
import time

import pytest

from rlscale.benchmark import bundle as bundles
from rlscale.benchmark.resources import ResourceSampler
from rlscale.benchmark.stats import ema, mean_std, rate_stats


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

    def test_without_nvml_gpu_fields_are_null(self, monkeypatch):
        """A CUDA run on a host whose NVML cannot load keeps its GPU listed, with null figures, never invented."""
        monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
        section = ResourceSampler([(0, None), (1, None)], own_gpu=1, interval=10).start().stop()
        assert section["devices"] == {"0": {"util_pct": None, "mem_gb": None}, "1": {"util_pct": None, "mem_gb": None}}
        assert section["gpu_util_pct"] is None and section["gpu_mem_gb"] is None and section["samples"] == 1


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
