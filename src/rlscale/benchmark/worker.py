"""Per-rank entry point of ``rlscale benchmark <workflow>_multigpu``: torchrun runs this file once per rank.

The launcher passes ``--workflow <name>`` first. The python_imports phase is timed here before anything else imports
torch, so the module's own imports are stdlib and torch-free rlscale modules only.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
from pathlib import Path

from rlscale.launch.command import forwarded_value
from rlscale.rl import ADAPTERS


def time_python_imports(argv: list[str], workflow: str) -> float:
    """Import torch, the task modules and the library adapter (not for runtime, which uses none); return seconds.

    A task that asks for it gets its rank's GPU isolated between the two, before a library import can start CUDA,
    since CUDA reads ``CUDA_VISIBLE_DEVICES`` only once (isolated after rl_games' import, both ranks of an H200 pair
    landed on GPU 0).
    """
    started = time.perf_counter()
    import torch  # noqa: F401

    from rlscale.tasks import UnknownTaskError, get_spec
    from rlscale.train import isolate_gpu_if_task_asks

    task = forwarded_value(argv, "--task")
    if task is not None:
        with contextlib.suppress(UnknownTaskError, ValueError):  # the parser refuses them later, in one line
            isolate_gpu_if_task_asks(
                task, forwarded_value(argv, "--device"), forwarded_value(argv, "--ml_framework") or "torch"
            )
            _ = get_spec(task).task_class  # the registry imports a task's module only when asked for its class
    library = forwarded_value(argv, "--rl_library") or "rsl_rl"
    if workflow != "runtime" and library in ADAPTERS:  # an unknown name is refused later, by the parser
        importlib.import_module(ADAPTERS[library])
    return time.perf_counter() - started


def split_workflow(argv: list[str]) -> tuple[str, list[str]]:
    """``(workflow, remaining argv)`` from the launcher's ``--workflow NAME ...``."""
    if len(argv) < 2 or argv[0] != "--workflow":
        raise SystemExit(f"rlscale benchmark worker: expected --workflow NAME first, got {argv[:2]}")
    return argv[1], argv[2:]


def main() -> int:
    workflow, argv = split_workflow(sys.argv[1:])
    python_imports_s = time_python_imports(argv, workflow)
    from rlscale.benchmark.session import run_benchmark
    from rlscale.launch.worker import run_rank

    return run_rank(lambda rank_argv: run_benchmark(workflow, rank_argv, python_imports_s, multigpu=True), argv)


if __name__ == "__main__":
    # Run as a script, this file's folder heads sys.path; drop it so that its siblings (cli, stats, ...) cannot
    # shadow top-level modules of the same names.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    sys.exit(main())
