"""The scaling model's arithmetic on synthetic profiles with answers worked out by hand, the profile read from a
committed bundle, and ``rlscale benchmark predict`` run as a user runs it (its refusals: tests/test_bad_inputs.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from rlscale_command import rlscale

from rlscale.benchmark.scaling_model import (
    CollectiveVolume,
    CostModel,
    LinkCost,
    RankProfile,
    collective_s,
    predict,
    predict_shapes,
    shape_steps,
)
from rlscale.benchmark.scaling_profile import measured_collectives, profile_of
from rlscale.launch.probe_sweep import AllReduceFit

ROOT = Path(__file__).resolve().parents[1]
ONE_RANK = ROOT / "results/h200x2/benchmark/training/Isaac-Cartpole-Direct/rsl_rl/ws1/envs4096/seed1.json"
TWO_RANKS = ROOT / "results/h200x2/benchmark/training/Isaac-Cartpole-Direct/rsl_rl/ws2/envs4096/seed1.json"
COLLECTIVES = ROOT / "results/h200x2/scaling_model/collectives/rsl_rl.json"
PROFILE = RankProfile(
    collection_s=0.04,
    update_s=0.06,
    steps_per_iteration=1000,
    collectives=(CollectiveVolume("all_reduce", calls=10, bytes=1e6),),
)
"""0.1 s of compute and ten all-reduces of 100 kB each per iteration."""
NVLINK = LinkCost(latency_s=10e-6, bandwidth_bytes_per_s=1e9)
NETWORK = LinkCost(latency_s=50e-6, bandwidth_bytes_per_s=1e8)


class TestArithmetic:
    def test_free_communication_scales_perfectly(self):
        """With no latency and infinite bandwidth, every world size runs at efficiency 1 and speedup N."""
        free = LinkCost(0.0, math.inf)
        for prediction in predict_shapes(PROFILE, CostModel(free, free), nodes=4, gpus_per_node=8):
            assert prediction.efficiency == pytest.approx(1.0)
            assert prediction.speedup == pytest.approx(prediction.world_size)
            assert prediction.communication_s == 0.0

    def test_one_rank_is_its_profile(self):
        prediction = predict(PROFILE, CostModel(NVLINK), nodes=1, gpus_per_node=1)
        assert (prediction.iteration_s, prediction.efficiency, prediction.throughput) == (0.1, 1.0, 10_000)

    def test_ring_all_reduce_on_four_ranks(self):
        """Four ranks: the bytes 2·3/4 · 1e6 / 1e9 = 1.5 ms, the latency 10 calls · 6 steps · 10 µs = 0.6 ms."""
        prediction = predict(PROFILE, CostModel(NVLINK), nodes=1, gpus_per_node=4)
        assert prediction.communication_s == pytest.approx(2.1e-3)
        assert prediction.iteration_s == pytest.approx(0.1021)
        assert prediction.efficiency == pytest.approx(0.1 / 0.1021)
        assert prediction.throughput == pytest.approx(4 * 1000 / 0.1021)
        assert prediction.communication_share == pytest.approx(2.1e-3 / 0.1021)

    def test_two_nodes_run_at_the_inter_node_link(self):
        """2 nodes × 4 GPUs: 2·7/8 · 1e6 / 1e8 = 17.5 ms of bytes and 10 · 14 · 50 µs = 7 ms of latency."""
        prediction = predict(PROFILE, CostModel(NVLINK, NETWORK), nodes=2, gpus_per_node=4)
        assert prediction.world_size == 8
        assert prediction.communication_s == pytest.approx(24.5e-3)
        assert prediction.efficiency == pytest.approx(0.1 / 0.1245)

    def test_several_nodes_need_the_inter_node_link(self):
        with pytest.raises(ValueError, match="inter-node"):
            predict(PROFILE, CostModel(NVLINK), nodes=2, gpus_per_node=4)

    def test_other_kinds_cost_their_ring(self):
        """A broadcast crosses each link once (N - 1 latency steps); a barrier costs an all-reduce's latency."""
        broadcast = collective_s(CollectiveVolume("broadcast", 2, 4e5), 4, NVLINK)
        assert broadcast == pytest.approx(4e5 / 1e9 + 2 * 3 * 10e-6)
        assert collective_s(CollectiveVolume("barrier", 1, 0), 4, NVLINK) == pytest.approx(6 * 10e-6)
        assert collective_s(CollectiveVolume("all_reduce", 5, 1e6), 1, NVLINK) == 0.0

    @pytest.mark.parametrize(
        ("nodes", "gpus", "steps"),
        [
            (4, 8, [(1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (4, 8)]),
            (3, 6, [(1, 1), (1, 2), (1, 4), (1, 6), (2, 6), (3, 6)]),
            (1, 1, [(1, 1)]),
        ],
    )
    def test_world_sizes_on_the_way_to_a_shape(self, nodes, gpus, steps):
        assert shape_steps(nodes, gpus) == steps

    def test_a_link_from_a_fit_reproduces_the_fitted_all_reduce(self):
        """The link under a 4-rank fit, put back into a 4-rank all-reduce, gives the fitted time at any size."""
        fit = AllReduceFit(latency_s=60e-6, bandwidth_bytes_per_s=2e9, world_size=4, sizes=5, rms_relative_error=0)
        link = LinkCost.from_fit(fit)
        assert link.latency_s == pytest.approx(10e-6) and link.bandwidth_bytes_per_s == pytest.approx(3e9)
        for size in (4096, 1 << 20, 64 << 20):
            volume = CollectiveVolume("all_reduce", 1, size)
            assert collective_s(volume, 4, link) == pytest.approx(60e-6 + size / 2e9)


class TestProfile:
    def test_a_one_rank_bundle_gives_its_mean_collection_and_update(self):
        bundle = json.loads(ONE_RANK.read_text())
        profile = profile_of(bundle, ())
        assert profile.collection_s == bundle["runtime"]["collection_time_s"]["mean"]
        assert profile.compute_s == pytest.approx(bundle["runtime"]["iteration_time_s"]["mean"], rel=1e-6)
        assert profile.steps_per_iteration * (1 / profile.compute_s) == pytest.approx(
            bundle["runtime"]["total_fps"]["mean"], rel=1e-6
        )

    def test_a_two_rank_bundle_is_no_profile(self):
        with pytest.raises(ValueError, match="1-rank"):
            profile_of(json.loads(TWO_RANKS.read_text()), ())

    def test_collectives_come_from_a_ranks_section(self):
        volumes = measured_collectives(json.loads(COLLECTIVES.read_text()))
        assert [volume.kind for volume in volumes] == ["all_reduce", "broadcast"]
        assert all(volume.calls > 0 for volume in volumes)
        with pytest.raises(ValueError, match="ranks"):
            measured_collectives(json.loads(TWO_RANKS.read_text()))  # schema 1.0: no ranks section


class TestCommands:
    def test_predict_writes_what_the_model_computes(self, tmp_path):
        """Stated figures in, the model's predictions out, on stdout and in the JSON file."""
        output = tmp_path / "prediction.json"
        result = rlscale(
            *("benchmark", "predict", "--bundle", str(ONE_RANK), "--allreduce_bytes", "1e6", "--allreduce_calls"),
            *("10", "--latency_us", "10", "--bandwidth_gbps", "1", "--inter_node_bandwidth_gbps", "0.1"),
            *("--inter_node_latency_us", "50", "--nodes", "2", "--gpus_per_node", "4", "--output", str(output)),
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        written = json.loads(output.read_text())
        bundle = json.loads(ONE_RANK.read_text())
        profile = RankProfile(**{**written["profile"], "collectives": PROFILE.collectives})
        expected = predict_shapes(profile, CostModel(NVLINK, NETWORK), 2, 4)
        assert profile.compute_s == pytest.approx(bundle["runtime"]["iteration_time_s"]["mean"], rel=1e-6)
        assert [row["world_size"] for row in written["predictions"]] == [1, 2, 4, 8]
        for row, prediction in zip(written["predictions"], expected, strict=True):
            assert row["efficiency"] == pytest.approx(prediction.efficiency)
            assert f"{prediction.efficiency:.3f}" in result.stdout
