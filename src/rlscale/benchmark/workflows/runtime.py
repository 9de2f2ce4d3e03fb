"""``rlscale benchmark runtime``: ``env.step`` under random actions, no library and no policy; rank 0's own rate."""

from __future__ import annotations

import argparse
import time
from statistics import median

from rlscale.benchmark.rank_breakdown import rank_phases_section
from rlscale.benchmark.stats import mean_std, rate_stats
from rlscale.benchmark.summary import other_ranks, slowest_rank, spread
from rlscale.benchmark.workflow import Measurement, Workflow, random_actions, record_task_creation, synchronize
from rlscale.dist import RankInfo
from rlscale.heartbeat import beat
from rlscale.run.args import TRACKER_OPTIONS
from rlscale.run.rank import join_process_group, place_rank
from rlscale.run.spec import RunSpec

REFUSES = {
    flag: "runtime steps the task with random actions, without a library"
    for flag in ("--rl_library", "--ml_framework", "--max_iterations", "--resume", "--agent")
} | {flag: "runtime trains no policy" for flag in ("--sync_check_interval", "--checkpoint_interval", *TRACKER_OPTIONS)}


def add_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--warmup_steps", type=int, default=50, help="untimed steps first (default 50)")
    group.add_argument("--num_steps", type=int, default=1000, help="timed steps (default 1000)")
    group.add_argument(
        "--measure_sync_step",
        action="store_true",
        help="synchronise the device around each step (serialized_synchronized: a step's cost, not throughput)",
    )


def check(parser: argparse.ArgumentParser, args: argparse.Namespace, multigpu: bool) -> None:
    if args.overrides:
        parser.error(
            f"{args.overrides[0]}: overrides do not apply to the runtime benchmark: it steps the task as registered, "
            "with random actions"
        )
    if args.warmup_steps < 0 or args.num_steps < 1:
        parser.error(f"--warmup_steps must be >= 0 and --num_steps >= 1 (got {args.warmup_steps}, {args.num_steps})")


def run(measurement: Measurement, spec: RunSpec, rank: RankInfo) -> None:
    """Step the task under random actions; the actions are drawn before each step's timer starts.

    ``host_return`` times ``env.step`` until it returns on the host: on CUDA the kernels it queued may still run.
    ``serialized_synchronized`` synchronises the device before and after each step, so each step is timed
    complete but nothing overlaps: it shows a step's cost, not the achievable throughput.

    Global rank 0 gathers every rank's task creation and median timed step into the ``ranks`` section.
    """
    import torch
    import torch.distributed as dist

    from rlscale.tasks.graph import build_task

    device = str(place_rank(rank, spec.device, spec.cpu_threads))  # as rlscale train
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
    synchronize(device)
    creation_s = time.perf_counter() - started
    record_task_creation(measurement.startup, creation_s, task.compile_s)
    generator = torch.Generator(device).manual_seed(measurement.seed + rank.rank)
    sync = mode == "serialized_synchronized"
    durations: list[float] = []
    barrier()
    loop_started = time.perf_counter()
    try:
        for call in range(warmup_steps + num_steps):
            beat("collect", call, every_s=1.0)  # the hang watchdog's progress, at most one write a second, untimed
            actions = random_actions(task, generator)
            if sync:
                synchronize(device)
            started = time.perf_counter()
            task.step(actions)
            if sync:
                synchronize(device)
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
    step_s = median(durations)
    figures = {"task_creation_s": creation_s, "step_s": step_s, "env_steps_per_s": task.num_envs / step_s}
    if rank.distributed:
        gathered = [None] * rank.world_size if rank.is_main else None
        dist.gather_object(figures, gathered, dst=0)
    else:
        gathered = [figures]
    measurement.ranks = rank_phases_section(gathered, slowest_by="step_s") if rank.is_main else None
    barrier()
    if rank.distributed:
        dist.destroy_process_group()


def summarise(bundle: dict) -> list[str]:
    runtime = bundle["runtime"]
    timing = runtime["environment_step_timing"]
    mode = timing["measurement_mode"]
    caveat = "" if mode == "host_return" else " (each step's serialized cost: not a throughput to report)"
    return [
        f"  env-step throughput {spread(timing['environment_step_fps'], 'env-steps/s')}",
        f"  {timing['environment_step_calls']} timed steps after {runtime['warmup_iterations']} warm-up, "
        f"mode {mode}{caveat}",
        f"  scope: rank 0's own {bundle['extra']['num_envs_per_rank']} envs, measured {other_ranks(bundle)}; not a "
        "global rate",
        *slowest_rank(bundle),
    ]


WORKFLOW = Workflow(
    name="runtime",
    description="env-step throughput under random actions, no policy (rank 0's own rate)",
    uses_library=False,
    scope="rank0",
    run=run,
    summarise=summarise,
    add_options=add_options,
    refuses=REFUSES,
    check=check,
)
