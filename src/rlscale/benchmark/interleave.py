"""``rlscale benchmark compare``: run named variants of a benchmark interleaved over repeats, then tabulate their
medians and paired ratios with distribution-free intervals (:func:`rlscale.benchmark.stats.median_interval`).

The lent GPUs vary by about 15 % from run to run, and a host's load drifts over minutes, so two configurations are
compared only when they ran in turns: repeat ``r`` runs every variant once with seed ``base_seed + r`` (the same
seed for all variants of a repeat: a pair), the order rotated by one each repeat so that no variant always goes
first. A ratio is taken within a repeat (variant ÷ baseline of the same repeat), then summarised over repeats.

Each run is a child process, ``python -m rlscale benchmark WORKFLOW ...``, supervised like every rlscale launcher
(:func:`rlscale.launch.supervise.run_supervised`: its own process group, signals forwarded, nothing left behind).
The whole comparison holds the host alone (the caller passes the lease, see :func:`main`). Files under
``--output_dir``: ``plan.json`` (the variants and each run's outcome), ``<variant>/repeat<r>.json`` (the bundle) and
``.log``, and the summary :data:`CSV_FILE`, :data:`MARKDOWN_FILE` and :data:`JSON_FILE`, which ``--summarise_only``
rebuilds from those files alone (a directory copied back from a GPU machine).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shlex
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from rlscale.argparsing import OneLineParser
from rlscale.benchmark.records import WORKFLOWS
from rlscale.benchmark.stats import CONFIDENCE, median_interval, sign_test_p, values_needed
from rlscale.launch.supervise import run_supervised

PLAN_FILE = "plan.json"
CSV_FILE = "comparison.csv"
MARKDOWN_FILE = "comparison.md"
JSON_FILE = "comparison.json"
RECOMMENDED_REPEATS = values_needed(CONFIDENCE)
"""6: the fewest pairs with a 95 % interval for their median ratio (their range, 96.9 %). Fewer draw a warning and
no verdict."""
RESERVED_OPTIONS = ("--seed", "--seeds", "--output_path")
"""Set by the tool for every run; a variant or the common arguments may not set them."""
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*\Z")
ENVIRONMENT_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.DOTALL)
STOPPED_BY_SIGNAL = {128 + signal.SIGINT, 128 + signal.SIGTERM}
"""Exit codes of a run stopped by Ctrl-C or SIGTERM: the comparison stops there too."""
COMPLETED = "completed"
MEMORY_FIELDS = ("gpu_mem_gb", "gpu_process_mem_gb", "torch_peak_allocated_gb")
"""``resources`` fields copied to the CSV where a bundle has them."""
STARTUP_PHASES = ("python_imports", "task_config", "env_creation", "first_step", "first_iteration")


@dataclass(frozen=True)
class Variant:
    """One compared configuration: the rest of an ``rlscale benchmark`` command line, and its environment."""

    name: str
    workflow: str
    """As given (``training``, ``training_multigpu``...)."""
    args: tuple[str, ...]
    """The workflow's options and overrides that only this variant has."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables set for this variant's runs (``NCCL_PROTO=LL``...)."""

    def command(self, common: Sequence[str], seed: int, bundle: Path) -> list[str]:
        """The argv of one run of this variant; its own arguments come last, so that they override common ones."""
        return [
            *(sys.executable, "-m", "rlscale", "benchmark", self.workflow, *common, *self.args),
            *("--seed", str(seed), "--output_path", str(bundle)),
        ]


def parse_variant(text: str) -> Variant:
    """Parse ``NAME=[KEY=VALUE ...] WORKFLOW [ARGS...]`` (shell quoting); raise ValueError with one line if bad."""
    name, equals, rest = text.partition("=")
    if not equals or not NAME.match(name):
        raise ValueError(f"--variant {text!r}: expected NAME=WORKFLOW [ARGS...], NAME a letter then [A-Za-z0-9_.-]")
    tokens = shlex.split(rest)
    env = {}
    while tokens and (assignment := ENVIRONMENT_ASSIGNMENT.match(tokens[0])):
        env[assignment[1]] = assignment[2]
        tokens.pop(0)
    if not tokens:
        raise ValueError(f"--variant {name}: no workflow after the environment (e.g. {name}=training)")
    workflow = tokens[0]
    if workflow.replace("-multigpu", "_multigpu").removesuffix("_multigpu") not in WORKFLOWS:
        choices = ", ".join(f"{base}[_multigpu]" for base in WORKFLOWS)
        raise ValueError(f"--variant {name}: unknown workflow {workflow!r}; choose one of {choices}")
    return Variant(name, workflow, tuple(tokens[1:]), env)


def reserved_in(args: Sequence[str]) -> str | None:
    """The first option of :data:`RESERVED_OPTIONS` that ``args`` sets, if any."""
    for arg in args:
        option = arg.partition("=")[0]
        if option in RESERVED_OPTIONS:
            return option
    return None


def run_order(names: Sequence[str], repeat: int) -> list[str]:
    """The variants' order in ``repeat``: rotated by one per repeat (A B C, B C A, C A B, ...)."""
    shift = repeat % len(names)
    return [*names[shift:], *names[:shift]]


