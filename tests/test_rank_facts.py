"""The facts every layer derives from a rank's place in the job, each computed in one function: its device and
backend (``rlscale.device``, ``rlscale.dist``), its own GPU and CPU share, the global env steps of an iteration, and
the ranks and GPUs per node of a study job (``rlscale.launch.ranks``)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from rlscale.device import CPU, CUDA, Device, requested_kind
from rlscale.dist import (
    ISOLATED_LOCAL_RANK_ENV,
    PLACEMENT_ENV,
    CpuShare,
    NodePlacement,
    RankInfo,
    global_env_steps,
    node_placement,
    own_gpu_variables,
    rank_cuda_index,
    rank_device,
    rank_info,
)
from rlscale.launch.ranks import NodeSplit
from rlscale.run.rank import isolate_gpu_if_task_asks
from rlscale.tasks import get_spec, registry

SECOND_OF_FOUR = RankInfo(rank=1, local_rank=1, world_size=4, local_world_size=4)


class TestRankDevice:
    def test_local_rank_picks_the_gpu(self):
        assert rank_device(CUDA, SECOND_OF_FOUR, 4) == Device("cuda", 1)

    def test_a_rank_isolated_on_its_gpu_uses_cuda_0(self):
        """After isolate_own_gpu each rank sees one GPU, whatever its local rank."""
        assert rank_cuda_index(SECOND_OF_FOUR, 1) == 0
        assert rank_device(CUDA, SECOND_OF_FOUR, 1) == Device("cuda", 0)

    @pytest.mark.parametrize("requested", ["cpu", "cuda", "cuda:3"])
    def test_a_lone_rank_keeps_its_device(self, requested):
        assert str(rank_device(Device.parse(requested), RankInfo(), 4)) == requested

    def test_cpu_ranks_stay_on_cpu(self):
        assert rank_device(CPU, SECOND_OF_FOUR, 4) == CPU


class TestDeviceParse:
    @pytest.mark.parametrize(
        ("text", "kind", "index", "backend"),
        [
            ("cpu", "cpu", None, "gloo"),
            ("cuda", "cuda", None, "nccl"),
            ("cuda:0", "cuda", 0, "nccl"),
            ("cuda:1", "cuda", 1, "nccl"),
            ("cuda:12", "cuda", 12, "nccl"),
        ],
    )
    def test_valid_forms_round_trip(self, text, kind, index, backend):
        device = Device.parse(text)
        assert (device.kind, device.index, device.backend, str(device)) == (kind, index, backend, text)

    def test_an_empty_index_reads_as_cuda(self):
        assert Device.parse("cuda:") == CUDA

    @pytest.mark.parametrize("text", ["gpu", "cpu:0", "cuda:x", "cuda:-1", "CUDA", "", "mps", "cuda:1:2"])
    def test_each_invalid_form_is_one_line_naming_it(self, text):
        with pytest.raises(ValueError) as raised:
            Device.parse(text)
        assert str(raised.value) == f"{text!r} is not cpu, cuda or cuda:N"

    def test_the_launcher_tells_cpu_ranks_by_the_unchecked_kind(self):
        assert [requested_kind(text) for text in ("cpu", "cpu:0", "cuda:1", "gpu")] == ["cpu", "cpu", "cuda", "gpu"]


def test_global_env_steps_counts_every_rank():
    """16 steps on each of 512 envs on each of 4 ranks."""
    assert global_env_steps(16, 512, 4) == 16 * 512 * 4


class TestStudyJobs:
    def test_ranks_split_evenly_over_nodes(self):
        assert NodeSplit(16, 2).ranks_per_node == 8
        assert NodeSplit(3).ranks_per_node == 3

    @pytest.mark.parametrize(("world_size", "nodes"), [(6, 4), (4, 0)])
    def test_uneven_split_is_refused(self, world_size, nodes):
        with pytest.raises(ValueError, match=f"world size {world_size}"):
            NodeSplit(world_size, nodes)

    def test_gpus_per_node(self):
        """One GPU per local rank on cuda; CPU ranks need none."""
        assert NodeSplit(4).gpus_per_node("cuda") == 4
        assert NodeSplit(16, 2).gpus_per_node("cuda") == 8
        assert NodeSplit(4).gpus_per_node("cpu") == 0


class TestOwnGpu:
    """Every task's CUDA rank sees only its own GPU, as cuda:0, unless the task opts out (ranks_see_all_gpus)."""

    @pytest.fixture
    def rank_1_of_2(self, monkeypatch):
        """Rank 1 of a 2-GPU job; the variables isolation changes are restored afterwards."""
        for name, value in {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
        monkeypatch.delenv(ISOLATED_LOCAL_RANK_ENV, raising=False)
        monkeypatch.setenv(
            PLACEMENT_ENV, NodePlacement("auto", "nvml", (CpuShare((0,), 1), CpuShare((1,), 1))).to_json()
        )
        opted_out = dataclasses.replace(get_spec("Isaac-Cartpole"), task_id="Test-Shared-Gpus", ranks_see_all_gpus=True)
        monkeypatch.setitem(registry._REGISTRY, opted_out.task_id, opted_out)

    @pytest.mark.parametrize(
        ("task", "framework", "expected"),
        [
            ("Isaac-Cartpole", "torch", ("6", "0", [0, 1])),
            ("Test-Shared-Gpus", "torch", ("4,6", "1", [0, 1])),
            ("Isaac-Cartpole", "jax", ("4,6", "1", [0, 1])),  # jax.distributed binds skrl's JAX ranks
        ],
        ids=["default", "opted-out", "skrl-jax"],
    )
    def test_isolation_and_the_rank_own_cpu_share(self, rank_1_of_2, task, framework, expected):
        before = rank_info()
        isolate_gpu_if_task_asks(task, CUDA, framework)
        assert rank_info() == before == RankInfo(rank=1, local_rank=1, world_size=2, local_world_size=2)
        placement = node_placement()
        share = placement.share_of(rank_info().local_rank)
        assert (
            os.environ["CUDA_VISIBLE_DEVICES"],
            os.environ["LOCAL_RANK"],
            [s.cpus[0] for s in placement.shares],
        ) == expected
        assert share == CpuShare((1,), 1)  # the CPUs planned for local rank 1, which the rank still is

    def test_the_rank_keeps_its_local_rank_where_rank_info_reads_it(self):
        assert own_gpu_variables({}, SECOND_OF_FOUR) == {
            "CUDA_VISIBLE_DEVICES": "1",
            "LOCAL_RANK": "0",
            ISOLATED_LOCAL_RANK_ENV: "1",
        }

    def test_placement_round_trips_through_json(self):
        placement = NodePlacement("auto", "nvml", (CpuShare((0, 1), 2), CpuShare((2, 3), 2)))
        assert NodePlacement.from_json(placement.to_json()) == placement
        assert placement.share_of(2) is None and NodePlacement("none", "none").share_of(0) is None
