"""Every rank's time per iteration: the collective timer, the ``ranks`` breakdown and its straggler, and one real
two-rank gloo run with one rank slowed down (``RLSCALE_INJECT_FAULT=delay``)."""

from __future__ import annotations

import json
import re
import statistics
from importlib import util
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from rlscale_command import rlscale

from rlscale.benchmark.bundle import validation_errors
from rlscale.benchmark.rank_breakdown import STRAGGLER_FLOOR_S, ranks_section, straggler_of
from rlscale.rl.collective_timing import PAYLOADS, CollectiveCalls, CollectiveTime, CollectiveTimer
from rlscale.rl.progress import IterationRecord


@pytest.fixture
def one_rank_group(tmp_path):
    """A one-process gloo group, as a rank's own."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


class TestCollectiveTimer:
    def test_counts_times_and_sizes_calls_through_the_module(self, one_rank_group):
        """Calls made as ``torch.distributed.X`` and ``dist.X`` (how the libraries call them) are counted by kind,
        with the bytes of the tensor each contributes, and split at the rollout's end; the originals come back."""
        originals = {name: getattr(dist, name) for name in PAYLOADS}
        timer = CollectiveTimer(on_cuda=False)
        with timer.installed():
            timer.restart()
            torch.distributed.all_reduce(torch.ones(10))  # float32: 40 bytes
            timer.mark_rollout_end()
            dist.all_reduce(torch.ones(3, dtype=torch.float64), op=dist.ReduceOp.SUM)  # 24 bytes
            dist.broadcast(tensor=torch.zeros(5, dtype=torch.int32), src=0)  # 20 bytes
            dist.barrier()
            gathered = [None]
            dist.all_gather_object(gathered, {"kl": 0.1})
            taken = timer.take()
            dist.all_reduce(torch.ones(2))
            second = timer.take()
        assert gathered == [{"kl": 0.1}]
        assert taken.by_kind == {
            "all_gather_object": CollectiveCalls(1, 0),
            "all_reduce": CollectiveCalls(2, 64),
            "barrier": CollectiveCalls(1, 0),
            "broadcast": CollectiveCalls(1, 20),
        }
        assert 0 < taken.rollout_seconds < taken.seconds
        assert second.by_kind == {"all_reduce": CollectiveCalls(1, 8)}  # take() started a new iteration
        assert {name: getattr(dist, name) for name in PAYLOADS} == originals
        dist.all_reduce(torch.ones(1))  # uninstalled: no longer seen
        assert timer.take() == CollectiveTime(0.0, 0.0, {})

    @pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (NCCL)")
    def test_times_nccl_collectives_with_cuda_events(self, tmp_path, monkeypatch):
        """On a GPU rank the calls are bracketed by CUDA events on the current stream and read at take(): what is
        timed is the collective's time on the stream, not the host's call (which returns at once), with the sizes of
        the tensors and the rollout's part split off. The broadcast here also spins the GPU for 50 M clock cycles
        (at least 20 ms below 2.5 GHz), as a rank that waits for a late peer would."""
        real_broadcast = dist.broadcast

        def late_broadcast(tensor, src, group=None, async_op=False):
            torch.cuda._sleep(50_000_000)
            return real_broadcast(tensor, src, group=group, async_op=async_op)

        monkeypatch.setattr(dist, "broadcast", late_broadcast)
        dist.init_process_group("nccl", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
        try:
            timer = CollectiveTimer(on_cuda=True)
            gradients = torch.ones(16 * 2**20, device="cuda")  # 64 MiB
            dist.all_reduce(gradients[:1])  # NCCL makes its communicator at the first collective
            with timer.installed():
                timer.restart()
                dist.all_reduce(gradients[:1024])
                timer.mark_rollout_end()
                dist.all_reduce(gradients)
                dist.broadcast(torch.zeros(8, device="cuda"), src=0)
                taken = timer.take()
        finally:
            dist.destroy_process_group()
        assert taken.by_kind == {
            "all_reduce": CollectiveCalls(2, 4096 + 64 * 2**20),
            "broadcast": CollectiveCalls(1, 32),
        }
        assert taken.rollout_seconds >= 0 and taken.seconds - taken.rollout_seconds > 0.02

    def test_restart_forgets_what_came_before(self, one_rank_group):
        """The library's setup broadcasts, made before the first rollout starts, belong to no iteration."""
        timer = CollectiveTimer(on_cuda=False)
        with timer.installed():
            dist.broadcast(torch.ones(4), src=0)
            timer.restart()
            taken = timer.take()
        assert taken.by_kind == {} and taken.seconds == 0

    @pytest.mark.parametrize("library", ["rsl_rl", "rl_games", "skrl"])
    def test_no_library_binds_a_collective_at_import(self, library):
        """Each library looks its collectives up on the module at call time (``from torch.distributed import X`` would
        keep the untimed function); a library update that binds one fails here."""
        root = Path(util.find_spec(library).origin).parent
        names = "|".join(PAYLOADS)
        binding = re.compile(rf"from\s+torch\.distributed(\.distributed_c10d)?\s+import\s+[^\n]*\b({names})\b")
        sources = sorted(root.rglob("*.py"))
        assert sources
        assert [str(path) for path in sources if binding.search(path.read_text(errors="replace"))] == []


def record(iteration: int, collection_s: float, iteration_s: float, collective_s: float) -> IterationRecord:
    by_kind = {"all_reduce": CollectiveCalls(4, 400)}
    return IterationRecord(
        iteration, collection_s, iteration_s, 1.0, 10.0, collectives=CollectiveTime(collective_s, 0.0, by_kind)
    )


class TestRanksSection:
    def test_slow_rank_is_the_straggler_and_the_others_wait(self):
        """Rank 2 computes 0.3 s longer each iteration; ranks 0 and 1 spend it blocked in the update's collectives."""
        ranks = [
            [record(i, 0.1, 0.6, 0.35) for i in range(4)],
            [record(i, 0.1, 0.6, 0.36) for i in range(4)],
            [record(i, 0.4, 0.6, 0.05) for i in range(4)],
        ]
        section = ranks_section(ranks, warmup=1)
        assert section["iterations_measured"] == 3
        assert (section["slowest_rank"], section["straggler"]) == (2, 2)
        assert section["slowest_rank_excess_s"] == pytest.approx(0.55 - 0.245)
        waits = [rank["wait_s"] for rank in section["per_rank"]]
        assert waits == pytest.approx([0.30, 0.31, 0.0])
        for rank in section["per_rank"]:
            parts = rank["collection_compute_s"] + rank["update_compute_s"] + rank["collective_s"]
            assert parts == pytest.approx(rank["iteration_s"])
            assert rank["collectives"] == {"all_reduce": {"calls": 4, "bytes": 400}}
        assert section["per_rank"][0]["communication_share"] == pytest.approx(0.05 / 0.6)
        assert section["wait_share"] == pytest.approx((0.30 + 0.31) / 0.6 / 3)

    def test_even_ranks_name_no_straggler(self):
        """Ranks within the threshold of each other: the slowest is reported, but not named a straggler."""
        assert straggler_of([0.50, 0.52, 0.51]) == (1, pytest.approx(0.015), None)
        assert straggler_of([0.01, 0.03])[2] is None  # 3x as slow, but by less than the absolute floor
        assert straggler_of([1.0, 1.01 + STRAGGLER_FLOOR_S])[2] is None  # past the floor, but a small share
        assert straggler_of([0.2, 0.25 + STRAGGLER_FLOOR_S]) == (1, pytest.approx(0.05 + STRAGGLER_FLOOR_S), 1)
        assert straggler_of([0.4]) == (0, None, None)

    def test_nothing_to_break_down(self):
        """No gathered records, nothing after the warm-up, or untimed collectives (skrl JAX): no section."""
        assert ranks_section(None, warmup=1) is None
        assert ranks_section([[record(0, 0.1, 0.2, 0.05)]], warmup=1) is None
        untimed = IterationRecord(1, 0.1, 0.2, 1.0, 10.0)
        assert ranks_section([[record(0, 0.1, 0.2, 0.05), untimed]], warmup=1) is None


DELAY_S = 0.5


def test_delayed_rank_is_named_and_the_other_waits(tmp_path):
    """Rank 1 works DELAY_S longer at every iteration: the bundle names it the straggler, and rank 0 waits about that
    long in the collectives; every rank's manifest records its collectives per iteration."""
    args = [
        "benchmark", "training_multigpu", "--num_gpus", "2", "--device", "cpu", "--task", "Isaac-Cartpole-Direct",
        "--num_envs", "16", "--max_iterations", "4", "--log_root", "logs", "--output_path", "out/bundle.json",
    ]  # fmt: skip
    result = rlscale(*args, cwd=tmp_path, env={"RLSCALE_INJECT_FAULT": f"delay:rank=1,seconds={DELAY_S}"})
    assert result.returncode == 0, result.stderr[-3000:]
    bundle = json.loads((tmp_path / "out" / "bundle.json").read_text())
    assert validation_errors(bundle) == []
    assert bundle["extra"]["measurement_scope"] == "rank0_process"  # the rank-0 figures keep their scope
    ranks = bundle["ranks"]
    assert (ranks["straggler"], ranks["slowest_rank"], ranks["iterations_measured"]) == (1, 1, 3)
    rank0, rank1 = ranks["per_rank"]
    assert rank0["wait_s"] >= 0.5 * DELAY_S and rank1["wait_s"] < rank0["wait_s"]
    assert rank1["collection_compute_s"] >= DELAY_S  # the delay falls in rank 1's rollout
    assert ranks["slowest_rank_excess_s"] >= 0.5 * DELAY_S
    assert "ranks: straggler rank 1" in result.stdout
    manifests = sorted((tmp_path / "logs").rglob("manifest.json"), key=lambda path: "rank_" in str(path))
    for rank, path in enumerate(manifests):
        iterations = json.loads(path.read_text())["iterations"]
        collective_s = [record["collectives"]["seconds"] for record in iterations[1:]]
        assert statistics.median(collective_s) == pytest.approx(ranks["per_rank"][rank]["collective_s"])
        assert all(record["collectives"]["by_kind"]["all_reduce"]["bytes"] > 0 for record in iterations)