def planned_runs(names: Sequence[str], repeats: int, base_seed: int) -> list[dict]:
    """Every run of the comparison in the order it runs: variant, repeat, position within the repeat, seed."""
    return [
        {"variant": name, "repeat": repeat, "position": position, "seed": base_seed + repeat}
        for repeat in range(repeats)
        for position, name in enumerate(run_order(names, repeat))
    ]


def run_key(variant: str, repeat: int) -> str:
    return f"{variant}/repeat{repeat}"


# Running ----------------------------------------------------------------------------------------------------------


def write_json(path: Path, data: dict) -> None:
    """Write through a temporary file and a rename, so that an interrupted write leaves the old file whole."""
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(data, indent=2) + "\n")
    temporary.replace(path)


def run_one(argv: list[str], env: dict[str, str], log: Path, timeout_s: float | None) -> dict:
    """Run one benchmark, its stdout and stderr to ``log``; return its outcome (exit code, timed out, seconds)."""
    started = time.monotonic()
    deadline = math.inf if timeout_s is None else started + timeout_s

    def past_deadline() -> str | None:
        return f"run exceeded --run_timeout_s {timeout_s:g}" if time.monotonic() > deadline else None

    with log.open("w") as stream:
        stream.write(f"$ {shlex.join(argv)}\n")
        stream.flush()
        # `exec` keeps one process (the supervised group's leader); 2>&1 puts the run's stderr in its log too.
        shell = ["/bin/sh", "-c", 'exec "$@" 2>&1', "sh", *argv]
        code = run_supervised(shell, env, stdout=stream, abort_check=past_deadline)
    wall_s = time.monotonic() - started
    return {"exit_code": code, "timed_out": past_deadline() is not None and code != 0, "wall_s": wall_s}


def progress_line(index: int, total: int, row: dict) -> str:
    """``[3/10] compiled repeat 1: 412.0 k env-steps/s, 9.8 s``, or the run's failure."""
    head = f"[{index}/{total}] {row['variant']} repeat {row['repeat']}"
    if row["status"] != COMPLETED:
        return f"{head}: {row['status'].upper()} (see {row['log']}), {row['wall_s']:.1f} s"
    if row["throughput"] is not None:
        return f"{head}: {row['throughput'] / 1e3:,.1f} k env-steps/s, {row['wall_s']:.1f} s"
    if row["total_wall_time_s"] is not None:
        return f"{head}: startup {row['total_wall_time_s']:.2f} s, {row['wall_s']:.1f} s"
    return f"{head}: {row['wall_s']:.1f} s"


def run_comparison(directory: Path, plan: dict, timeout_s: float | None) -> int:
    """Run every planned run in turn, recording each outcome in ``plan.json``; return 0, or 130 if interrupted."""
    variants = {variant["name"]: Variant(**variant) for variant in plan["variants"]}
    runs = planned_runs(list(variants), plan["repeats"], plan["base_seed"])
    for index, run in enumerate(runs, start=1):
        variant = variants[run["variant"]]
        (directory / variant.name).mkdir(exist_ok=True)
        bundle = bundle_path(directory, variant.name, run["repeat"])
        log = log_path(directory, variant.name, run["repeat"])
        bundle.unlink(missing_ok=True)
        command = variant.command(plan["common"], run["seed"], bundle)
        outcome = run_one(command, {**os.environ, **variant.env}, log, timeout_s)
        plan["outcomes"][run_key(variant.name, run["repeat"])] = outcome
        write_json(directory / PLAN_FILE, plan)
        print(progress_line(index, len(runs), run_row(directory, plan, run)), flush=True)
        if outcome["exit_code"] in STOPPED_BY_SIGNAL and not outcome["timed_out"]:
            print("[compare] interrupted; the summary covers the runs that finished", file=sys.stderr, flush=True)
            return 130
    return 0


# Summarising ------------------------------------------------------------------------------------------------------


