"""The run itself, in phases: prepare (process, manifest, faults, the ranks' sync audit), build the task, train,
finish. ``rlscale train`` and the startup and training benchmarks all run :func:`execute`, so a benchmarked run is
exactly the run ``rlscale train`` would make.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlscale.device import Device
from rlscale.dist import collective_timeout, logs_all_ranks, rank_info, worker_attempt
from rlscale.faults import Fault, fault_from_environment
from rlscale.heartbeat import beat
from rlscale.resume import why_segment_began
from rlscale.run.boundary_stop import boundary_stop_line, boundary_stop_record, stop_if_asked
from rlscale.run.rank import allow_tf32, place_rank
from rlscale.run.spec import RunSpec
from rlscale.run.start import (
    check_continuation,
    continued_record,
    resolve_seed,
    run_directory,
    starting_point,
    tracker_run,
)
from rlscale.run.stop_signals import INTERRUPTED_EXIT_CODE, StopRequest, interrupt_on_stop_signals

if TYPE_CHECKING:
    from rlscale.manifest import Manifest
    from rlscale.rl.common import StopAtBoundary, TrainContext, TrainResult
    from rlscale.rl.progress import IterationRecord, TrackedTask
    from rlscale.run.rank_records import RankReport
    from rlscale.tasks.base import VecTask


@dataclass
class TrainingOutcome:
    """What one run of :func:`execute` leaves behind, for ``rlscale train``'s report and the training benchmark."""

    status: str
    """``completed`` or ``interrupted`` (a crash raises instead)."""
    context: TrainContext
    """What the library was given: this rank, its torch device, the base seed, the iterations requested in this
    invocation and this rank's run directory."""
    manifest: Manifest
    """The run's ``manifest.json``, whose :meth:`~rlscale.manifest.Manifest.recorded` is the version last written."""
    records: list[IterationRecord] = field(default_factory=list)
    """Per-iteration timing and episode statistics, in order (those finished before an interrupt)."""
    num_envs: int | None = None
    """Environments on this rank (None if the run stopped before the task existed)."""
    steps_per_env: int | None = None
    """Env steps per environment per iteration (the library's rollout length)."""
    result: TrainResult | None = None
    """The adapter's result (None when interrupted)."""
    task_creation_s: float | None = None
    """Wall time of building the task, its compilation included."""
    task_compile_s: float | None = None
    """The part of ``task_creation_s`` spent compiling the task's step (:attr:`VecTask.compile_s`)."""
    task_compiled_kernels: int | None = None
    """Kernel modules the task compiled into its engine's cache (:attr:`VecTask.compiled_kernels`)."""
    first_iteration_s: float | None = None
    """Wall time from calling the library to the end of the first iteration's update (library setup included)."""
    train_s: float | None = None
    """Wall time of the library's whole training call."""
    wall_time_s: float = 0.0
    """Wall time of :func:`execute`."""
    rank_reports: list[RankReport] | None = None
    """On global rank 0 of a completed run, every rank's :attr:`records` and cold-start phases in rank order (None
    elsewhere, and on skrl's JAX ranks, :func:`rlscale.run.rank_records.gather_reports`)."""
    stop: StopAtBoundary | None = None
    """How an interrupted run stopped at an iteration boundary, its checkpoint included (None: it stopped at once)."""
    stop_signal: int | None = None
    """The stop signal this process received, if any."""

    def iteration_records(self) -> list[dict[str, Any]]:
        """The finished iterations' records, as the manifest keeps them."""
        return [dataclasses.asdict(record) for record in self.records]

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "completed" else INTERRUPTED_EXIT_CODE


