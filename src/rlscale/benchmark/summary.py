"""The console report rank 0 prints after a benchmark: the headline figure, its dispersion and what it covers.

One body per workflow (its record's ``summarise``, built from the formatters here) under a common header.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def spread(stats: dict | None, unit: str) -> str:
    """``12,345 unit (std 3.1 %, peak 13,000)``, or ``not measured``."""
    if stats is None:
        return "not measured"
    relative = f"{100 * stats['std'] / stats['mean']:.1f} %" if stats["mean"] else "n/a"
    peak = f", peak {stats['peak']:,.0f}" if stats["peak"] is not None else ""
    return f"{stats['mean']:,.0f} {unit} (std {relative}{peak})"


def number(value: float | None, unit: str = "") -> str:
    """``value`` to three decimals, then ``unit``; ``-`` when unmeasured."""
    return "-" if value is None else f"{value:.3f}{unit}"


def other_ranks(bundle: dict) -> str:
    """What the other ranks did meanwhile, for a rank-0 figure."""
    ranks = bundle["extra"]["world_size"]
    return f"while {ranks - 1} other rank(s) ran the same workload" if ranks > 1 else "in a single process"


def slowest_rank(bundle: dict) -> list[str]:
    """The startup or runtime benchmark's slowest rank, by its ``ranks`` section's figure (none with one rank)."""
    ranks = bundle.get("ranks")
    if not ranks or len(ranks["per_rank"]) < 2:
        return []
    figure = ranks["slowest_by"]
    value = ranks["per_rank"][ranks["slowest_rank"]][figure]
    return [
        f"  ranks: slowest rank {ranks['slowest_rank']}, {figure} {value:.3g} s, "
        f"{ranks['slowest_rank_excess_s']:.3g} s over the other ranks' median"
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
