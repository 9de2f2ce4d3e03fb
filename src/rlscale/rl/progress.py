"""Library-agnostic progress: a task wrapper that counts steps, episodes and iteration times.

Every library steps the task through its own loop, so watching ``step`` is the one place that sees all three alike.
Statistics stay on the task's device and are read once per iteration, so the hot path adds no host sync.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

import torch

from rlscale.dist import global_env_steps
from rlscale.rl.collective_timing import CollectiveTime, CollectiveTimer
from rlscale.tasks.base import Observations, VecTask

METRIC_PREFIX = "Metrics/"
"""Prefix of the task's ``extras["log"]`` keys that the records carry (task metrics, not reward terms)."""


@dataclass
class IterationRecord:
    """One finished iteration as seen from the task: the rollout, then the library's update."""

    iteration: int
    """Iteration number counted from the start of training (a resumed run continues the count)."""
    collection_s: float
    """Wall time from the first to the last env step of the rollout."""
    iteration_s: float
    """Wall time from this rollout's first step to the next rollout's first step (collection + learning)."""
    mean_return: float
    """Mean undiscounted return of the episodes that ended during the rollout (NaN if none did)."""
    mean_episode_length: float
    """Mean length in steps of those episodes (NaN if none did)."""
    env_steps: int = 0
    """Global env steps (every rank's) collected from the start of training to the end of this rollout."""
    elapsed_s: float = 0.0
    """Wall time from the start of training (the wrapper is made just before the library's training call, so the
    library's setup and process-group start count) to the end of this iteration; a resumed run counts from its own
    start."""
    metrics: dict[str, float] = field(default_factory=dict)
    """The task's ``Metrics/<name>`` log values (such as Rlscale-Ant's forward speed), each the mean over the
    episodes that ended during the rollout (NaN until one ended)."""
    collectives: CollectiveTime | None = None
    """This rank's ``torch.distributed`` collectives during the iteration (None where they were not timed: skrl's
    JAX ranks)."""