@dataclass
class _Run:
    """One run's state between its phases."""

    spec: RunSpec
    adapter: Any
    start: int
    """Iterations finished before this invocation (by the checkpoint it resumes)."""
    manifest: Manifest
    outcome: TrainingOutcome
    fault: Fault | None
    started: float
    created: Path | None
    """The outermost folder of the run directory's path that this invocation made (None: it existed before)."""
    stop_request: StopRequest | None = None
    sync_checks: list[int] = field(default_factory=list)
    train_started: float = 0.0

    @property
    def context(self) -> TrainContext:
        return self.outcome.context

    def finish_manifest(self, status: str, **fields) -> None:
        """Record in the manifest how this invocation ended, its wall time and the iterations it finished."""
        records = self.outcome.records
        self.outcome.wall_time_s = time.perf_counter() - self.started
        self.manifest.finish(
            status,
            last_iteration=records[-1].iteration if records else None,
            wall_time_s=self.outcome.wall_time_s,
            iterations=self.outcome.iteration_records(),
            **fields,
        )

    def audit_ranks(self, iteration: int) -> list[str]:
        """Gather every rank's policy digest and refuse ranks out of sync (:mod:`rlscale.rank_sync`)."""
        from rlscale.rank_sync import check_digests, gather_digests
        from rlscale.rl.common import parameter_digest

        beat("sync_check", iteration)
        digests = gather_digests(parameter_digest(self.context.policy_probe.read()), self.context.rank)
        check_digests(digests, iteration)
        self.sync_checks.append(iteration)
        return digests

    def on_iteration_start(self, iteration: int) -> None:
        if iteration == self.start + 1:  # the first iteration's update has just ended
            self.outcome.first_iteration_s = time.perf_counter() - self.train_started
        stop_if_asked(self.stop_request, self.context.rank, self.context.device, iteration)
        interval = self.spec.sync_check_interval
        if interval and iteration > self.start and (iteration - self.start) % interval == 0:
            self.audit_ranks(iteration)
        beat("collect", iteration)  # before the fault, so that an injected hang is reported in this phase
        if self.fault is not None:
            self.fault.trigger_if_due(self.context.rank.rank, iteration, self.context.policy_probe.read)


def execute(
    spec: RunSpec,
    *,
    on_task_created: Callable[[VecTask], None] | None = None,
    on_tracking: Callable[[TrackedTask], None] | None = None,
) -> TrainingOutcome:
    """Run one training invocation: task, library, manifest and the ranks' sync audit.

    Args:
        spec: A resolved spec (:func:`rlscale.run.spec.resolve_spec`, not torch-free).
        on_task_created: Called with the task (graphed where possible) right after it is built, before the library
            sees it.
        on_tracking: Called with the tracking wrapper before training starts, so a caller keeps its records even
            if training then raises.

    Once the run is prepared, SIGINT and SIGTERM raise ``KeyboardInterrupt`` once per burst
    (:func:`rlscale.run.stop_signals.interrupt_on_stop_signals`), for the rest of the process.

    Returns:
        The outcome; ``status`` is ``interrupted`` after Ctrl-C or SIGTERM.

    Raises:
        BaseException: whatever training raised, after the manifest recorded the crash.
    """
    from rlscale.rl.common import StopAtBoundary
    from rlscale.tasks.graph import TaskDoesNotFit

    run = prepare(spec)
    run.stop_request = interrupt_on_stop_signals(announce=run.context.rank.is_main)
    try:
        tracked = build_tracked_task(run, on_task_created, on_tracking)
        result, digests = train(run, tracked)
    except TaskDoesNotFit:
        discard_run_directory(run)
        raise
    except KeyboardInterrupt as interrupt:
        record_interrupt(run, interrupt if isinstance(interrupt, StopAtBoundary) else None)
        return run.outcome
    except BaseException as error:
        with contextlib.suppress(OSError):  # a full disk: the error that filled it is the one to report
            run.finish_manifest("crashed", error=f"{type(error).__name__}: {error}")
        with contextlib.suppress(Exception):  # the crash is the error to report
            end_tracker_run(run, 1)
        raise
    finish(run, tracked, result, digests)
    return run.outcome


def record_interrupt(run: _Run, stop: StopAtBoundary | None) -> None:
    """Record a stop on request, at once or at an iteration boundary (``stop``, its checkpoint on disk by then)."""
    outcome, context = run.outcome, run.context
    outcome.stop, outcome.stop_signal = stop, run.stop_request.signal if run.stop_request else None
    fields = (
        {} if stop is None else {"stop": boundary_stop_record(stop, outcome.stop_signal, context.rank, context.device)}
    )
    run.finish_manifest("interrupted", **fields)
    end_tracker_run(run, INTERRUPTED_EXIT_CODE)
    if stop is None:
        print(f"[rlscale] rank {context.rank.rank} interrupted; run directory {context.log_dir}", file=sys.stderr)
    elif context.rank.is_main:
        print(boundary_stop_line(stop, context.log_dir))


