"""``rlscale benchmark compare``'s tables: each run's row, and the medians and paired ratios with their
distribution-free intervals (:func:`rlscale.benchmark.stats.median_interval`), rebuilt from ``plan.json`` and
the bundles alone, so that ``--summarise_only`` can tabulate a directory copied back from a GPU machine.

A ratio is taken within a repeat (variant ÷ baseline of the same repeat), then summarised over repeats. Pure
Python and pandas, no torch.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from rlscale.benchmark.compare.plan import (
    PLAN_FILE,
    RECOMMENDED_REPEATS,
    bundle_path,
    log_path,
    planned_runs,
    run_key,
    write_json,
)
from rlscale.benchmark.stats import CONFIDENCE, median_interval, sign_test_p
from rlscale.benchmark.workflow import REQUIRED_PHASES

CSV_FILE = "comparison.csv"
MARKDOWN_FILE = "comparison.md"
JSON_FILE = "comparison.json"
COMPLETED = "completed"
MEMORY_FIELDS = ("gpu_mem_gb", "gpu_process_mem_gb", "torch_peak_allocated_gb")
"""``resources`` fields copied to the CSV where a bundle has them."""


def run_status(outcome: dict | None, bundle: dict | None) -> str:
    """``completed`` only for a run that exited 0 with a completed bundle; otherwise what went wrong."""
    if outcome and outcome["timed_out"]:
        return "timeout"
    if bundle is None:
        return "not run" if outcome is None else f"failed (exit {outcome['exit_code']}, no bundle)"
    if (bundle.get("run") or {}).get("status") != COMPLETED:
        return str((bundle.get("run") or {}).get("status"))
    if outcome and outcome["exit_code"] != 0:
        return f"failed (exit {outcome['exit_code']})"
    return COMPLETED


def run_row(directory: Path, plan: dict, run: dict) -> dict:
    """One row of ``comparison.csv``: the run's plan, outcome and the figures its bundle holds (None where not)."""
    variant = next(variant for variant in plan["variants"] if variant["name"] == run["variant"])
    path = bundle_path(directory, run["variant"], run["repeat"])
    bundle = json.loads(path.read_text()) if path.is_file() else None
    outcome = plan["outcomes"].get(run_key(run["variant"], run["repeat"]))
    runtime = (bundle or {}).get("runtime") or {}
    resources = (bundle or {}).get("resources") or {}
    extra = (bundle or {}).get("extra") or {}
    world_size = int(extra.get("world_size") or 1)
    global_scope = extra.get("workload_scope", "global") == "global"
    step_fps = (runtime.get("environment_step_timing") or {}).get("environment_step_fps") or {}
    throughput = (runtime.get("total_fps") or {}).get("mean") or step_fps.get("mean")  # training, else runtime
    startup = runtime.get("startup_time_s") or {}
    return {
        **run,
        "workflow": variant["workflow"],
        "status": run_status(outcome, bundle),
        "exit_code": None if outcome is None else outcome["exit_code"],
        "wall_s": None if outcome is None else outcome["wall_s"],
        "world_size": world_size,
        "num_envs_per_rank": extra.get("num_envs_per_rank"),
        "throughput": throughput,
        "iteration_fps_median": (runtime.get("peer") or {}).get("rlscale_total_fps_median"),
        # A rank-0 scope (runtime) figure is already one rank's own.
        "per_rank_throughput": None if throughput is None else throughput / (world_size if global_scope else 1),
        "total_wall_time_s": runtime.get("total_wall_time_s"),
        **{f"startup_{phase}_s": startup.get(phase) for phase in REQUIRED_PHASES},
        **{field_name: resources.get(field_name) for field_name in MEMORY_FIELDS},
        "bundle": str(path.relative_to(directory)) if bundle is not None else None,
        "log": str(log_path(directory, run["variant"], run["repeat"]).relative_to(directory)),
    }


def comparison_frame(directory: Path, plan: dict) -> pd.DataFrame:
    """Every planned run's row, in the order the runs ran."""
    names = [variant["name"] for variant in plan["variants"]]
    runs = planned_runs(names, plan["repeats"], plan["base_seed"])
    return pd.DataFrame.from_records([run_row(directory, plan, run) for run in runs])


def interval(values: Sequence[float]) -> dict | None:
    """``{median, low, high, coverage, n}`` of the values: the exact order-statistic interval, or their range with
    its own coverage where they are too few for 95 %; None without a value."""
    result = median_interval(values)
    return None if result is None else result._asdict()


def ratio_interval(ratios: Sequence[float]) -> dict | None:
    """:func:`interval` of paired ratios, with the sign test's p-value of ``median = 1``."""
    result = interval(ratios)
    return None if result is None else result | {"sign_test_p": sign_test_p(ratios)}


def verdict(ratio: dict | None) -> str:
    """``higher``/``lower`` when the ratio's 95 % interval excludes 1, else ``inconclusive``. Fewer than
    :data:`RECOMMENDED_REPEATS` pairs have no 95 % interval, so no verdict: only their range, and the sign test when
    they all fall on one side (5 of 5: p = 0.0625)."""
    if ratio is None:
        return "no pair"
    if ratio["coverage"] < CONFIDENCE:
        short = f"too few pairs (< {RECOMMENDED_REPEATS})"
        side = "above" if ratio["low"] > 1.0 else "below" if ratio["high"] < 1.0 else None
        return f"{short}; all {ratio['n']} {side} 1, sign test p = {ratio['sign_test_p']:.3g}" if side else short
    if ratio["low"] > 1.0:
        return "higher"
    if ratio["high"] < 1.0:
        return "lower"
    return "inconclusive"