class TrackedTask(VecTask):
    """Forwards to a task and records per-iteration timing and episode statistics.

    Args:
        task: The task to wrap.
        steps_per_iteration: Rollout length of the library's PPO config (env steps per iteration).
        start_iteration: Iteration number of the first rollout (non-zero after a resume).
        total_iterations: Last iteration number + 1, for the ETA.
        world_size: Ranks stepping in lockstep, for the global throughput.
        stream: Where the one-line progress reports go; None prints nothing.
        on_iteration_start: Called with the iteration number before the first step of each rollout.
        on_rollout_end: Called with the iteration number after the last step of each rollout, when the library's
            update begins.
        collective_timer: Times this rank's collectives; each record takes those of its iteration.
    """

    def __init__(
        self,
        task: VecTask,
        steps_per_iteration: int,
        start_iteration: int,
        total_iterations: int,
        world_size: int = 1,
        stream: TextIO | None = sys.stdout,
        on_iteration_start: Callable[[int], None] | None = None,
        on_rollout_end: Callable[[int], None] | None = None,
        collective_timer: CollectiveTimer | None = None,
    ) -> None:
        self.task = task
        self.cfg = task.cfg
        self.num_envs, self.device, self.num_actions = task.num_envs, task.device, task.num_actions
        self.observation_dims, self.max_episode_length = task.observation_dims, task.max_episode_length
        self.step_dt, self.is_finite_horizon = task.step_dt, task.is_finite_horizon
        self.steps_per_iteration = steps_per_iteration
        self.total_iterations = total_iterations
        self.world_size = world_size
        self.stream = stream
        self.on_iteration_start = on_iteration_start
        self.on_rollout_end = on_rollout_end
        self.collective_timer = collective_timer
        self.records: list[IterationRecord] = []
        self._iteration = start_iteration
        self._steps_in_rollout = 0
        self._rollout_start = self._last_step_end = 0.0
        self._metric_keys: list[str] | None = None  # the task's Metrics/ log keys, known from its first step
        self._sums = torch.zeros(3, device=self.device)  # returns, lengths, episode count, then each metric
        self._last_means: list[float] = []
        self._started = time.perf_counter()  # made just before the library's training call

    @property
    def steps_per_iteration_globally(self) -> int:
        """Env steps of one iteration over all ranks."""
        return global_env_steps(self.steps_per_iteration, self.num_envs, self.world_size)

    episode_length_buf = property(
        lambda self: self.task.episode_length_buf,
        lambda self, value: setattr(self.task, "episode_length_buf", value),
    )

    def reset(self) -> tuple[Observations, dict]:
        return self.task.reset()

    def get_observations(self) -> Observations:
        return self.task.get_observations()

    def close(self) -> None:
        self.task.close()

    def check_physics(self) -> None:
        self.task.check_physics()

    def step(self, actions: torch.Tensor):
        now = time.perf_counter()
        if self._steps_in_rollout == self.steps_per_iteration:
            self._finish_iteration(now)
        if self._steps_in_rollout == 0:
            # The rollout starts on entry: rlscale's own per-iteration work (the statistics' sync, the progress line,
            # heartbeats, audits) is counted in the iteration it delays, never left between two.
            self._rollout_start = now
            if self.collective_timer is not None:  # the library's setup broadcasts belong to no iteration
                self.collective_timer.restart()
            if self.on_iteration_start is not None:
                self.on_iteration_start(self._iteration)
        observations, reward, terminated, truncated, extras = self.task.step(actions)
        log = extras.get("log", {})
        if self._metric_keys is None:
            self._metric_keys = [key for key in log if key.startswith(METRIC_PREFIX)]
            with torch.inference_mode(False):  # libraries roll out in inference mode; the sums outlive it
                self._sums = torch.zeros(3 + len(self._metric_keys), device=self.device)
            self._last_means = [math.nan] * (2 + len(self._metric_keys))
        done = (terminated | truncated).to(self._sums.dtype)
        count = done.sum()
        # A log value is the mean over the episodes that ended in this step, so weighting it by their count sums it
        # over the rollout's episodes (steps where none ended repeat stale values, at weight zero).
        self._sums += torch.stack(
            (
                (extras["episode_return"] * done).sum(),
                (extras["episode_length"] * done).sum(),
                count,
                *(log[key] * count for key in self._metric_keys),
            )
        )
        self._steps_in_rollout += 1
        self._last_step_end = time.perf_counter()
        if self._steps_in_rollout == self.steps_per_iteration:
            if self.collective_timer is not None:
                self.collective_timer.mark_rollout_end()
            if self.on_rollout_end is not None:
                self.on_rollout_end(self._iteration)
        return observations, reward, terminated, truncated, extras

    def finish(self) -> None:
        """Close the last iteration once the library has returned (its update is done by then)."""
        if self._steps_in_rollout:
            self._finish_iteration(time.perf_counter())

    def _finish_iteration(self, now: float) -> None:
        returns, lengths, count, *metrics = self._sums.tolist()  # the one host sync per iteration
        self._sums.zero_()
        check_physics = getattr(self.task, "check_physics", None)  # a duck-typed task may lack the optional hook
        if check_physics is not None:
            check_physics()
        if count:
            self._last_means = [returns / count, lengths / count, *(value / count for value in metrics)]
        record = IterationRecord(
            iteration=self._iteration,
            collection_s=self._last_step_end - self._rollout_start,
            iteration_s=now - self._rollout_start,
            mean_return=self._last_means[0],
            mean_episode_length=self._last_means[1],
            env_steps=(self._iteration + 1) * self.steps_per_iteration_globally,
            elapsed_s=now - self._started,
            metrics=dict(zip(self._metric_keys, self._last_means[2:], strict=True)),
            collectives=None if self.collective_timer is None else self.collective_timer.take(),
        )
        self.records.append(record)
        self._iteration += 1
        self._steps_in_rollout = 0
        if self.stream is not None:
            print(self._progress_line(record), file=self.stream, flush=True)

    def _progress_line(self, record: IterationRecord) -> str:
        fps = self.steps_per_iteration_globally / max(record.iteration_s, 1e-9)
        rate = f"{fps:,.0f} steps/s global"
        if self.world_size > 1:
            rate += f" ({fps / self.world_size:,.0f} per rank)"
        recent = self.records[-10:]
        seconds_per_iteration = sum(r.iteration_s for r in recent) / len(recent)
        eta = max(0, self.total_iterations - self._iteration) * seconds_per_iteration
        return (
            f"[rlscale] it {record.iteration + 1}/{self.total_iterations}  {rate}  "
            f"return {episode_statistic(record.mean_return, 2)}  "
            f"ep_len {episode_statistic(record.mean_episode_length, 1)}  ETA {eta:.0f}s"
        )


NO_EPISODE_YET = "–"
"""What the console shows for an episode statistic before the first episode has ended."""


def episode_statistic(value: float | None, decimals: int) -> str:
    """An episode statistic for the console: ``value`` with ``decimals`` decimals, or :data:`NO_EPISODE_YET` while
    it has none (NaN in an :class:`IterationRecord`, None in a manifest of a run with no iteration)."""
    if value is None or math.isnan(value):
        return NO_EPISODE_YET
    return f"{value:.{decimals}f}"