def prepare(spec: RunSpec) -> _Run:
    """Set up the process (device, threads, collectives), choose the checkpoint and write the starting manifest."""
    started = time.perf_counter()
    run_dir = run_directory(spec)
    rank = rank_info()
    log_dir = run_dir if rank.is_main else run_dir / f"rank_{rank.rank}"
    # Looked at first, before the library's import and the manifest's git and package queries: the ranks of a launch
    # start together, so none has made a folder yet, and each one's take-back (discard_run_directory) reaches as high,
    # whichever rank is out last.
    created = next((folder for folder in reversed((log_dir, *log_dir.parents)) if not folder.exists()), None)
    from rlscale.manifest import MANIFEST_NAME, Manifest, Segment, device_description
    from rlscale.rl import load_adapter
    from rlscale.rl.common import TrainContext
    from rlscale.rl.dist_compat import use_collective_timeout, use_gloo_for_cpu_ranks
    from rlscale.rl.tracking import keep_client_off

    placed = place_rank(rank, spec.device, spec.cpu_threads)
    device = str(placed)  # the libraries take the device as text
    tf32 = spec.tf32 and allow_tf32(placed)
    if rank.distributed:
        use_collective_timeout(collective_timeout())
        use_gloo_for_cpu_ranks(device)
    keep_client_off(rank, spec.logger)  # before the library's import
    adapter = load_adapter(spec.rl_library)
    agent_cfg, seed = spec.agent_cfg, resolve_seed(spec)
    iterations = spec.max_iterations or adapter.default_iterations(agent_cfg)
    attempt = worker_attempt()  # a restarted worker group goes on as --resume auto would
    resume, start, iterations = starting_point(spec, adapter, run_dir, iterations, attempt, rank.is_main)
    check_continuation(spec, rank, run_dir)
    continued = continued_record(spec, attempt, log_dir / MANIFEST_NAME, start)
    tracker = tracker_run(spec, rank, log_dir, seed, attempt)
    segment = Segment.starting_now(rank.world_size, spec.num_envs, start, why_segment_began(start, attempt, os.environ))
    manifest = Manifest(
        log_dir / MANIFEST_NAME,
        segment,
        continued,
        args=spec.manifest_args(),
        agent_cfg=agent_cfg,
        seed=seed,
        env_seed=seed + rank.rank,
        rank=rank.rank,
        world_size=rank.world_size,
        local_world_size=rank.local_world_size,
        num_nodes=rank.num_nodes,
        run_dir=str(log_dir),
        resumed_from=str(resume) if resume else None,
        speed_levers={"tf32": tf32, **adapter.speed_levers(agent_cfg)},
        tracker=None if tracker is None else tracker.record(),
        **device_description(placed),
    )
    context = TrainContext(
        device=device,
        max_iterations=iterations,
        seed=seed,
        log_dir=log_dir,
        rank=rank,
        resume=resume,
        ml_framework=spec.ml_framework,
        checkpoint_interval=spec.checkpoint_interval,
        lr_scaling=spec.lr_scaling,
        normalizer_sync=spec.normalizer_sync,
        tracker=tracker,
        log_all_ranks=logs_all_ranks(),
    )
    outcome = TrainingOutcome(
        status="interrupted", context=context, manifest=manifest, steps_per_env=adapter.rollout_length(agent_cfg)
    )
    return _Run(spec, adapter, start, manifest, outcome, fault_from_environment(), started, created)


def end_tracker_run(run: _Run, exit_code: int) -> None:
    """End rank 0's tracker run, if its library opened one: 0 marks it finished, any other exit code failed (a crash,
    or the stop that a crash of another rank brings)."""
    if run.context.tracker is not None:
        from rlscale.rl.tracking import finish_run

        finish_run(exit_code)


def discard_run_directory(run: _Run) -> None:
    """Take back what this invocation wrote before its task was built (the manifest), and the folders it made that
    are empty then; every rank does so for its own, so the last one out removes the shared ones."""
    if run.created is None:
        return
    run.manifest.path.unlink(missing_ok=True)
    folder = run.manifest.path.parent
    while folder.is_relative_to(run.created):
        with contextlib.suppress(OSError):  # not empty: another rank's, still to go
            folder.rmdir()
        folder = folder.parent