def bundle_path(directory: Path, variant: str, repeat: int) -> Path:
    return directory / variant / f"repeat{repeat}.json"


def log_path(directory: Path, variant: str, repeat: int) -> Path:
    return directory / variant / f"repeat{repeat}.log"


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
        **{f"startup_{phase}_s": startup.get(phase) for phase in STARTUP_PHASES},
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


# Command line -----------------------------------------------------------------------------------------------------


def parser() -> OneLineParser:
    parser = OneLineParser(
        prog="rlscale benchmark compare",
        description="Run named variants of a benchmark interleaved (A B, B A, ...) over repeats, holding the host "
        "alone, and tabulate medians and paired ratios with order-statistic 95 % intervals. The arguments after `--` "
        "are common to every variant.",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=[KEY=VALUE ...] WORKFLOW [ARGS...]",
        help="a compared configuration: the rest of an `rlscale benchmark` line, with environment variables first "
        '(e.g. ll="NCCL_PROTO=LL training_multigpu --num_gpus 2"); the first is the baseline. At least two',
    )
    parser.add_argument(
        "--repeats", type=int, default=RECOMMENDED_REPEATS, help=f"runs of each variant (default {RECOMMENDED_REPEATS})"
    )
    parser.add_argument("--output_dir", type=Path, required=True, help="where the bundles, logs and tables go")
    parser.add_argument("--base_seed", type=int, default=0, help="repeat r runs every variant with seed BASE + r")
    parser.add_argument("--run_timeout_s", type=float, help="stop a run after this long and record it as timeout")
    parser.add_argument(
        "--summarise_only", action="store_true", help="only rebuild the tables from OUTPUT_DIR's plan and bundles"
    )
    return parser


def main(argv: Sequence[str], hold_host: Callable[[], contextlib.AbstractContextManager]) -> int:
    """Entry point of ``rlscale benchmark compare``: 0 when every run completed, 1 when one did not, 130 when
    interrupted; the tables are written in every case.

    Args:
        argv: The command's arguments.
        hold_host: Holds the host alone while the runs go (the study's lease, passed by the dispatcher, which may
            import the study layer where this module may not).
    """
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    own, common = argv[:cut], argv[cut + 1 :]
    command = parser()
    args = command.parse_args(own)
    directory = args.output_dir
    if args.summarise_only:
        if not (directory / PLAN_FILE).is_file():
            command.error(f"--summarise_only: {directory / PLAN_FILE} does not exist")
        print(summary_markdown(write_summary(directory)), end="")
        return 0
    try:
        variants = [parse_variant(text) for text in args.variant]
    except ValueError as error:
        command.error(str(error))
    names = [variant.name for variant in variants]
    if len(variants) < 2:
        command.error(f"compare needs at least two --variant (got {len(variants)})")
    if len(set(names)) < len(names):
        command.error(f"--variant names must differ (got {' '.join(names)})")
    if args.repeats < 1:
        command.error(f"--repeats must be at least 1 (got {args.repeats})")
    if args.run_timeout_s is not None and args.run_timeout_s <= 0:
        command.error(f"--run_timeout_s must be positive (got {args.run_timeout_s:g})")
    for owner, given in (*((f"--variant {v.name}", v.args) for v in variants), ("the common arguments", common)):
        if option := reserved_in(given):
            command.error(f"{owner} sets {option}; the tool sets {', '.join(RESERVED_OPTIONS)} for every run")
    if (directory / PLAN_FILE).exists():
        command.error(f"{directory} already holds a comparison; pick another --output_dir or add --summarise_only")
    if args.repeats < RECOMMENDED_REPEATS:
        print(
            f"[compare] WARNING: {args.repeats} repeat(s): at least {RECOMMENDED_REPEATS} are needed for a speed claim",
            file=sys.stderr,
        )
    plan = {
        "variants": [asdict(variant) | {"args": list(variant.args)} for variant in variants],
        "common": common,
        "repeats": args.repeats,
        "base_seed": args.base_seed,
        "outcomes": {},
    }
    with hold_host():
        directory.mkdir(parents=True, exist_ok=True)
        write_json(directory / PLAN_FILE, plan)
        try:
            code = run_comparison(directory, plan, args.run_timeout_s)
        except KeyboardInterrupt:  # Between two runs: nothing is left running, the finished runs are tabulated.
            code = 130
    summary = write_summary(directory)
    print(summary_markdown(summary), end="")
    return code or int(any(variant["completed"] < variant["planned"] for variant in summary["variants"]))