def paired_ratios(frame: pd.DataFrame, variant: str, baseline: str, column: str) -> pd.Series:
    """``column`` of ``variant`` ÷ that of ``baseline`` within each repeat where both completed, by repeat."""
    completed = frame[frame["status"] == COMPLETED].pivot(index="repeat", columns="variant", values=column)
    if variant not in completed or baseline not in completed:
        return pd.Series(dtype=float)
    return (completed[variant].astype(float) / completed[baseline].astype(float)).dropna()


def summarise(frame: pd.DataFrame, plan: dict) -> dict:
    """Per variant: completed runs, median throughput, per-rank throughput and total_wall_time_s with intervals; and
    against the first variant (the baseline) the paired ratios of throughput and per-rank throughput."""
    baseline = plan["variants"][0]["name"]
    variants = []
    for variant in plan["variants"]:
        name = variant["name"]
        rows = frame[(frame["variant"] == name) & (frame["status"] == COMPLETED)]
        summary = {
            "name": name,
            "command": shlex.join(
                [*(f"{k}={v}" for k, v in variant["env"].items()), variant["workflow"], *variant["args"]]
            ),
            "completed": len(rows),
            "planned": plan["repeats"],
            "throughput": interval(rows["throughput"].dropna().tolist()),
            "per_rank_throughput": interval(rows["per_rank_throughput"].dropna().tolist()),
            "total_wall_time_s": interval(rows["total_wall_time_s"].dropna().tolist()),
        }
        if name != baseline:
            for key, column in (("ratio", "throughput"), ("per_rank_ratio", "per_rank_throughput")):
                ratios = paired_ratios(frame, name, baseline, column)
                summary[key] = ratio_interval(ratios.tolist())
                summary[f"{key}_per_repeat"] = {int(repeat): float(value) for repeat, value in ratios.items()}
            summary["verdict"] = verdict(summary["ratio"])
        variants.append(summary)
    return {
        "baseline": baseline,
        "common": plan["common"],
        "repeats": plan["repeats"],
        "base_seed": plan["base_seed"],
        "confidence": CONFIDENCE,
        "interval": "exact order-statistic interval of the median; the range where too few for the confidence",
        "variants": variants,
    }


def significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, or whole when it has more digits before the point (7020, not
    7.02e+03)."""
    text = f"{value:.{digits}g}"
    return f"{value:.0f}" if "e+" in text else text


def quoted(figure: dict | None, scale: float = 1.0, digits: int = 3) -> str:
    """``median [low, high]``, with the interval's coverage where it falls short of 95 % (a range of too few
    values); ``–`` without a figure."""
    if figure is None:
        return "–"
    median, low, high = (significant(figure[key] / scale, digits) for key in ("median", "low", "high"))
    short = f" ({figure['coverage']:.1%} range)" if figure["coverage"] < CONFIDENCE else ""
    return f"{median} [{low}, {high}]{short}"


def summary_markdown(summary: dict) -> str:
    """``comparison.md``: a table per variant, then the ratios against the baseline with their verdicts."""
    lines = [
        "# Interleaved comparison",
        "",
        f"Common arguments: `{shlex.join(summary['common'])}`. {summary['repeats']} repeats, seeds "
        f"{summary['base_seed']}…{summary['base_seed'] + summary['repeats'] - 1}, variant order rotated each repeat.",
        "Figures are medians over the completed repeats with an exact order-statistic 95 % interval [low, high],",
        f"distribution-free; fewer than {RECOMMENDED_REPEATS} values have none, and show their range with its",
        "coverage.",
        "",
        "| variant | command | completed | throughput (k env-steps/s) | per rank (k env-steps/s) | total_wall_time_s |",
        "|---|---|---|---|---|---|",
    ]
    for variant in summary["variants"]:
        lines.append(
            f"| {variant['name']} | `{variant['command']}` | {variant['completed']}/{variant['planned']} "
            f"| {quoted(variant['throughput'], 1e3)} | {quoted(variant['per_rank_throughput'], 1e3)} "
            f"| {quoted(variant['total_wall_time_s'])} |"
        )
    lines += [
        "",
        f"## Against the baseline `{summary['baseline']}` (paired by repeat)",
        "",
        "ratio = the variant's throughput ÷ the baseline's of the same repeat; per-rank ratio divides each by its",
        "world size (the weak-scaling efficiency when the baseline runs 1 rank at the same envs per rank). A",
        "difference is inconclusive when the ratio's interval includes 1. p: the two-sided sign test of a median",
        "ratio of 1.",
        "",
        "| variant | pairs | ratio | per-rank ratio | p | verdict | ratio per repeat |",
        "|---|---|---|---|---|---|---|",
    ]
    for variant in summary["variants"][1:]:
        per_repeat = ", ".join(f"r{repeat}: {value:.3f}" for repeat, value in variant["ratio_per_repeat"].items())
        pairs = (variant["ratio"] or {}).get("n", 0)
        p_value = (variant["ratio"] or {}).get("sign_test_p")
        lines.append(
            f"| {variant['name']} | {pairs} | {quoted(variant['ratio'])} | {quoted(variant['per_rank_ratio'])} "
            f"| {'–' if p_value is None else f'{p_value:.3g}'} | {variant['verdict']} | {per_repeat or '–'} |"
        )
    return "\n".join(lines) + "\n"


def write_summary(directory: Path) -> dict:
    """Write :data:`CSV_FILE`, :data:`MARKDOWN_FILE` and :data:`JSON_FILE` from ``plan.json`` and the bundles."""
    plan = json.loads((directory / PLAN_FILE).read_text())
    frame = comparison_frame(directory, plan)
    frame.to_csv(directory / CSV_FILE, index=False)
    summary = summarise(frame, plan)
    (directory / MARKDOWN_FILE).write_text(summary_markdown(summary))
    write_json(directory / JSON_FILE, summary)
    return summary
