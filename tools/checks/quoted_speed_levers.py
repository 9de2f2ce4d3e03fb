"""docs/performance.md's speed levers, recomputed from the bundles of each interleaved comparison (``plan.json`` says
what was asked, each run's bundle what it measured), with ``benchmark compare``'s verdict rule restated by hand.
Used by ``tools/checks/quoted_figures.py``."""

from __future__ import annotations

import itertools
import json
import shlex
from pathlib import Path

from quoted_common import LIBRARY_ROWS, PERFORMANCE, Quote, median_and_bounds, span, with_interval

LEVERS = Path("results/benchmarks/h200")
PLACEMENT_STARTUP = LEVERS / "levers_placement_startup"
LEVER_COMPARISONS = (
    ("rsl_rl", "levers_rsl_rl_skrl/rsl_rl_levers"),
    ("rsl_rl", "levers_placement_startup/rsl_rl_nan_check"),
    ("rl_games", "levers_placement_startup/rl_games_levers"),
    ("skrl", "levers_rsl_rl_skrl/skrl_levers"),
    ("rsl_rl", "levers_placement_startup/rsl_rl_placement_1gpu"),
    ("rsl_rl", "levers_placement_startup/rsl_rl_levers_65536"),
)
"""Library and folder (under :data:`LEVERS`) of each interleaved comparison in docs/performance.md's speed levers."""
STARTUP_PHASES = ("python_imports", "task_config", "env_creation", "first_step", "first_iteration")


def kilo_interval(rates: list[float]) -> str:
    """Throughputs as ``median [low–high]`` in k env-steps/s."""
    median, low, high, _ = median_and_bounds(rates)
    return f"{median / 1e3:.0f} [{low / 1e3:.0f}–{high / 1e3:.0f}]"


def sign_test_p(ratios: list[float]) -> float:
    """Two-sided sign test of a median ratio of 1, by counting every equally likely pattern of sides."""
    sides = [ratio > 1 for ratio in ratios if ratio != 1]
    fewer = min(sum(sides), len(sides) - sum(sides))
    patterns = list(itertools.product((False, True), repeat=len(sides)))
    return sum(min(sum(pattern), len(sides) - sum(pattern)) <= fewer for pattern in patterns) / len(patterns)


def verdict(ratios: list[float]) -> str:
    """``benchmark compare``'s verdict, restated: none below the pairs a 95 % interval needs (6), only the sign test
    when every pair falls on one side; else higher or lower when the interval is clear of 1."""
    _, low, high, n = median_and_bounds(ratios)
    if n < 6:
        side = "above" if low > 1 else "below" if high < 1 else None
        short = "too few pairs (< 6)"
        return f"{short}; all {n} {side} 1, sign test p = {sign_test_p(ratios):.3g}" if side else short
    return "higher" if low > 1 else "lower" if high < 1 else "inconclusive"


def comparison_rates(directory: Path) -> tuple[str, dict[str, tuple[str, list[float]]]]:
    """A comparison's baseline, and each variant's command line and effective rate per repeat, from ``plan.json``
    (what was asked) and the bundles (what ran), not from the tool's own tables."""
    plan = json.loads((directory / "plan.json").read_text())
    variants = {}
    for variant in plan["variants"]:
        words = [*(f"{key}={value}" for key, value in variant["env"].items()), variant["workflow"], *variant["args"]]
        rates = [
            json.loads((directory / variant["name"] / f"repeat{repeat}.json").read_text())["runtime"]["total_fps"]
            for repeat in range(plan["repeats"])
        ]
        variants[variant["name"]] = (shlex.join(words), [rate["mean"] for rate in rates])
    return plan["variants"][0]["name"], variants


def speed_lever_quotes(root: Path) -> list[Quote]:
    """docs/performance.md's speed levers: each variant against its comparison's baseline (paired by repeat, from the
    bundles), the startup phases of the warm repeats, the per-process GPU memory and rsl_rl's share of its own
    ceiling."""
    quotes = []
    for library, folder in LEVER_COMPARISONS:
        baseline, variants = comparison_rates(root / LEVERS / folder)
        base_rates = variants.pop(baseline)[1]
        for name, (command, rates) in variants.items():
            ratios = [rate / base for rate, base in zip(rates, base_rates, strict=True)]
            median, low, high, _ = median_and_bounds(ratios)
            text = (
                f"| {library} | `{command}` | {kilo_interval(base_rates)} | {kilo_interval(rates)} | "
                f"{median:.3f} [{low:.3f}–{high:.3f}] | {verdict(ratios)} |"
            )
            quotes.append(Quote(PERFORMANCE, f"speed levers, {folder}: {name}", text))
    process_memory = []
    for library, _ in LIBRARY_ROWS:
        startups = [
            json.loads((root / PLACEMENT_STARTUP / "startup" / library / f"repeat{repeat}.json").read_text())
            for repeat in range(1, 6)
        ]
        phases = [[bundle["runtime"]["startup_time_s"][phase] for bundle in startups] for phase in STARTUP_PHASES]
        totals = [sum(values) for values in zip(*phases, strict=True)]
        text = f"| {library} | {' | '.join(with_interval(values) for values in [*phases, totals])} |"
        quotes.append(Quote(PERFORMANCE, f"speed levers, warm startup of {library}", text))
        process_memory += [bundle["resources"]["gpu_process_mem_gb"]["peak"] for bundle in startups]
    for _, folder in LEVER_COMPARISONS:
        for path in sorted((root / LEVERS / folder).glob("*/repeat*.json")):
            bundle = json.loads(path.read_text())
            if bundle["extra"]["num_envs_per_rank"] == 4096:
                process_memory.append(bundle["resources"]["gpu_process_mem_gb"]["peak"])
    text = f"{span(process_memory)} GB per process at 4096 envs ({len(process_memory)} runs"
    quotes.append(Quote(PERFORMANCE, "speed levers, per-process GPU memory", text))
    default_runs = [
        json.loads(path.read_text())["runtime"]
        for path in sorted((root / PLACEMENT_STARTUP / "rsl_rl_nan_check" / "nan_check").glob("repeat*.json"))
    ]
    ceilings = [run["steps_per_iteration"] / run["learning_time_s"]["mean"] for run in default_runs]
    shares = [run["total_fps"]["mean"] / ceiling for run, ceiling in zip(default_runs, ceilings, strict=True)]
    median, low, high, _ = median_and_bounds(ceilings)
    text = (
        f"ceiling {median / 1e3:.0f} k [{low / 1e3:.0f}–{high / 1e3:.0f}] env-steps/s; rlscale reaches "
        f"{with_interval(shares)} of it"
    )
    quotes.append(Quote(PERFORMANCE, "speed levers, rsl_rl against its ceiling", text))
    return quotes
