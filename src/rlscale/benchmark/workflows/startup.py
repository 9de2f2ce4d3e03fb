"""``rlscale benchmark startup``: one training iteration of the chosen library, with each cold phase timed on rank 0."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from rlscale.benchmark.rank_breakdown import rank_phases_section
from rlscale.benchmark.summary import number, other_ranks, slowest_rank
from rlscale.benchmark.workflow import (
    Measurement,
    Workflow,
    kernel_cache,
    random_actions,
    record_task_creation,
    synchronize,
    total_startup,
)
from rlscale.dist import RankInfo
from rlscale.run.args import TRACKER_OPTIONS
from rlscale.run.phases import execute
from rlscale.run.spec import RunSpec

if TYPE_CHECKING:
    from rlscale.run.rank_records import RankStartup

REFUSES = {
    "--max_iterations": "startup always times one iteration",
    "--resume": "startup times a cold start",
    "--checkpoint_interval": "startup runs one iteration, with no periodic checkpoint",
} | {flag: "startup times a cold start without a tracker run" for flag in TRACKER_OPTIONS}


def run(measurement: Measurement, spec: RunSpec, rank: RankInfo) -> None:
    """Time the cold start of one training iteration: task, reset, one random step, then the library's iteration.

    A task with a persistent kernel cache (MuJoCo Warp) compiles its kernels on a host's first run and loads them
    later: ``kernel_cache`` says which this run did, so a cold and a warm ``task_compile`` are told apart.

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
        actions = random_actions(task, torch.Generator(task.device).manual_seed(measurement.seed + rank.rank))
        synchronize(str(task.device))
        started = time.perf_counter()
        task.step(actions)
        synchronize(str(task.device))  # a cold step's kernels are part of the phase, not of the next one
        measurement.startup["first_step"] = time.perf_counter() - started

    outcome = execute(dataclasses.replace(spec, max_iterations=1), on_task_created=first_step)
    measurement.status = outcome.status
    phases = measurement.startup
    creation_s = None if outcome.task_creation_s is None else outcome.task_creation_s + reset_s
    record_task_creation(phases, creation_s, outcome.task_compile_s)
    runtime = measurement.runtime
    runtime["kernel_cache"] = kernel_cache(outcome.task_compiled_kernels)
    phases["first_iteration"] = outcome.first_iteration_s if outcome.status == "completed" else None
    runtime["iterations_completed"] = len(outcome.records)
    runtime["steps_per_iteration"] = outcome.steps_per_env * measurement.num_envs_per_rank
    runtime["total_wall_time_s"] = total_startup(phases)
    measurement.ranks = rank_phases_section(
        [_rank_phases(report.startup) for report in outcome.rank_reports or ()], slowest_by="startup_s"
    )


def _rank_phases(startup: RankStartup) -> dict[str, float | None]:
    """A rank's cold-start phases as the ``ranks`` section holds them; ``startup_s`` is the task's creation and the
    first iteration together, the part of a start that every rank times."""
    phases = dataclasses.asdict(startup)
    both = startup.task_creation_s is not None and startup.first_iteration_s is not None
    return phases | {"startup_s": startup.task_creation_s + startup.first_iteration_s if both else None}


def summarise(bundle: dict) -> list[str]:
    runtime = bundle["runtime"]
    phases = ", ".join(f"{phase} {number(value, 's')}" for phase, value in runtime["startup_time_s"].items())
    lines = [f"  {phases}"]
    cache = runtime.get("kernel_cache")
    if cache is not None:
        how = "loaded from the cache" if cache["state"] == "warm" else f"{cache['modules_compiled']} modules compiled"
        lines.append(f"  task_compile with a {cache['state']} kernel cache: {how}")
    return [
        *lines,
        f"  total {number(runtime['total_wall_time_s'], 's')}",
        f"  scope: rank 0's cold start, measured {other_ranks(bundle)}; not an aggregate over ranks",
        *slowest_rank(bundle),
    ]


WORKFLOW = Workflow(
    name="startup",
    description="cold-start phases of one training iteration, timed on rank 0",
    uses_library=True,
    scope="rank0",
    run=run,
    summarise=summarise,
    refuses=REFUSES,
)
