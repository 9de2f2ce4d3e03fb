"""A benchmark's arguments: every ``rlscale train`` option plus the workflow's own, checked and resolved into the
run's spec, on the launcher (``<workflow>_multigpu``) or in the process that runs the benchmark.

Torch-free until a spec is resolved in full. A module of its own, below :mod:`.cli` and :mod:`.worker`, so that
the command line and the ranks share it without importing each other.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rlscale.argparsing import OneLineParser
from rlscale.benchmark.bundle import DEFAULT_OUTPUT_DIR
from rlscale.benchmark.options import UNSUPPORTED, add_unsupported, given, jax_message
from rlscale.benchmark.workflow import Workflow
from rlscale.launch.command import LauncherCfg, build_parser, forwarded_value
from rlscale.launch.launcher import RankCheck, job_shape, ranks_memory
from rlscale.paths import unwritable_reason
from rlscale.run.args import add_train_arguments, parse_command_line
from rlscale.run.spec import RunSpec, spec_from_args


def command_name(workflow: Workflow, multigpu: bool) -> str:
    return f"rlscale benchmark {workflow.name}{'_multigpu' if multigpu else ''}"


def workflow_parser(workflow: Workflow, prog: str) -> OneLineParser:
    """Every ``rlscale train`` option plus the workflow's own; torch-free."""
    parser = OneLineParser(prog=prog, description=f"Benchmark: {workflow.description}.")
    add_train_arguments(parser)
    parser.set_defaults(log_job_type="benchmark")  # the stage a tracker run of it belongs to
    group = parser.add_argument_group("benchmark options")
    group.add_argument(
        "--output_path",
        type=Path,
        metavar="FILE",
        help="bundle path; {seed} in it stands for the run's seed (default "
        "results/benchmarks/<workflow>_<task>_<library>_<ranks>x<envs>_seed<seed>.json)",
    )
    workflow.add_options(group)
    add_unsupported(group)
    return parser


def check_workflow_args(
    parser: argparse.ArgumentParser, workflow: Workflow, args: argparse.Namespace, argv, *, multigpu: bool
) -> None:
    """Refuse what the workflow cannot do, by name; exits 2 through ``parser.error``."""
    for name, message in UNSUPPORTED.items():
        if getattr(args, name):
            parser.error(message)
    for flag, reason in workflow.refuses.items():
        if given(argv, flag):
            parser.error(f"{flag} does not apply to the {workflow.name} benchmark: {reason}")
    if getattr(args, "distributed", False) and args.ml_framework == "jax":
        parser.error(jax_message(workflow.name))
    workflow.check(parser, args, multigpu)
    if args.output_path is not None and Path(args.output_path).is_dir():
        parser.error(f"--output_path {args.output_path} is a directory; name the bundle file")
    folder = DEFAULT_OUTPUT_DIR if args.output_path is None else Path(args.output_path).parent
    unwritable = unwritable_reason(folder)
    if unwritable and args.output_path is None:
        parser.error(f"bundle folder {folder}: {unwritable}; pass --output_path FILE in a directory you can write")
    if unwritable:
        parser.error(f"--output_path {args.output_path}: {unwritable}; name a file in a directory you can write")


def seed_from_seeds(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Give ``--seeds`` runs the first seed as ``--seed``, before the spec is resolved: the spec then describes the
    first repeat (and the peer baseline, which takes its seed from the spec, runs the seed rlscale runs)."""
    if getattr(args, "seeds", None) is None:
        return
    if args.seed is not None:
        parser.error("--seed and --seeds are exclusive: --seeds runs every seed it names")
    args.seed = args.seeds[0]


def refuse_early(workflow: Workflow, argv: list[str]) -> None:
    """Refuse the unsupported options and skrl JAX before the launcher's own checks, so the reason is the one shown."""
    early = OneLineParser(prog=command_name(workflow, True), add_help=False)
    add_unsupported(early)
    known, _ = early.parse_known_args([arg for arg in argv if arg not in ("-h", "--help")])
    for name, message in UNSUPPORTED.items():
        if getattr(known, name):
            early.error(message)
    if forwarded_value(argv, "--ml_framework") == "jax":
        early.error(jax_message(workflow.name))


def launcher_check(workflow: Workflow, cfg: LauncherCfg) -> RankCheck:
    """The launcher's check of its ranks' arguments: what every rank would refuse, refused once; ``--dry_run`` skips
    the checks that need torch (task, device, ...). Returns the ranks' spec."""

    def check(launcher_args: argparse.Namespace, forwarded: list[str]) -> RunSpec:
        rank_argv = [arg for arg in forwarded if arg != "--distributed"]
        parser = workflow_parser(workflow, cfg.prog)
        parser.other_options = build_parser(cfg).option_strings()  # a mistyped launcher option lands here
        if cfg.rl_libraries:  # the launcher's parse of it, handed over, not written and reread
            parser.set_defaults(rl_library=launcher_args.rl_library)
        parser.set_defaults(workflow=workflow.name)  # the ranks read it from the spec (spec.options)
        args = parse_command_line(parser, rank_argv)
        seed_from_seeds(parser, args)
        spec = spec_from_args(
            parser,
            args,
            launcher=cfg.prog,
            torch_free=launcher_args.dry_run,
            job=job_shape(launcher_args),
            memory=ranks_memory(launcher_args, os.environ),
        )
        check_workflow_args(parser, workflow, args, forwarded, multigpu=True)
        return spec

    return check


def parse_in_process(workflow: Workflow, argv: list[str], multigpu: bool) -> tuple[OneLineParser, argparse.Namespace]:
    """Parse and check a benchmark's arguments where it runs (a process without a launcher's spec), torch-free."""
    parser = workflow_parser(workflow, command_name(workflow, multigpu))
    args = parse_command_line(parser, argv)
    seed_from_seeds(parser, args)
    check_workflow_args(parser, workflow, args, argv, multigpu=multigpu)
    return parser, args


def resolve_in_process(workflow: Workflow, parser: argparse.ArgumentParser, args: argparse.Namespace) -> RunSpec:
    """The spec of :func:`parse_in_process`' arguments, resolved in full (torch is imported)."""
    return spec_from_args(parser, args, launcher=command_name(workflow, True))
