"""The console report rank 0 prints after a benchmark: the headline figure, its dispersion and what it covers.

One body per workflow (its record's ``summarise``) under a common header.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def _spread(stats: dict | None, unit: str) -> str:
    """``12,345 unit (std 3.1 %, peak 13,000)``, or ``not measured``."""
    if stats is None:
        return "not measured"
    relative = f"{100 * stats['std'] / stats['mean']:.1f} %" if stats["mean"] else "n/a"
    peak = f", peak {stats['peak']:,.0f}" if stats["peak"] is not None else ""
    return f"{stats['mean']:,.0f} {unit} (std {relative}{peak})"


def _number(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.3f}{unit}"


def _others(bundle: dict) -> str:
    ranks = bundle["extra"]["world_size"]
    return f"while {ranks - 1} other rank(s) ran the same workload" if ranks > 1 else "in a single process"


def training_lines(bundle: dict) -> list[str]:
    runtime, learning = bundle["runtime"], bundle["learning"]
    ranks = bundle["extra"]["world_size"]
    lines = [
        f"  total throughput {_spread(runtime['total_fps'], 'env-steps/s')}",
        f"  collection       {_spread(runtime['collection_fps'], 'env-steps/s')}",
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
        f"  final return {_number(reward['final_raw'])} (EMA {_number(reward['final_ema'])}), "
        f"episode length {_number(length['final_raw'])} (EMA {_number(length['final_ema'])})"
    )
    if runtime["steps_per_iteration"]:
        lines.append(
            f"  scope: global = {runtime['steps_per_iteration']:,} steps per iteration over all {ranks} rank(s) / "
            "rank 0's iteration time (ranks step in lockstep); judge scaling against N x the 1-rank throughput "
            "at the same per-rank --num_envs"
        )
    peer = runtime.get("peer")  # absent from bundles older than --peer
    if peer is not None:
        lines.append(
            f"  peer (plain {peer['library']} script) {_spread(peer['total_fps'], 'env-steps/s')}; "
            f"rlscale / peer = {_number(peer['ratio_total_fps_median'])} (medians of the per-iteration total_fps)"
        )
    return lines


def runtime_lines(bundle: dict) -> list[str]:
    runtime = bundle["runtime"]
    timing = runtime["environment_step_timing"]
    mode = timing["measurement_mode"]
    caveat = "" if mode == "host_return" else " (each step's serialized cost: not a throughput to report)"
    return [
        f"  env-step throughput {_spread(timing['environment_step_fps'], 'env-steps/s')}",
        f"  {timing['environment_step_calls']} timed steps after {runtime['warmup_iterations']} warm-up, "
        f"mode {mode}{caveat}",
        f"  scope: rank 0's own {bundle['extra']['num_envs_per_rank']} envs, measured {_others(bundle)}; not a "
        "global rate",
    ]


def startup_lines(bundle: dict) -> list[str]:
    runtime = bundle["runtime"]
    phases = ", ".join(f"{phase} {_number(value, 's')}" for phase, value in runtime["startup_time_s"].items())
    return [
        f"  {phases}",
        f"  total {_number(runtime['total_wall_time_s'], 's')}",
        f"  scope: rank 0's cold start, measured {_others(bundle)}; not an aggregate over ranks",
    ]


def summary_lines(bundle: dict, path: Path, body: Callable[[dict], list[str]]) -> list[str]:
    """A few lines for a person, ``body`` the workflow's own; the bundle holds everything else."""
    run, extra = bundle["run"], bundle["extra"]
    ranks = extra["world_size"]
    name = f"{run['workflow']}{'_multigpu' if run['multigpu'] else ''}"
    lines = [
        f"[rlscale] benchmark {name}: {run['task']}, {run['framework'] or 'no library'}, {run['device']}, "
        f"{ranks} rank(s) x {extra['num_envs_per_rank']} envs, status {run['status']}"
    ]
    lines += body(bundle)
    lines.append(f"  bundle: {path}")
    return lines
