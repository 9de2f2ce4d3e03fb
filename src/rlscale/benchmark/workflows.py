"""The three measurements. Each fills a :class:`Measurement` as it goes, so a run that stops early still reports
what it measured before it stopped.

* startup: one training iteration of the chosen library, with each cold phase timed.
* runtime: ``env.step`` under random actions, no library and no policy.
* training: ``rlscale train``'s own run (:func:`rlscale.run.phases.execute`), timed from :class:`TrackedTask`'s
  records; with ``--peer``, the peer baseline's figures beside them (:mod:`.comparison`).

Each takes the run's :class:`~rlscale.run.spec.RunSpec`; a workflow's own options are in its ``options``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from rlscale.benchmark.comparison import peer_section
from rlscale.benchmark.stats import ema, finite_or_none, mean_std, rate_stats
from rlscale.dist import RankInfo, global_env_steps
from rlscale.heartbeat import beat
from rlscale.run.phases import execute
from rlscale.run.rank import join_process_group, place_rank
from rlscale.run.spec import RunSpec

PHASES = ("python_imports", "task_config", "env_creation", "task_compile", "first_step", "first_iteration")
"""Startup phases in order. ``task_compile`` is a JIT task's compilation (MJX), taken out of ``env_creation``; it
stays None for a task that compiles nothing."""
OPTIONAL_PHASES = {"task_compile"}
THROUGHPUT_FIELDS = ("iteration_time_s", "collection_time_s", "learning_time_s", "collection_fps", "total_fps")


@dataclass
class Measurement:
    """What one workflow measured on this rank; every figure is None until measured."""

    workflow: str
    num_envs_per_rank: int
    """Environments per rank, as configured (``--num_envs`` or the task's default)."""
    seed: int
    """Base seed; rank r seeds its task and its random actions with seed + r."""
    status: str = "completed"
    startup: dict = field(default_factory=lambda: dict.fromkeys(PHASES))
    runtime: dict = field(default_factory=dict)
    learning: dict | None = None
    max_iterations: int | None = None
    peer: dict | None = None
    """The peer baseline's result, on global rank 0 of ``training --peer`` (see :mod:`.comparison`)."""

    def __post_init__(self) -> None:
        self.runtime = {
            "iterations_completed": 0,
            "warmup_iterations": 0,
            "total_wall_time_s": None,
            "steps_per_iteration": None,
            **dict.fromkeys((*THROUGHPUT_FIELDS, "iterations_per_s")),
            "environment_step_timing": None,
            "peer": None,
        }


def record_task_creation(phases: dict, creation_s: float | None, compile_s: float | None) -> None:
    """Split a task's construction time into ``env_creation`` and its own compilation (``task_compile``)."""
    phases["task_compile"] = compile_s
    phases["env_creation"] = None if creation_s is None else creation_s - (compile_s or 0.0)


def count_compile_as_creation(phases: dict) -> None:
    """For a repeat in a warm process: the task's JIT compilation was paid once per process (the MJX backend keeps
    its executables), so ``task_compile`` is null and whatever the task still reported stays in ``env_creation``."""
    if phases["task_compile"] is not None and phases["env_creation"] is not None:
        phases["env_creation"] += phases["task_compile"]
    phases["task_compile"] = None


def total_startup(phases: dict) -> float | None:
    """Sum of the phases, or None while a required one is unmeasured."""
    if any(phases[name] is None for name in PHASES if name not in OPTIONAL_PHASES):
        return None
    return sum(value for value in phases.values() if value is not None)


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def _random_actions(task, generator):
    """Actions uniform in [-1, 1], the task's nominal range."""
    import torch

    shape = (task.num_envs, task.num_actions)
    return torch.rand(shape, generator=generator, device=task.device) * 2.0 - 1.0


def run_startup(measurement: Measurement, spec: RunSpec, rank: RankInfo) -> None:
    """Time the cold start of one training iteration: task, reset, one random step, then the library's iteration.

    ``first_iteration`` runs from calling the library to the end of its first update, so it holds the library's
    setup (models, optimiser, process group on several ranks) and, with one iteration, rank 0's checkpoint write.
    """
    import torch

    reset_s = 0.0

    def first_step(task) -> None:
        nonlocal reset_s
        started = time.perf_counter()
        task.reset()
        reset_s = time.perf_counter() - started
        actions = _random_actions(task, torch.Generator(task.device).manual_seed(measurement.seed + rank.rank))
        _synchronize(str(task.device))
        started = time.perf_counter()
        task.step(actions)
        _synchronize(str(task.device))  # a cold step's kernels are part of the phase, not of the next one
        measurement.startup["first_step"] = time.perf_counter() - started

    outcome = execute(dataclasses.replace(spec, max_iterations=1), on_task_created=first_step)
    measurement.status = outcome.status
    phases = measurement.startup
    creation_s = None if outcome.task_creation_s is None else outcome.task_creation_s + reset_s
    record_task_creation(phases, creation_s, outcome.task_compile_s)
    phases["first_iteration"] = outcome.first_iteration_s if outcome.status == "completed" else None
    runtime = measurement.runtime
    runtime["iterations_completed"] = len(outcome.records)
    runtime["steps_per_iteration"] = outcome.steps_per_env * measurement.num_envs_per_rank
    runtime["total_wall_time_s"] = total_startup(phases)


def run_runtime(measurement: Measurement, spec: RunSpec, rank: RankInfo) -> None:
    """Step the task under random actions; the actions are drawn before each step's timer starts.

    ``host_return`` times ``env.step`` until it returns on the host: on CUDA the kernels it queued may still run.
    ``serialized_synchronized`` synchronises the device before and after each step, so each step is timed
    complete but nothing overlaps: it shows a step's cost, not the achievable throughput.
    """
    import torch
    import torch.distributed as dist

    from rlscale.tasks.graph import build_task

    device = str(place_rank(spec.device, spec.cpu_threads)[1])  # as rlscale train
    warmup_steps, num_steps = spec.options["warmup_steps"], spec.options["num_steps"]
    mode = "serialized_synchronized" if spec.options["measure_sync_step"] else "host_return"
    timing = {"environment_step_time_s": None, "environment_step_fps": None, "environment_step_calls": 0}
    measurement.runtime["environment_step_timing"] = timing | {"measurement_mode": mode}
    measurement.runtime["warmup_iterations"] = warmup_steps
    if rank.distributed:  # only to start the ranks' stepping together, so that rank 0 meets its contention
        join_process_group(rank, spec.device)

    def barrier() -> None:
        if rank.distributed:
            dist.all_reduce(torch.zeros(1, device=device))

    started = time.perf_counter()
    task = build_task(  # stepped as rlscale train steps it
        spec.task,
        cuda_graph=not spec.no_cuda_graph,
        device=device,
        seed=measurement.seed + rank.rank,
        num_envs=measurement.num_envs_per_rank,
    )
    task.reset()
    _synchronize(device)
    record_task_creation(measurement.startup, time.perf_counter() - started, task.compile_s)
    generator = torch.Generator(device).manual_seed(measurement.seed + rank.rank)
    sync = mode == "serialized_synchronized"
    durations: list[float] = []
    barrier()
    loop_started = time.perf_counter()
    try:
        for call in range(warmup_steps + num_steps):
            beat("collect", call, every_s=1.0)  # the hang watchdog's progress, at most one write a second, untimed
            actions = _random_actions(task, generator)
            if sync:
                _synchronize(device)
            started = time.perf_counter()
            task.step(actions)
            if sync:
                _synchronize(device)
            elapsed = time.perf_counter() - started
            if call == 0:
                measurement.startup["first_step"] = elapsed
            if call >= warmup_steps:
                durations.append(elapsed)
    finally:  # an interrupted run still reports the steps it timed
        measurement.runtime["total_wall_time_s"] = time.perf_counter() - loop_started
        timing.update(
            environment_step_time_s=mean_std(durations),
            environment_step_fps=rate_stats(task.num_envs, durations),
            environment_step_calls=len(durations),
        )
        measurement.runtime["environment_step_timing"] = timing | {"measurement_mode": mode}
        measurement.runtime["iterations_completed"] = len(durations)
        measurement.runtime["steps_per_iteration"] = task.num_envs
    barrier()
    if rank.distributed:
        dist.destroy_process_group()


def training_figures(records, steps_per_iteration: int, warmup: int) -> dict:
    """Throughput fields from per-iteration records, the first ``warmup`` excluded.

    ``steps_per_iteration`` is global (every rank's steps): with lockstep ranks, rank 0's iteration time is the
    job's, so global throughput is those steps over rank 0's time.
    """
    measured = records[warmup:]
    iteration = [record.iteration_s for record in measured]
    collection = [record.collection_s for record in measured]
    return {
        "iteration_time_s": mean_std(iteration),
        "collection_time_s": mean_std(collection),
        "learning_time_s": mean_std([record.iteration_s - record.collection_s for record in measured]),
        "collection_fps": rate_stats(steps_per_iteration, collection),
        "total_fps": rate_stats(steps_per_iteration, iteration),
        "iterations_per_s": rate_stats(1.0, iteration),
    }


def learning_curves(records, alpha: float, env_steps_per_iter: int) -> dict:
    """Return and episode length per iteration, raw and EMA-smoothed (NaN until an episode has ended)."""

    def curve(series: list[float]) -> dict:
        return {
            "final_raw": finite_or_none(series[-1]) if series else None,
            "final_ema": ema(series, alpha),
            "series_per_iter": [finite_or_none(value) for value in series],
        }

    return {
        "ema_alpha": alpha,
        "reward": curve([record.mean_return for record in records]),
        "ep_length": curve([record.mean_episode_length for record in records]),
        "env_steps_per_iter": env_steps_per_iter,
    }


def plan_training(measurement: Measurement, spec: RunSpec, refuse: Callable[[str], NoReturn]) -> None:
    """Resolve the iterations to run (the agent config's by default) and ``refuse`` a warm-up that leaves none."""
    from rlscale.rl import load_adapter

    adapter = load_adapter(spec.rl_library)
    measurement.max_iterations = spec.max_iterations or adapter.default_iterations(spec.agent_cfg)
    warmup = spec.options["warmup_iterations"]
    if warmup >= measurement.max_iterations:
        refuse(
            f"--warmup_iterations {warmup} leaves none of the {measurement.max_iterations} iterations to measure; "
            "lower it or raise --max_iterations"
        )


def run_training(measurement: Measurement, spec: RunSpec, rank: RankInfo) -> None:
    """End-to-end PPO through ``rlscale train``'s run; figures cover every rank (see :func:`training_figures`)."""
    tracked = []
    warmup, ema_alpha = spec.options["warmup_iterations"], spec.options["ema_alpha"]
    runtime = measurement.runtime
    runtime["warmup_iterations"] = warmup
    measurement.learning = learning_curves([], ema_alpha, 1)

    def summarise() -> None:  # also after a crash, from the iterations that finished
        records = tracked[0].records if tracked else []
        if measurement.peer is not None:
            from rlscale.tasks.graph import env_step_of

            rlscale_env_step = env_step_of(tracked[0].task) if tracked else None
            iteration_s = [record.iteration_s for record in records]
            runtime["peer"] = peer_section(measurement.peer, iteration_s, warmup, rlscale_env_step)
        if not tracked:
            return
        steps = global_env_steps(tracked[0].steps_per_iteration, tracked[0].num_envs, rank.world_size)
        runtime.update(training_figures(records, steps, warmup), steps_per_iteration=steps)
        runtime["iterations_completed"] = len(records)
        measurement.learning = learning_curves(records, ema_alpha, steps)

    try:
        outcome = execute(spec, on_tracking=tracked.append)
    finally:
        summarise()
    measurement.status = outcome.status
    record_task_creation(measurement.startup, outcome.task_creation_s, outcome.task_compile_s)
    measurement.startup["first_iteration"] = outcome.first_iteration_s
    runtime["total_wall_time_s"] = outcome.train_s
