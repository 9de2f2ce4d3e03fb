"""One benchmark on one rank: measure, and on global rank 0 sample resources, write the bundle and report.

Both entry points end here with a resolved spec: ``rlscale benchmark <workflow>`` in its own process, and every rank
of ``rlscale benchmark <workflow>_multigpu`` through :mod:`.worker`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from rlscale.argparsing import OneLineParser
from rlscale.benchmark import bundle as bundles
from rlscale.benchmark.options import SEED_FIELD
from rlscale.benchmark.peer_ratio import PeerMismatch, load_peer_result
from rlscale.benchmark.resources import ResourceSampler, visible_cuda_devices
from rlscale.benchmark.summary import summary_lines
from rlscale.benchmark.workflow import Measurement, Workflow, count_compile_as_creation
from rlscale.dist import RankInfo, global_env_steps, rank_device, rank_info
from rlscale.paths import one_line_on_full_disk
from rlscale.run.spec import RunSpec
from rlscale.run.start import resolve_seed
from rlscale.run.task_errors import one_line_if_the_task_does_not_fit


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _prepare(workflow: Workflow, spec: RunSpec, multigpu: bool) -> Measurement:
    """Set up the measurement; a setting that leaves nothing to measure exits 2, before anything is written."""
    measurement = Measurement(workflow.name, num_envs_per_rank=spec.num_envs, seed=resolve_seed(spec))
    if workflow.plan is not None:
        name = f"{workflow.name}_multigpu" if multigpu else workflow.name
        workflow.plan(measurement, spec, OneLineParser(prog=f"rlscale benchmark {name}").error)
    return measurement


def peer_workload(spec: RunSpec, measurement: Measurement, rank: RankInfo) -> dict:
    """What the peer must have run for its figures to stand next to this run's."""
    from rlscale.rl import load_adapter

    rollout = load_adapter(spec.rl_library).rollout_length(spec.agent_cfg)
    return {
        "library": spec.rl_library,
        "task": spec.task,
        "device": spec.device.kind,
        "seed": measurement.seed,
        "world_size": rank.world_size,
        "num_envs_per_rank": measurement.num_envs_per_rank,
        "max_iterations": measurement.max_iterations,
        "steps_per_iteration": global_env_steps(rollout, measurement.num_envs_per_rank, rank.world_size),
        "cuda_graph": not spec.no_cuda_graph,
    }


def output_path(workflow: Workflow, spec: RunSpec, multigpu: bool, measurement: Measurement, rank: RankInfo) -> Path:
    """``--output_path`` with the run's seed for ``{seed}``, else the default name under ``results/benchmarks/``."""
    if spec.options["output_path"] is not None:
        return Path(spec.options["output_path"].replace(SEED_FIELD, str(measurement.seed)))
    library = spec.rl_library if workflow.uses_library else "none"
    name = f"{workflow.name}_multigpu" if multigpu else workflow.name
    return bundles.default_output_path(
        name, spec.task, library, rank.world_size, measurement.num_envs_per_rank, measurement.seed
    )


def repeat_specs(spec: RunSpec) -> list[RunSpec]:
    """One spec per seed of ``--seeds``, each with a log root of its own (``<log_root>/seed<seed>``: the ranks share
    one run timestamp, so the repeats' run directories would otherwise collide); just ``spec`` without ``--seeds``."""
    seeds = spec.options.get("seeds")
    if not seeds:
        return [spec]
    return [dataclasses.replace(spec, seed=seed, log_root=str(Path(spec.log_root, f"seed{seed}"))) for seed in seeds]


def run_benchmark(
    workflow: Workflow, spec: RunSpec, python_imports_s: float, config_started: float, multigpu: bool
) -> int:
    """Run one workflow on this rank, once per seed of ``--seeds`` (else once); global rank 0 writes one bundle per
    seed and prints its summary.

    Each repeat is a whole run of its own (task, library runner, seed, run directory); only the first pays the
    process's start, so the later bundles' ``python_imports``, ``task_config`` and ``task_compile`` are null. The
    repeats stop at the first that does not complete (a crash re-raises once its bundle is written).

    Args:
        workflow: The workflow's record.
        spec: The run's resolved spec, the workflow's options included.
        python_imports_s: Time the caller took to import torch, the adapter and the tasks.
        config_started: When the imports ended (``time.perf_counter``): the task_config phase runs from there.
        multigpu: Whether the ranks were started by the multi-GPU launcher.

    Returns:
        0 when every repeat completed, else the first other's code: 130 when interrupted.
    """
    specs = repeat_specs(spec)
    with (
        one_line_on_full_disk(f"rlscale benchmark {workflow.name}"),
        one_line_if_the_task_does_not_fit(f"rlscale benchmark {workflow.name}"),
        one_process_group(rank_info().distributed and len(specs) > 1),
    ):
        for repeat, seeded in enumerate(specs):
            cold = repeat == 0
            code = _run_once(
                workflow, seeded, python_imports_s if cold else None, config_started if cold else None, multigpu
            )
            if code != 0:
                return code
    return 0


