"""One benchmark on one rank: parse, measure, and on global rank 0 sample resources, write the bundle and report.

Both entry points end here: ``rlscale benchmark <workflow>`` in its own process, and every rank of
``rlscale benchmark <workflow>_multigpu`` through :mod:`.worker`.
"""

from __future__ import annotations

import argparse
import datetime
import signal
import sys
import time
from pathlib import Path

from rlscale.benchmark import bundle as bundles
from rlscale.benchmark.comparison import PeerMismatch, load_peer_result
from rlscale.benchmark.options import check_workflow_args, workflow_parser
from rlscale.benchmark.resources import ResourceSampler, visible_cuda_devices
from rlscale.benchmark.summary import summary_lines
from rlscale.benchmark.workflows import WORKFLOWS, Measurement
from rlscale.dist import RankInfo, rank_device, rank_info
from rlscale.train import parse_args, resolve_seed


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _prepare(workflow: str, argv: list[str], multigpu: bool) -> tuple[argparse.Namespace, dict, Measurement]:
    """Parse and validate (exit 2 on a bad argument, before anything is written) and set up the measurement."""
    from rlscale.rl import load_adapter
    from rlscale.tasks import get_spec

    name = f"{workflow}_multigpu" if multigpu else workflow
    parser = workflow_parser(workflow, f"rlscale benchmark {name}")
    args, agent_cfg = parse_args(argv, parser, launcher=f"rlscale benchmark {workflow}_multigpu")
    check_workflow_args(parser, workflow, args, argv, multigpu=multigpu)
    num_envs = args.num_envs or get_spec(args.task).cfg_class().num_envs
    measurement = Measurement(workflow, num_envs_per_rank=num_envs, seed=resolve_seed(args, agent_cfg))
    if workflow == "training":
        adapter = load_adapter(args.rl_library)
        measurement.max_iterations = args.max_iterations or adapter.default_iterations(agent_cfg)
        if args.warmup_iterations >= measurement.max_iterations:
            parser.error(
                f"--warmup_iterations {args.warmup_iterations} leaves none of the {measurement.max_iterations} "
                "iterations to measure; lower it or raise --max_iterations"
            )
    return args, agent_cfg, measurement


def peer_workload(args: argparse.Namespace, agent_cfg: dict, measurement: Measurement, rank: RankInfo) -> dict:
    """What the peer must have run for its figures to stand next to this run's."""
    from rlscale.rl import load_adapter

    steps = load_adapter(args.rl_library).rollout_length(agent_cfg) * measurement.num_envs_per_rank * rank.world_size
    return {
        "library": args.rl_library,
        "task": args.task,
        "device": "cuda" if args.device.startswith("cuda") else "cpu",
        "seed": measurement.seed,
        "world_size": rank.world_size,
        "num_envs_per_rank": measurement.num_envs_per_rank,
        "max_iterations": measurement.max_iterations,
        "steps_per_iteration": steps,
        "cuda_graph": not args.no_cuda_graph,
    }


def output_path(args: argparse.Namespace, workflow: str, multigpu: bool, measurement: Measurement, rank: RankInfo):
    """``--output_path``, else the default name under ``results/benchmarks/``."""
    if args.output_path is not None:
        return Path(args.output_path)
    library = "none" if workflow == "runtime" else args.rl_library
    name = f"{workflow}_multigpu" if multigpu else workflow
    return bundles.default_output_path(
        name, args.task, library, rank.world_size, measurement.num_envs_per_rank, measurement.seed
    )


def run_benchmark(workflow: str, argv: list[str], python_imports_s: float, multigpu: bool) -> int:
    """Run one workflow on this rank; global rank 0 writes the bundle and prints the summary.

    Args:
        workflow: ``startup``, ``runtime`` or ``training``.
        argv: The workflow's arguments (with ``--distributed`` on the ranks of a multi-GPU launch).
        python_imports_s: Time the caller took to import torch, the adapter and the tasks.
        multigpu: Whether the ranks were started by the multi-GPU launcher.

    Returns:
        0 when completed, 130 when interrupted; a crash re-raises after the bundle records it.
    """
    started = time.perf_counter()
    args, agent_cfg, measurement = _prepare(workflow, argv, multigpu)
    measurement.startup["python_imports"] = python_imports_s
    measurement.startup["task_config"] = time.perf_counter() - started
    rank = rank_info()
    path = output_path(args, workflow, multigpu, measurement, rank)
    if rank.is_main and getattr(args, "peer_result", None) is not None:
        try:
            measurement.peer = load_peer_result(args.peer_result, peer_workload(args, agent_cfg, measurement, rank))
        except PeerMismatch as error:  # before anything is measured or written
            print(f"[ERROR] peer baseline: {error}", file=sys.stderr, flush=True)
            return 1
    sampler = None
    if rank.is_main:
        gpus = visible_cuda_devices() if args.device.startswith("cuda") else []
        own = rank_device(args.device, rank, len(gpus)).partition(":")[2] if gpus else None
        sampler = ResourceSampler(gpus, int(own or 0) if gpus else None).start()
    # The run began when the caller started timing imports, before this function was entered.
    start_time = bundles.utc_now() - datetime.timedelta(seconds=time.perf_counter() - started + python_imports_s)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    error = None
    try:
        WORKFLOWS[workflow](measurement, args, agent_cfg, rank)
    except KeyboardInterrupt:
        measurement.status = "interrupted"
    except BaseException as raised:  # recorded in the bundle, then re-raised
        measurement.status, error = "crashed", raised
    end_time = bundles.utc_now()
    if rank.is_main:
        bundle = {
            "schema_version": bundles.SCHEMA_VERSION,
            "run": run_section(workflow, multigpu, args, measurement, rank, start_time, end_time),
            "versions": bundles.versions_section(),
            "hardware": bundles.hardware_section(args.device.startswith("cuda")),
            "runtime": {"startup_time_s": measurement.startup, **measurement.runtime},
            "resources": sampler.stop(),
            "learning": measurement.learning if workflow == "training" else None,
            "extra": bundles.extra_section(workflow, multigpu, rank, measurement.num_envs_per_rank),
        }
        bundles.write_bundle(bundle, path)
        for line in summary_lines(bundle, path):
            print(line, flush=True)
    if error is not None:
        raise error
    return 0 if measurement.status == "completed" else 130


def run_section(workflow, multigpu, args, measurement: Measurement, rank: RankInfo, start_time, end_time) -> dict:
    """The run's identity; ``num_envs`` counts every rank's environments for training, rank 0's otherwise."""
    library = None if workflow == "runtime" else args.rl_library
    stamp = start_time.strftime("%Y%m%dT%H%M%S")
    num_envs = measurement.num_envs_per_rank * (rank.world_size if workflow == "training" else 1)
    return {
        "run_id": f"{workflow}{'_multigpu' if multigpu else ''}_{library or 'none'}_{args.task}_{stamp}_"
        f"seed{measurement.seed}",
        "workflow": workflow,
        "multigpu": multigpu,
        "framework": library,
        "ml_framework": args.ml_framework,
        "task": args.task,
        "seed": measurement.seed,
        "device": "cuda" if args.device.startswith("cuda") else "cpu",
        "start_time_utc": bundles.iso(start_time),
        "end_time_utc": bundles.iso(end_time),
        "duration_s": (end_time - start_time).total_seconds(),
        "status": measurement.status,
        "num_envs": num_envs,
        "max_iterations": measurement.max_iterations,
    }
