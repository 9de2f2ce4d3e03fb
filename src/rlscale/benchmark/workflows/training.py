"""``rlscale benchmark training``: end-to-end PPO through ``rlscale train``'s own run
(:func:`rlscale.run.phases.execute`), timed from :class:`TrackedTask`'s records, global over all ranks, with learning
curves; with ``--peer``, the peer baseline's figures beside them (:mod:`rlscale.benchmark.peer_ratio`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from rlscale.benchmark.options import SEED_FIELD
from rlscale.benchmark.peer_ratio import NOT_MIRRORED, peer_section
from rlscale.benchmark.rank_breakdown import ranks_section
from rlscale.benchmark.stats import ema, finite_or_none, mean_std, rate_stats
from rlscale.benchmark.summary import number, spread
from rlscale.benchmark.workflow import Measurement, Workflow, kernel_cache, record_task_creation
from rlscale.device import requested_kind
from rlscale.dist import RankInfo, global_env_steps
from rlscale.run.phases import execute
from rlscale.run.spec import RunSpec

# Options -----------------------------------------------------------------------------------------------------------


def add_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        metavar="SEED",
        help="run the cell once per base seed in this one process (imports, CUDA context and process group paid "
        "once), one bundle per seed; --output_path then holds {seed}. Instead of --seed",
    )
    group.add_argument(
        "--warmup_iterations", type=int, default=1, help="iterations left out of the throughput (default 1)"
    )
    group.add_argument("--ema_alpha", type=float, default=0.1, help="EMA weight of the learning curves (0.1)")
    group.add_argument(
        "--peer",
        action="store_true",
        help="first run the library's plain script with the same settings (and torchrun geometry), then report "
        "rlscale / peer throughput (runtime.peer)",
    )
    # Set by --peer for the ranks: the peer's result file.
    group.add_argument("--peer_result", type=Path, help=argparse.SUPPRESS)


def check(parser: argparse.ArgumentParser, args: argparse.Namespace, multigpu: bool) -> None:
    if args.warmup_iterations < 0:
        parser.error(f"--warmup_iterations must be >= 0 (got {args.warmup_iterations})")
    if not 0 < args.ema_alpha <= 1:
        parser.error(f"--ema_alpha must be in (0, 1] (got {args.ema_alpha})")
    if args.max_iterations is not None and args.warmup_iterations >= args.max_iterations:
        parser.error(
            f"--warmup_iterations {args.warmup_iterations} leaves none of the {args.max_iterations} iterations "
            "to measure; lower it or raise --max_iterations"
        )
    _check_seeds(parser, args)
    _check_peer_args(parser, args, multigpu)


def _check_seeds(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.seeds is None:  # --seed and --seeds: refused by the parser (arguments.seed_from_seeds)
        return
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds names a seed twice: {' '.join(map(str, args.seeds))}")
    if args.peer and len(args.seeds) > 1:
        # The peer is a cold process of its own; its figures stand beside one cold rlscale process, not a repeat.
        parser.error("--peer runs with one seed per process: pass --seed, or one --seeds value, per run")
    if args.output_path is not None and len(args.seeds) > 1 and SEED_FIELD not in str(args.output_path):
        parser.error(f"--output_path {args.output_path} must contain {SEED_FIELD} with several --seeds")


def _check_peer_args(parser: argparse.ArgumentParser, args: argparse.Namespace, multigpu: bool) -> None:
    if args.peer_result is not None and not args.peer:
        parser.error("--peer_result is internal to --peer; pass --peer to run and compare the peer baseline")
    if not args.peer:
        return
    if args.ml_framework == "jax":
        parser.error("--peer: the peer baselines run skrl with PyTorch only; drop --ml_framework jax or --peer")
    for name, reason in NOT_MIRRORED.items():
        if getattr(args, name) != parser.get_default(name):
            parser.error(f"--peer cannot mirror {reason}; drop one of the two")
    if args.overrides:
        parser.error(
            f"--peer cannot mirror {args.overrides[0]}: the peer trains the task and agent config as shipped; "
            "drop one of the two"
        )
    given = args.device or ""  # unchecked yet: resolving the spec refuses a device that is none
    if not multigpu and requested_kind(given) == "cuda" and given not in ("cuda", "cuda:", "cuda:0"):
        parser.error(
            f"--peer runs its process on cuda:0, not {args.device}; choose the GPU with CUDA_VISIBLE_DEVICES instead"
        )


def plan(measurement: Measurement, spec: RunSpec, refuse: Callable[[str], NoReturn]) -> None:
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


# Measurement -------------------------------------------------------------------------------------------------------


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


def run(measurement: Measurement, spec: RunSpec, rank: RankInfo) -> None:
    """End-to-end PPO through ``rlscale train``'s run; figures cover every rank (see :func:`training_figures`)."""
    tracked = []
    warmup, ema_alpha = spec.options["warmup_iterations"], spec.options["ema_alpha"]
    runtime = measurement.runtime
    runtime["warmup_iterations"] = warmup
    measurement.learning = learning_curves([], ema_alpha, 1)

    def record_figures() -> None:  # also after a crash, from the iterations that finished
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
        record_figures()
    measurement.status = outcome.status
    reports = outcome.rank_reports
    measurement.ranks = ranks_section([report.records for report in reports] if reports else None, warmup)
    record_task_creation(measurement.startup, outcome.task_creation_s, outcome.task_compile_s)
    runtime["kernel_cache"] = kernel_cache(outcome.task_compiled_kernels)
    measurement.startup["first_iteration"] = outcome.first_iteration_s
    runtime["total_wall_time_s"] = outcome.train_s


