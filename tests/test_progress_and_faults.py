"""Library-agnostic progress tracking, the fault-injection hook, the rank-sync check and the parameter digest."""

from __future__ import annotations

import io
import math
import re
import time

import pytest
import torch

from rlscale import faults
from rlscale.faults import Fault, InjectedCrash, ProbeFault, parse_fault, parse_probe_fault
from rlscale.rank_sync import RankDivergence, check_digests
from rlscale.rl.common import TorchPolicyParameters, parameter_digest
from rlscale.rl.progress import TrackedTask, episode_statistic
from rlscale.tasks import make_task


class TestTrackedTask:
    def test_episode_statistics_match_a_hand_count(self):
        """Per-iteration mean return/length equal those computed from the raw per-step rewards and dones."""
        task = make_task("Isaac-Cartpole-Direct", num_envs=16, seed=3)
        stream = io.StringIO()
        tracked = TrackedTask(task, steps_per_iteration=40, start_iteration=0, total_iterations=3, stream=stream)
        tracked.reset()
        generator = torch.Generator().manual_seed(0)
        running = torch.zeros(16)
        finished: list[list[tuple[float, int]]] = [[], [], []]
        lengths = torch.zeros(16, dtype=torch.long)
        for step in range(120):
            actions = torch.rand(16, 1, generator=generator) * 2 - 1
            _, reward, terminated, truncated, _ = tracked.step(actions)
            running += reward
            lengths += 1
            for env in torch.nonzero(terminated | truncated).flatten().tolist():
                finished[step // 40].append((running[env].item(), lengths[env].item()))
                running[env], lengths[env] = 0.0, 0
        tracked.finish()
        assert [record.iteration for record in tracked.records] == [0, 1, 2]
        for record, episodes in zip(tracked.records, finished, strict=True):
            assert episodes, "a random policy ends some episodes within 40 steps"
            assert record.mean_return == pytest.approx(sum(r for r, _ in episodes) / len(episodes), rel=1e-5)
            assert record.mean_episode_length == pytest.approx(sum(n for _, n in episodes) / len(episodes))
            assert 0 < record.collection_s <= record.iteration_s
        assert stream.getvalue().count("\n") == 3 and "it 3/3" in stream.getvalue()

    def test_iteration_hook_sees_each_iteration_once(self):
        """The hook fires before the first step of every rollout, numbered from the start iteration."""
        task = make_task("Isaac-Cartpole", num_envs=4)
        seen = []
        tracked = TrackedTask(
            task, 5, start_iteration=7, total_iterations=10, stream=None, on_iteration_start=seen.append
        )
        for _ in range(15):
            tracked.step(torch.zeros(4, 1))
        assert seen == [7, 8, 9]


class TestFaults:
    def test_parse_and_trigger(self):
        """A crash fault raises only on its rank at its iteration."""
        fault = parse_fault("crash:rank=1,iteration=3")
        assert fault == Fault("crash", 1, 3)
        fault.trigger_if_due(0, 3)
        fault.trigger_if_due(1, 2)
        with pytest.raises(InjectedCrash, match="rank 1 at iteration 3"):
            fault.trigger_if_due(1, 3)

    def test_desync_moves_the_parameters(self):
        """A desync fault changes this rank's parameter digest."""
        parameters = TorchPolicyParameters(torch.nn.Linear(3, 2))
        before = parameter_digest(parameters())
        parse_fault("desync:rank=0,iteration=0").trigger_if_due(0, 0, parameters)
        assert parameter_digest(parameters()) != before

    def test_delay_slows_its_rank_at_every_iteration_from_its_own(self):
        """A delay fault works its seconds on its rank at every iteration from the given one (0 if none), only there."""
        assert parse_fault("delay:rank=1,seconds=0.5") == Fault("delay", 1, 0, 0.5)
        fault = parse_fault("delay:rank=1,iteration=2,seconds=0.05")
        for rank, iteration, waits in [(0, 3, False), (1, 1, False), (1, 2, True), (1, 7, True)]:
            started = time.monotonic()
            fault.trigger_if_due(rank, iteration)
            assert (time.monotonic() - started >= 0.05) is waits, (rank, iteration)

    def test_an_attempt_fires_in_that_attempt_of_the_worker_group_only(self, monkeypatch):
        """attempt=0 fires in torchrun's first attempt only (TORCHELASTIC_RESTART_COUNT 0, or unset outside
        torchrun), so the group that --max_restarts starts after it runs on; without it, a fault fires in every one."""
        assert parse_fault("crash:rank=1,iteration=3,attempt=0") == Fault("crash", 1, 3, attempt=0)
        monkeypatch.setenv(faults.ENV_VAR, "crash:rank=1,iteration=3,attempt=0")
        monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
        assert faults.fault_from_environment(2) == Fault("crash", 1, 3, attempt=0)
        for restarts, fires in [("0", True), ("1", False), ("2", False)]:
            monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", restarts)
            assert (faults.fault_from_environment(2) is not None) is fires, restarts
        monkeypatch.setenv(faults.ENV_VAR, "crash:rank=1,iteration=3,attempt=1")
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
        assert faults.fault_from_environment(2) == Fault("crash", 1, 3, attempt=1)
        monkeypatch.setenv(faults.ENV_VAR, "crash:rank=1,iteration=3")
        assert faults.fault_from_environment(2) == Fault("crash", 1, 3)
        monkeypatch.setenv(faults.ENV_VAR, "crash:rank=2,iteration=3,attempt=0")
        with pytest.raises(ValueError, match="rank 2 does not exist"):  # checked in every attempt
            faults.fault_from_environment(2)

    @pytest.mark.parametrize(
        "spec",
        [
            "crash", "explode:rank=1,iteration=3", "crash:rank=1", "crash:rank=x,iteration=1",
            "hang:rank=-1,iteration=1", "delay:rank=1", "delay:rank=1,seconds=-1", "crash:rank=1,iteration=3,seconds=1",
            "crash:rank=1,iteration=3,attempt=-1", "crash:rank=1,iteration=3,attempt=first",
        ],
    )  # fmt: skip
    def test_malformed_specs_are_refused(self, spec):
        """Anything but KIND:rank=R,iteration=I with a known kind and non-negative numbers is an error."""
        with pytest.raises(ValueError, match="RLSCALE_INJECT_FAULT"):
            parse_fault(spec)


class TestProbeFault:
    @pytest.fixture
    def blocks(self, monkeypatch):
        """``_block_forever`` raising instead: a fault that fires shows as this error."""

        def block() -> None:
            raise TimeoutError("blocked")

        monkeypatch.setattr(faults, "_block_forever", block)

    def test_parse(self):
        assert parse_probe_fault("probe_hang:world_size=3") == ProbeFault(3)
        assert parse_probe_fault("probe_hang:world_size=3,unless=NCCL_P2P_DISABLE,rank=1") == ProbeFault(
            3, "NCCL_P2P_DISABLE", 1
        )
        assert parse_probe_fault("probe_hang:unless=NCCL_ALGO=Ring,world_size=2").unless == "NCCL_ALGO=Ring"

    def test_fires_at_its_world_size_unless_the_variable_is_set(self, blocks):
        """Every rank blocks at world size 3 unless NCCL_P2P_DISABLE is set to something but empty or 0."""
        fault = parse_probe_fault("probe_hang:world_size=3,unless=NCCL_P2P_DISABLE")
        fault.trigger_if_due(0, 2, {})
        for environ in ({"NCCL_P2P_DISABLE": "1"}, {"NCCL_P2P_DISABLE": "yes"}):
            fault.trigger_if_due(2, 3, environ)
        for environ in ({}, {"NCCL_P2P_DISABLE": "0"}, {"NCCL_P2P_DISABLE": ""}, {"NCCL_SHM_DISABLE": "1"}):
            for rank in range(3):
                with pytest.raises(TimeoutError):
                    fault.trigger_if_due(rank, 3, environ)

    def test_a_value_and_a_rank(self, blocks):
        """unless=NAME=VALUE wants that value; rank=R blocks that rank only."""
        fault = parse_probe_fault("probe_hang:world_size=2,unless=NCCL_ALGO=Ring,rank=1")
        fault.trigger_if_due(0, 2, {})
        fault.trigger_if_due(1, 2, {"NCCL_ALGO": "Ring"})
        with pytest.raises(TimeoutError):
            fault.trigger_if_due(1, 2, {"NCCL_ALGO": "Tree"})

    def test_training_ignores_it_and_the_probe_ignores_training_faults(self, monkeypatch):
        monkeypatch.setenv(faults.ENV_VAR, "probe_hang:world_size=3,unless=NCCL_P2P_DISABLE")
        assert faults.fault_from_environment(2) is None
        assert faults.probe_fault_from_environment() == ProbeFault(3, "NCCL_P2P_DISABLE")
        monkeypatch.setenv(faults.ENV_VAR, "crash:rank=1,iteration=3")
        assert faults.probe_fault_from_environment() is None

    @pytest.mark.parametrize(
        "spec",
        [
            "probe_hang", "probe_hang:world_size=1", "probe_hang:world_size=x", "probe_hang:rank=1",
            "probe_hang:world_size=3,unless=", "probe_hang:world_size=3,rank=3", "probe_hang:world_size=3,seconds=1",
        ],
    )  # fmt: skip
    def test_malformed_specs_are_refused(self, spec, monkeypatch):
        """Training refuses a malformed probe fault too, so a typo is never silently ignored."""
        with pytest.raises(ValueError, match="probe_hang:world_size=W"):
            parse_probe_fault(spec)
        monkeypatch.setenv(faults.ENV_VAR, spec)
        with pytest.raises(ValueError, match="probe_hang:world_size=W"):
            faults.fault_from_environment()


class TestRankSync:
    def test_digest_depends_on_values_and_names(self):
        """Equal parameters hash equal; a changed value or name changes the digest."""
        state = {"w": torch.ones(2, 2), "b": torch.zeros(2)}
        assert parameter_digest(state) == parameter_digest({"b": torch.zeros(2), "w": torch.ones(2, 2)})
        assert parameter_digest(state) != parameter_digest({"w": torch.ones(2, 2), "b": torch.tensor([0.0, 1e-7])})
        assert parameter_digest(state) != parameter_digest({"W": torch.ones(2, 2), "b": torch.zeros(2)})

    @pytest.mark.parametrize("state", [{}, {"w": torch.zeros(0, 4), "b": torch.zeros(0)}], ids=["no entries", "empty"])
    def test_digest_refuses_a_state_without_values(self, state):
        """A probe that reads nothing would make every rank's digest equal: the digest refuses it."""
        with pytest.raises(ValueError, match="no parameter values to digest"):
            parameter_digest(state)

    def test_check_names_every_diverged_rank(self):
        """The divergence message lists exactly the ranks that differ from rank 0."""
        check_digests(["a", "a", "a"], iteration=5)
        with pytest.raises(RankDivergence, match=r"iteration 5: rank\(s\) 1, 3 differ from rank 0 \(4 ranks\)"):
            check_digests(["a", "b", "a", "c"], iteration=5)


@pytest.mark.parametrize("world_size", [1, 2])
def test_nan_means_before_any_episode_ends(world_size):
    """Before any episode ends, the means are NaN rather than a made-up 0, and the progress line shows – for them; its
    rate is all ranks' steps, labelled so, with each rank's beside it on several."""
    task = make_task("Isaac-Cartpole", num_envs=4)
    stream = io.StringIO()
    tracked = TrackedTask(task, 2, start_iteration=0, total_iterations=1, world_size=world_size, stream=stream)
    tracked.step(torch.zeros(4, 1))
    tracked.finish()
    assert math.isnan(tracked.records[0].mean_return)
    line = re.fullmatch(
        r"\[rlscale\] it 1/1  ([\d,]+) steps/s global(?: \(([\d,]+) per rank\))?  return –  ep_len –  ETA \d+s\n",
        stream.getvalue(),
    )
    assert line, stream.getvalue()
    global_rate, rank_rate = (int(rate.replace(",", "")) if rate else None for rate in line.groups())
    if world_size == 1:
        assert rank_rate is None
    else:
        assert abs(global_rate - world_size * rank_rate) <= world_size  # each rounded to a whole step/s


@pytest.mark.parametrize(("value", "shown"), [(None, "–"), (math.nan, "–"), (42.46, "42.5"), (0.0, "0.0")])
def test_episode_statistic_shows_a_dash_until_an_episode_ends(value, shown):
    assert episode_statistic(value, 1) == shown
