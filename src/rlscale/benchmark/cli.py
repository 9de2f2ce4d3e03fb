"""``rlscale benchmark WORKFLOW``: dispatch, single-process or through the multi-GPU launcher.

No torch here: ``--help``, ``--dry_run`` and every rejection answer before torch is imported. ``*_multigpu`` reuses
``train_multigpu``'s launcher (:func:`rlscale.launch.command.benchmark_launcher_cfg`), which starts :mod:`.worker`
once per rank; the plain workflows run in this process. A workflow's options: :mod:`.options`.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from rlscale.argparsing import OneLineParser
from rlscale.benchmark.comparison import dry_run_result, run_peer_first, single_process_command, torchrun_command
from rlscale.benchmark.options import (
    DESCRIPTIONS,
    UNSUPPORTED,
    add_unsupported,
    check_workflow_args,
    jax_message,
    workflow_parser,
)
from rlscale.launch.command import BENCHMARK_WORKFLOWS, benchmark_launcher_cfg, forwarded_value, parse_launcher_args

WORKER = str(Path(__file__).resolve().with_name("worker.py"))
"""Script each rank of a multi-GPU benchmark runs."""


def launch(workflow: str, argv: list[str]) -> int:
    """``<workflow>_multigpu``: refuse bad arguments here, in one line, then hand the job to the launcher."""
    from rlscale.launch.run import run_launcher
    from rlscale.train import parse_args

    cfg = benchmark_launcher_cfg(workflow, WORKER)
    early = OneLineParser(prog=cfg.prog, add_help=False, allow_abbrev=False)
    add_unsupported(early)
    known, _ = early.parse_known_args([arg for arg in argv if arg not in ("-h", "--help")])
    for name, message in UNSUPPORTED.items():  # before the launcher's checks, so the reason is the one shown
        if getattr(known, name):
            early.error(message)
    if forwarded_value(argv, "--ml_framework") == "jax":
        early.error(jax_message(workflow))
    launcher_args, forwarded = parse_launcher_args(argv, cfg, os.environ)
    rank_argv = ["--rl_library", launcher_args.rl_library] if cfg.rl_libraries else []
    rank_argv += [arg for arg in forwarded if arg != "--distributed"]
    parser = workflow_parser(workflow, cfg.prog)
    # What every rank would refuse, refused here once; --dry_run skips the checks that need torch (task, device, ...).
    rank_args, _ = parse_args(rank_argv, parser, launcher=cfg.prog, torch_free=launcher_args.dry_run)
    check_workflow_args(parser, workflow, rank_args, forwarded, multigpu=True)
    if workflow != "training" or not rank_args.peer:
        return run_launcher(argv, cfg)

    def with_result(result: Path) -> list[str]:
        return [*argv, "--peer_result", str(result)]

    if launcher_args.dry_run:
        print(shlex.join(torchrun_command(launcher_args, rank_args, dry_run_result())), flush=True)
        return run_launcher(with_result(dry_run_result()), cfg)
    return run_peer_first(
        launcher_args.rl_library,
        lambda result: torchrun_command(launcher_args, rank_args, result),
        lambda result: run_launcher(with_result(result), cfg),
    )


def usage() -> str:
    lines = ["usage: rlscale benchmark WORKFLOW [OPTIONS...]", "", "workflows:"]
    lines += [f"  {name:<20} {text}" for name, text in DESCRIPTIONS.items()]
    lines += [
        f"  {name + '_multigpu':<20} the same, one rank per GPU (launcher options of train_multigpu)"
        for name in DESCRIPTIONS
    ]
    lines += [
        "",
        "`-multigpu` spellings are aliases. Run `rlscale benchmark WORKFLOW --help` for a workflow's options.",
        "Only global rank 0 writes the result bundle (one JSON file); see docs/benchmarks.md.",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Entry point of ``rlscale benchmark``."""
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name = argv[0].replace("-multigpu", "_multigpu")
    workflow = name.removesuffix("_multigpu")
    if workflow not in BENCHMARK_WORKFLOWS:
        choices = ", ".join((*BENCHMARK_WORKFLOWS, *(f"{base}_multigpu" for base in BENCHMARK_WORKFLOWS)))
        print(f"rlscale benchmark: error: unknown workflow {argv[0]!r}; choose one of {choices}", file=sys.stderr)
        return 2
    if name != workflow:
        return launch(workflow, argv[1:])
    from rlscale.train import parse_command_line

    parser = workflow_parser(workflow, f"rlscale benchmark {workflow}")
    args = parse_command_line(parser, argv[1:])
    check_workflow_args(parser, workflow, args, argv[1:], multigpu=False)
    from rlscale.benchmark.worker import time_python_imports

    python_imports_s = time_python_imports(argv[1:], workflow)
    from rlscale.benchmark.session import run_benchmark

    if workflow != "training" or not args.peer:
        return run_benchmark(workflow, argv[1:], python_imports_s, multigpu=False)
    from rlscale.train import parse_args

    # Every check of the run, before the peer starts: a bad --task or --device is one line, not the peer's crash.
    resolved, _ = parse_args(argv[1:], parser)
    return run_peer_first(
        args.rl_library,
        lambda result: single_process_command(resolved, result),
        lambda result: run_benchmark(workflow, [*argv[1:], "--peer_result", str(result)], python_imports_s, False),
    )
