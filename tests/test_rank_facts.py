"""The facts every layer derives from a rank's place in the job, each computed in one function: its device and
backend (``rlscale.dist``), the global env steps of an iteration, and the ranks and GPUs per node of a study job
(``rlscale.launch.ranks``)."""

from __future__ import annotations

import pytest

from rlscale.dist import RankInfo, global_env_steps, process_group_backend, rank_cuda_index, rank_device
from rlscale.launch.ranks import gpus_needed_per_node, ranks_per_node

SECOND_OF_FOUR = RankInfo(rank=1, local_rank=1, world_size=4, local_world_size=4)


class TestRankDevice:
    def test_local_rank_picks_the_gpu(self):
        assert rank_device("cuda", SECOND_OF_FOUR, 4) == "cuda:1"

    def test_a_rank_isolated_on_its_gpu_uses_cuda_0(self):
        """After isolate_own_gpu each rank sees one GPU, whatever its local rank."""
        assert rank_cuda_index(SECOND_OF_FOUR, 1) == 0
        assert rank_device("cuda", SECOND_OF_FOUR, 1) == "cuda:0"

    @pytest.mark.parametrize("requested", ["cpu", "cuda", "cuda:3"])
    def test_a_lone_rank_keeps_its_device(self, requested):
        assert rank_device(requested, RankInfo(), 4) == requested

    def test_cpu_ranks_stay_on_cpu(self):
        assert rank_device("cpu", SECOND_OF_FOUR, 4) == "cpu"


@pytest.mark.parametrize(("device", "backend"), [("cpu", "gloo"), ("cuda", "nccl"), ("cuda:1", "nccl")])
def test_process_group_backend(device, backend):
    assert process_group_backend(device) == backend


def test_global_env_steps_counts_every_rank():
    """16 steps on each of 512 envs on each of 4 ranks."""
    assert global_env_steps(16, 512, 4) == 16 * 512 * 4


class TestStudyJobs:
    def test_ranks_split_evenly_over_nodes(self):
        assert ranks_per_node(16, 2) == 8
        assert ranks_per_node(3, 1) == 3

    @pytest.mark.parametrize(("world_size", "nodes"), [(6, 4), (4, 0)])
    def test_uneven_split_is_refused(self, world_size, nodes):
        with pytest.raises(ValueError, match=f"world size {world_size}"):
            ranks_per_node(world_size, nodes)

    def test_gpus_needed_per_node(self):
        """One GPU per local rank on cuda; CPU ranks need none."""
        assert gpus_needed_per_node(4, "cuda") == 4
        assert gpus_needed_per_node(16, "cuda", nodes=2) == 8
        assert gpus_needed_per_node(4, "cpu") == 0
