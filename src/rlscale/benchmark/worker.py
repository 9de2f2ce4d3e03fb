"""Per-rank entry point of ``rlscale benchmark <workflow>_multigpu``: torchrun runs this file once per rank.

The launcher passes ``--workflow <name>`` first and leaves the ranks' resolved spec, the workflow included, in
``$RLSCALE_RUN_SPEC``. The
python_imports phase is timed here before anything else imports torch, so the module's own imports are stdlib and
torch-free rlscale modules only.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Protocol

from rlscale.benchmark.arguments import parse_in_process, resolve_in_process
from rlscale.benchmark.workflow import Workflow
from rlscale.benchmark.workflows import WORKFLOWS
from rlscale.device import Device
from rlscale.dist import rank_info
from rlscale.rl import LIBRARIES, load_adapter
from rlscale.rl.tracking import keep_client_off
from rlscale.run.spec import RunSpec, spec_from_environment


class RunSettings(Protocol):
    """What the import timing reads: a :class:`RunSpec`, or the parsed arguments before it is resolved."""

    task: str
    device: Device | str | None
    """The spec's device, or the ``--device`` text before it is resolved."""
    ml_framework: str
    rl_library: str
    logger: str


def time_python_imports(workflow: Workflow, settings: RunSettings) -> float:
    """Import torch, the task modules and the library adapter (for a workflow that uses one); return seconds.

    A task that asks for it gets its rank's GPU isolated between the two, before a library import can start CUDA,
    since CUDA reads ``CUDA_VISIBLE_DEVICES`` only once (isolated after rl_games' import, both ranks of an H200 pair
    landed on GPU 0).
    """
    keep_client_off(rank_info(), settings.logger)  # before a library's import
    started = time.perf_counter()
    import torch  # noqa: F401

    from rlscale.run.rank import isolate_gpu_if_task_asks
    from rlscale.tasks import UnknownTaskError, get_spec

    with contextlib.suppress(UnknownTaskError, ValueError):  # the parser refuses them later, in one line
        device = Device.parse(settings.device) if isinstance(settings.device, str) else settings.device
        isolate_gpu_if_task_asks(settings.task, device, settings.ml_framework)
        _ = get_spec(settings.task).task_class  # the registry imports a task's module only when asked for its class
    if workflow.uses_library and settings.rl_library in LIBRARIES:  # an unknown name is refused later, by the parser
        load_adapter(settings.rl_library)
    return time.perf_counter() - started


def prepare_in_process(workflow: Workflow, argv: list[str], multigpu: bool) -> tuple[RunSpec, float, float]:
    """Check ``argv``, time the imports, then resolve the spec: a benchmark started without a launcher's spec.

    Returns:
        The spec, the seconds the imports took, and when they ended (``time.perf_counter``): the task_config phase,
        resolving the spec included, starts there.
    """
    parser, args = parse_in_process(workflow, argv, multigpu)
    python_imports_s = time_python_imports(workflow, args)
    config_started = time.perf_counter()
    return resolve_in_process(workflow, parser, args), python_imports_s, config_started


def split_workflow(argv: list[str]) -> tuple[Workflow, list[str]]:
    """The workflow of the launcher's ``--workflow NAME ...``, and the remaining argv."""
    if len(argv) < 2 or argv[0] != "--workflow" or argv[1] not in WORKFLOWS:
        raise SystemExit(f"rlscale benchmark worker: expected --workflow NAME first, got {argv[:2]}")
    return WORKFLOWS[argv[1]], argv[2:]


def main() -> int:
    workflow, argv = split_workflow(sys.argv[1:])
    spec = spec_from_environment()
    if spec is None:  # a torchrun line run by hand
        spec, python_imports_s, config_started = prepare_in_process(workflow, argv, multigpu=True)
    else:  # the launcher's spec: its workflow, like every other setting (the command line's is for a reader)
        workflow = WORKFLOWS[spec.options["workflow"]]
        python_imports_s = time_python_imports(workflow, spec)
        config_started = time.perf_counter()
    from rlscale.benchmark.session import run_benchmark
    from rlscale.launch.worker import run_rank

    return run_rank(lambda _: run_benchmark(workflow, spec, python_imports_s, config_started, multigpu=True), argv)


if __name__ == "__main__":
    # Run as a script, this file's folder heads sys.path; drop it so that its siblings (cli, stats, ...) cannot
    # shadow top-level modules of the same names.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    sys.exit(main())
