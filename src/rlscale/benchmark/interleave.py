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
``.log``, and the tables of :mod:`rlscale.benchmark.interleave_summary` (which also holds the plan's order), which
``--summarise_only`` rebuilds from those files alone (a directory copied back from a GPU machine).
"""

from __future__ import annotations

import contextlib
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

from rlscale.argparsing import OneLineParser
from rlscale.benchmark.interleave_summary import (
    COMPLETED,
    PLAN_FILE,
    RECOMMENDED_REPEATS,
    bundle_path,
    log_path,
    planned_runs,
    run_key,
    run_row,
    summary_markdown,
    write_json,
    write_summary,
)
from rlscale.benchmark.records import WORKFLOWS
from rlscale.launch.supervise import run_supervised

RESERVED_OPTIONS = ("--seed", "--seeds", "--output_path")
"""Set by the tool for every run; a variant or the common arguments may not set them."""
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*\Z")
ENVIRONMENT_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.DOTALL)
STOPPED_BY_SIGNAL = {128 + signal.SIGINT, 128 + signal.SIGTERM}
"""Exit codes of a run stopped by Ctrl-C or SIGTERM: the comparison stops there too."""


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


# Running ----------------------------------------------------------------------------------------------------------


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