# Console report ----------------------------------------------------------------------------------------------------


def summarise(bundle: dict) -> list[str]:
    runtime, learning = bundle["runtime"], bundle["learning"]
    ranks = bundle["extra"]["world_size"]
    lines = [
        f"  total throughput {spread(runtime['total_fps'], 'env-steps/s')}",
        f"  collection       {spread(runtime['collection_fps'], 'env-steps/s')}",
    ]
    iteration, collection, update = (
        runtime[key] for key in ("iteration_time_s", "collection_time_s", "learning_time_s")
    )
    if iteration is not None:
        measured = runtime["iterations_completed"] - runtime["warmup_iterations"]
        lines.append(
            f"  per iteration {iteration['mean']:.3f}s = collection {collection['mean']:.3f}s + learning "
            f"{update['mean']:.3f}s, over {measured} iteration(s) after {runtime['warmup_iterations']} warm-up"
        )
    reward, length = learning["reward"], learning["ep_length"]
    lines.append(
        f"  final return {number(reward['final_raw'])} (EMA {number(reward['final_ema'])}), "
        f"episode length {number(length['final_raw'])} (EMA {number(length['final_ema'])})"
    )
    if runtime["steps_per_iteration"]:
        lines.append(
            f"  scope: global = {runtime['steps_per_iteration']:,} steps per iteration over all {ranks} rank(s) / "
            "rank 0's iteration time (ranks step in lockstep); judge scaling against N x the 1-rank throughput "
            "at the same per-rank --num_envs"
        )
    lines += _ranks_lines(bundle.get("ranks"))  # absent from bundles older than schema 1.1
    peer = runtime.get("peer")  # absent from bundles older than --peer
    if peer is not None:
        lines.append(
            f"  peer (plain {peer['library']} script) {spread(peer['total_fps'], 'env-steps/s')}; "
            f"rlscale / peer = {number(peer['ratio_total_fps_median'])} (medians of the per-iteration total_fps)"
        )
    return lines


def _ranks_lines(ranks: dict | None) -> list[str]:
    if ranks is None or len(ranks["per_rank"]) < 2:
        return []
    straggler = "none" if ranks["straggler"] is None else f"rank {ranks['straggler']}"
    lines = [
        f"  ranks: straggler {straggler} (slowest rank {ranks['slowest_rank']}, "
        f"{ranks['slowest_rank_excess_s']:+.3f}s compute per iteration over the others' median); "
        f"communicating {ranks['communication_share']:.0%}, waiting {ranks['wait_share']:.0%} of an iteration"
    ]
    for rank in ranks["per_rank"]:
        lines.append(
            f"    rank {rank['rank']}: collection {rank['collection_compute_s']:.3f}s + update "
            f"{rank['update_compute_s']:.3f}s + collectives {rank['collective_s']:.3f}s "
            f"(waiting {rank['wait_s']:.3f}s)"
        )
    return lines


WORKFLOW = Workflow(
    name="training",
    description="end-to-end PPO throughput (global over all ranks) and learning curves",
    uses_library=True,
    scope="global",
    run=run,
    summarise=summarise,
    add_options=add_options,
    check=check,
    plan=plan,
)