@contextlib.contextmanager
def one_process_group(active: bool) -> Iterator[None]:
    """Keep the first repeat's default process group for the later ones, and leave it once they are done.

    The libraries (and :func:`rlscale.run.phases.execute`) create the group for each run and destroy it after; a
    second group on the same store finds the first one's keys (gloo then connects to a closed port, NCCL could read a
    stale id), and skrl creates its group only when imported. So, while ``active``, creating the default group is a
    no-op once it exists and destroying it waits for the end.
    """
    if not active:
        yield
        return
    import torch.distributed as dist

    create, destroy = dist.init_process_group, dist.destroy_process_group

    def create_once(*args, **kwargs) -> None:
        if not dist.is_initialized():
            create(*args, **kwargs)

    def destroy_subgroup(group=None) -> None:
        if group is not None:
            destroy(group)

    dist.init_process_group, dist.destroy_process_group = create_once, destroy_subgroup
    try:
        yield
    finally:
        dist.destroy_process_group = destroy
        if dist.init_process_group is create_once:  # else a shim wrapped it since (rl.dist_compat): keep theirs
            dist.init_process_group = create
        if dist.is_initialized():
            destroy()


def _run_once(
    workflow: Workflow, spec: RunSpec, python_imports_s: float | None, config_started: float | None, multigpu: bool
) -> int:
    """One run of :func:`run_benchmark`; ``python_imports_s`` and ``config_started`` are None for a repeat.

    Returns:
        0 when completed, 130 when interrupted; a crash re-raises after the bundle records it.
    """
    repeat_started = time.perf_counter()
    measurement = _prepare(workflow, spec, multigpu)
    measurement.startup["python_imports"] = python_imports_s
    if config_started is not None:
        measurement.startup["task_config"] = time.perf_counter() - config_started
    rank = rank_info()
    path = output_path(workflow, spec, multigpu, measurement, rank)
    peer_result = spec.options.get("peer_result")
    if rank.is_main and peer_result is not None:
        try:
            measurement.peer = load_peer_result(Path(peer_result), peer_workload(spec, measurement, rank))
        except PeerMismatch as error:  # before anything is measured or written
            print(f"[ERROR] peer baseline: {error}", file=sys.stderr, flush=True)
            return 1
    sampler = None
    if rank.is_main:
        gpus = visible_cuda_devices() if spec.device.is_cuda else []
        own = (rank_device(spec.device, rank, len(gpus)).index or 0) if gpus else None
        sampler = ResourceSampler(gpus, own).start()
    # A cold run began when the caller started timing imports, before the spec was resolved; a repeat, here.
    if config_started is None:
        elapsed = time.perf_counter() - repeat_started
    else:
        elapsed = time.perf_counter() - config_started + python_imports_s
    start_time = bundles.utc_now() - datetime.timedelta(seconds=elapsed)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    error = None
    try:
        workflow.run(measurement, spec, rank)
    except KeyboardInterrupt:
        measurement.status = "interrupted"
    except BaseException as raised:  # recorded in the bundle, then re-raised
        measurement.status, error = "crashed", raised
    end_time = bundles.utc_now()
    if config_started is None:
        count_compile_as_creation(measurement.startup)
    if rank.is_main:
        bundle = {
            "schema_version": bundles.SCHEMA_VERSION,
            "run": run_section(workflow, multigpu, spec, measurement, rank, start_time, end_time),
            "versions": bundles.versions_section(),
            "hardware": bundles.hardware_section(spec.device.is_cuda),
            "runtime": {"startup_time_s": measurement.startup, **measurement.runtime},
            "resources": sampler.stop(),
            "learning": measurement.learning,
            "ranks": measurement.ranks,
            "extra": bundles.extra_section(workflow.scope, multigpu, rank, measurement.num_envs_per_rank),
        }
        bundles.write_bundle(bundle, path)
        for line in summary_lines(bundle, path, workflow.summarise):
            print(line, flush=True)
    if error is not None:
        raise error
    return 0 if measurement.status == "completed" else 130


def run_section(
    workflow: Workflow, multigpu: bool, spec: RunSpec, measurement: Measurement, rank: RankInfo, start_time, end_time
) -> dict:
    """The run's identity; ``num_envs`` counts every rank's environments for a global workflow, rank 0's otherwise."""
    library = spec.rl_library if workflow.uses_library else None
    stamp = start_time.strftime("%Y%m%dT%H%M%S")
    num_envs = measurement.num_envs_per_rank * (rank.world_size if workflow.scope == "global" else 1)
    return {
        "run_id": f"{workflow.name}{'_multigpu' if multigpu else ''}_{library or 'none'}_{spec.task}_{stamp}_"
        f"seed{measurement.seed}",
        "workflow": workflow.name,
        "multigpu": multigpu,
        "framework": library,
        "ml_framework": spec.ml_framework,
        "task": spec.task,
        "seed": measurement.seed,
        "device": spec.device.kind,
        "start_time_utc": bundles.iso(start_time),
        "end_time_utc": bundles.iso(end_time),
        "duration_s": (end_time - start_time).total_seconds(),
        "status": measurement.status,
        "num_envs": num_envs,
        "max_iterations": measurement.max_iterations,
    }