def build_tracked_task(
    run: _Run,
    on_task_created: Callable[[VecTask], None] | None,
    on_tracking: Callable[[TrackedTask], None] | None,
) -> TrackedTask:
    """Build the task (CUDA-graphed where possible) and wrap it to record every iteration."""
    from rlscale.rl.collective_timing import CollectiveTimer
    from rlscale.rl.progress import TrackedTask
    from rlscale.tasks.graph import build_task

    spec, outcome, context = run.spec, run.outcome, run.context
    rank = context.rank
    task_kwargs = {**spec.typed_env_overrides(), "device": context.device, "seed": context.seed + rank.rank}
    task_kwargs["num_envs"] = spec.num_envs  # resolved in the spec
    created = time.perf_counter()
    task = build_task(spec.task, cuda_graph=not spec.no_cuda_graph, **task_kwargs)
    outcome.task_creation_s = time.perf_counter() - created
    outcome.task_compile_s, outcome.task_compiled_kernels = task.compile_s, task.compiled_kernels
    outcome.num_envs = task.num_envs
    if on_task_created is not None:
        on_task_created(task)
    # skrl's JAX ranks reduce through JAX, which torch.distributed never sees.
    timer = CollectiveTimer(Device.parse(context.device).is_cuda) if spec.ml_framework == "torch" else None
    tracked = TrackedTask(
        task,
        outcome.steps_per_env,
        start_iteration=run.start,
        total_iterations=run.start + context.max_iterations,
        world_size=rank.world_size,
        stream=sys.stdout if rank.is_main or context.log_all_ranks else None,
        on_iteration_start=run.on_iteration_start,
        on_rollout_end=lambda iteration: beat("update", iteration),
        collective_timer=timer,
    )
    outcome.records = tracked.records
    if on_tracking is not None:
        on_tracking(tracked)
    return tracked


def train(run: _Run, tracked: TrackedTask) -> tuple[TrainResult, list[str]]:
    """The library's training call (its collectives timed), then the final sync audit and the gathering of every
    rank's records; returns its result and every rank's digest."""
    from rlscale.run.rank_records import RankReport, RankStartup, gather_reports

    run.train_started = time.perf_counter()
    timer = tracked.collective_timer
    request = run.stop_request
    with timer.installed() if timer is not None else contextlib.nullcontext():
        if request is not None:
            request.deferred = True  # a stop now waits for the next iteration boundary
        try:
            result = run.adapter.train(tracked, run.spec.agent_cfg, run.context)
        finally:
            if request is not None:
                request.deferred = False
    tracked.finish()
    run.outcome.train_s = time.perf_counter() - run.train_started
    if run.outcome.first_iteration_s is None:  # a single iteration ends with the library's return
        run.outcome.first_iteration_s = run.outcome.train_s
    digests = run.audit_ranks(result.iterations_completed)
    outcome = run.outcome
    startup = RankStartup(outcome.task_creation_s, outcome.task_compile_s, outcome.first_iteration_s)
    outcome.rank_reports = gather_reports(RankReport(list(tracked.records), startup), run.context.rank)
    return result, digests


def finish(run: _Run, tracked: TrackedTask, result: TrainResult, digests: list[str]) -> None:
    """Record the completed run in the manifest and leave the process group."""
    import torch

    last = tracked.records[-1] if tracked.records else None
    outcome = run.outcome
    run.finish_manifest(
        "completed",
        num_envs=tracked.num_envs,
        start_iteration=result.start_iteration,
        iterations_completed=result.iterations_completed,
        checkpoint=str(result.checkpoint) if result.checkpoint else None,
        resumed_param_digest=result.resumed_param_digest,
        param_digest=digests[outcome.context.rank.rank],
        rank_param_digests=digests,
        sync_checked_at_iterations=run.sync_checks,
        final_mean_return=last.mean_return if last else None,
        final_mean_episode_length=last.mean_episode_length if last else None,
    )
    outcome.status, outcome.result = "completed", result
    end_tracker_run(run, 0)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
