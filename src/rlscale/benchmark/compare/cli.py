"""``rlscale benchmark compare``'s command line: check the variants, hold the host alone while the runs go, then
write and print the tables (see :mod:`rlscale.benchmark.compare`).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from rlscale.argparsing import OneLineParser
from rlscale.benchmark.compare.plan import (
    PLAN_FILE,
    RECOMMENDED_REPEATS,
    RESERVED_OPTIONS,
    Variant,
    bundle_path,
    parse_variant,
    planned_runs,
    reserved_in,
    write_json,
)
from rlscale.benchmark.compare.run import run_comparison
from rlscale.benchmark.compare.spec import load_spec
from rlscale.benchmark.compare.summary import summary_markdown, write_summary
from rlscale.launch.lease import acquire_host


def parser() -> OneLineParser:
    parser = OneLineParser(
        prog="rlscale benchmark compare",
        description="Run named variants of a benchmark interleaved (A B, B A, ...) over repeats, holding the host "
        "alone, and tabulate medians and paired ratios with order-statistic 95 % intervals. The arguments after `--` "
        "are common to every variant.",
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
    parser.add_argument(
        "--spec",
        type=Path,
        help="a YAML file holding the variants, the common arguments and optionally the repeats and base seed "
        "(config/compare/); --repeats and --base_seed given here win over the file's",
    )
    parser.add_argument(
        "--dry_run", action="store_true", help="print every planned run's command in order; run and write nothing"
    )
    return parser


def print_plan(directory: Path, variants: Sequence[Variant], common: Sequence[str], repeats: int, seed: int) -> None:
    """One line per planned run, in the order they would run: its variant, repeat and command."""
    by_name = {variant.name: variant for variant in variants}
    runs = planned_runs(list(by_name), repeats, seed)
    for number, run in enumerate(runs, 1):
        variant = by_name[run["variant"]]
        bundle = bundle_path(directory, variant.name, run["repeat"])
        words = [f"{key}={value}" for key, value in variant.env.items()]
        words += ["rlscale", *variant.command(common, run["seed"], bundle)[3:]]
        print(f"[{number}/{len(runs)}] {variant.name} repeat {run['repeat']}: {shlex.join(words)}")


def main(argv: Sequence[str]) -> int:
    """Entry point of ``rlscale benchmark compare``: 0 when every run completed, 1 when one did not, 130 when
    interrupted; the tables are written in every case."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    own, common = argv[:cut], argv[cut + 1 :]
    command = parser()
    args = command.parse_args(own)
    if args.spec is not None:
        if args.variant or common:
            command.error(f"--spec {args.spec} holds the variants and common arguments: give no --variant or -- too")
        try:
            spec_argv = load_spec(args.spec).argv()
        except ValueError as error:
            command.error(str(error))
        cut = spec_argv.index("--")
        args = command.parse_args([*spec_argv[:cut], *own])  # What is typed here comes last, so it wins.
        common = spec_argv[cut + 1 :]
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
    if args.dry_run:
        print_plan(directory, variants, common, args.repeats, args.base_seed)
        return 0
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
    with acquire_host(True, label="benchmark compare"):
        directory.mkdir(parents=True, exist_ok=True)
        write_json(directory / PLAN_FILE, plan)
        try:
            code = run_comparison(directory, plan, args.run_timeout_s)
        except KeyboardInterrupt:  # Between two runs: nothing is left running, the finished runs are tabulated.
            code = 130
    summary = write_summary(directory)
    print(summary_markdown(summary), end="")
    return code or int(any(variant["completed"] < variant["planned"] for variant in summary["variants"]))
