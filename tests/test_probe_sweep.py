"""``rlscale nccl_probe --sizes``: the sizes it takes, the fit of latency and bandwidth to a sweep, and one sweep on
two gloo ranks (its refusals: tests/test_bad_inputs.py)."""

from __future__ import annotations

import math

import pytest
from rlscale_command import rlscale

from rlscale.launch.probe_sweep import fit_all_reduce, parse_size, read_probe_sweep


class TestFit:
    def test_recovers_latency_and_bandwidth(self):
        sizes = [4096, 65536, 1 << 20, 16 << 20, 64 << 20]
        fit = fit_all_reduce(sizes, [20e-6 + size / 5e9 for size in sizes], world_size=2)
        assert fit.latency_s == pytest.approx(20e-6) and fit.bandwidth_bytes_per_s == pytest.approx(5e9)
        assert fit.rms_relative_error == pytest.approx(0, abs=1e-9)

    def test_noisy_points_give_figures_near_the_truth(self):
        sizes = [4096, 65536, 1 << 20, 16 << 20]
        noise = [1.05, 0.95, 1.03, 0.98]
        times = [(30e-6 + size / 1e10) * k for size, k in zip(sizes, noise, strict=True)]
        fit = fit_all_reduce(sizes, times, world_size=2)
        assert fit.latency_s == pytest.approx(30e-6, rel=0.1)
        assert fit.bandwidth_bytes_per_s == pytest.approx(1e10, rel=0.1)

    def test_times_that_do_not_grow_are_latency_alone(self):
        fit = fit_all_reduce([4096, 8192], [50e-6, 40e-6], world_size=2)
        assert math.isinf(fit.bandwidth_bytes_per_s) and fit.latency_s == pytest.approx(45e-6)

    @pytest.mark.parametrize(("sizes", "times"), [([1 << 20], [1e-3]), ([4096, 4096], [1e-5, 2e-5])])
    def test_refuses_fewer_than_two_sizes(self, sizes, times):
        with pytest.raises(ValueError, match="at least 2 message sizes"):
            fit_all_reduce(sizes, times, world_size=2)

    @pytest.mark.parametrize(("text", "size"), [("4096", 4096), ("4KiB", 4096), ("1MiB", 1 << 20), ("8B", 8)])
    def test_sizes(self, text, size):
        assert parse_size(text) == size

    @pytest.mark.parametrize("text", ["4kb", "1.5MiB", "6", "0", "-4"])
    def test_bad_sizes(self, text):
        with pytest.raises(ValueError):
            parse_size(text)


class TestSweep:
    def test_probe_sweeps_sizes_on_cpu_ranks(self, tmp_path):
        """Two gloo ranks all-reduce two sizes; rank 0 prints each and the fit, and writes the sweep."""
        output = tmp_path / "probe.json"
        result = rlscale(
            *("nccl_probe", "--num_gpus", "2", "--device", "cpu", "--sizes", "4KiB", "256KiB"),
            *("--repeats", "2", "--output", str(output)),
            timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "nccl_probe: all 2 ranks ok" in result.stdout and "fit: " in result.stdout
        sweep = read_probe_sweep(output)
        assert (sweep.backend, sweep.device, sweep.world_size, sweep.repeats) == ("gloo", "cpu", 2, 2)
        assert sweep.sizes_bytes == [4096, 262144]
        assert all(len(times) == 2 and max(times) == slowest for times, slowest in zip(
            sweep.seconds_per_rank, sweep.seconds, strict=True
        ))  # fmt: skip
