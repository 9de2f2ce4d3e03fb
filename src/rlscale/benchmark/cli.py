"""``rlscale benchmark WORKFLOW``: dispatch, single-process or through the multi-GPU launcher.

No torch here: ``--help``, ``--dry_run`` and every rejection answer before torch is imported. ``*_multigpu`` reuses
``train_multigpu``'s launcher (:func:`rlscale.launch.command.benchmark_launcher_cfg`), which starts :mod:`.worker`
once per rank; the plain workflows run in this process. The workflows: :mod:`.workflows`; their arguments:
:mod:`.arguments`.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from pathlib import Path

from rlscale.benchmark.arguments import launcher_check, refuse_early
from rlscale.benchmark.peer_ratio import dry_run_result, run_peer_first, single_process_command, torchrun_command
from rlscale.benchmark.workflow import Workflow
from rlscale.benchmark.workflows import WORKFLOWS
from rlscale.launch.command import benchmark_launcher_cfg

WORKER = str(Path(__file__).resolve().with_name("worker.py"))
"""Script each rank of a multi-GPU benchmark runs."""


def launch(workflow: Workflow, argv: list[str]) -> int:
    """``<workflow>_multigpu``: refuse bad arguments here, in one line, then hand the job to the launcher."""
    from rlscale.launch.launcher import Launch, resolve_launch, start_launch

    cfg = benchmark_launcher_cfg(workflow.name, WORKER, uses_library=workflow.uses_library)
    refuse_early(workflow, argv)
    resolved = resolve_launch(argv, cfg, os.environ, launcher_check(workflow, cfg))
    if not resolved.spec.options.get("peer"):
        return start_launch(resolved)

    def with_result(result: Path) -> Launch:
        """The launch with the peer's result file: the hidden ``--peer_result`` on the ranks' command line (where a
        launcher parse puts it) and in the spec, which stays the one resolved above."""
        relaunch = resolve_launch([*argv, "--peer_result", str(result)], cfg, os.environ)
        options = {**resolved.spec.options, "peer_result": str(result)}
        return dataclasses.replace(relaunch, spec=dataclasses.replace(resolved.spec, options=options))

    if resolved.args.dry_run:
        print(shlex.join(torchrun_command(resolved.args, resolved.spec, dry_run_result())), flush=True)
        return start_launch(with_result(dry_run_result()))
    return run_peer_first(
        resolved.spec.rl_library,
        lambda result: torchrun_command(resolved.args, resolved.spec, result),
        lambda result: start_launch(with_result(result)),
    )


def usage() -> str:
    lines = ["usage: rlscale benchmark WORKFLOW [OPTIONS...]", "", "workflows:"]
    lines += [f"  {name:<20} {workflow.description}" for name, workflow in WORKFLOWS.items()]
    lines += [
        f"  {name + '_multigpu':<20} the same, one rank per GPU (launcher options of train_multigpu)"
        for name in WORKFLOWS
    ]
    lines.append(f"  {'compare':<20} run named variants of one of these interleaved and compare them (see its --help)")
    lines.append(f"  {'predict':<20} predict iteration time and efficiency at N ranks from a 1-rank bundle (--help)")
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
    workflow = WORKFLOWS.get(name.removesuffix("_multigpu"))
    if workflow is None:
        choices = ", ".join((*WORKFLOWS, *(f"{base}_multigpu" for base in WORKFLOWS)))
        print(f"rlscale benchmark: error: unknown workflow {argv[0]!r}; choose one of {choices}", file=sys.stderr)
        return 2
    if name != workflow.name:
        return launch(workflow, argv[1:])
    from rlscale.benchmark.session import run_benchmark
    from rlscale.benchmark.worker import prepare_in_process

    spec, python_imports_s, config_started = prepare_in_process(workflow, argv[1:], multigpu=False)
    if not spec.options.get("peer"):
        return run_benchmark(workflow, spec, python_imports_s, config_started, multigpu=False)

    def measure(result: Path) -> int:
        with_result = dataclasses.replace(spec, options={**spec.options, "peer_result": str(result)})
        return run_benchmark(workflow, with_result, python_imports_s, config_started, multigpu=False)

    # Every check of the run came before the peer starts: a bad --task or --device is one line, not the peer's crash.
    return run_peer_first(spec.rl_library, lambda result: single_process_command(spec, result), measure)
