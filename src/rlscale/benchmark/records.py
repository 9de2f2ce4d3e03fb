"""The benchmark workflows, one record each: what a workflow is, which options it takes and refuses, how it runs
and how its result reads. :data:`WORKFLOWS` is the one list of them; nothing else branches on a workflow's name.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NoReturn

from rlscale.benchmark import options, summary
from rlscale.benchmark.workflows import Measurement, plan_training, run_runtime, run_startup, run_training
from rlscale.dist import RankInfo
from rlscale.run.spec import RunSpec

OptionCheck = Callable[[argparse.ArgumentParser, argparse.Namespace, bool], None]
"""Refuses, through ``parser.error``, what the workflow cannot do with the parsed arguments (multigpu or not)."""


@dataclass(frozen=True)
class Workflow:
    """One benchmark workflow."""

    name: str
    description: str
    """One line, for ``rlscale benchmark --help``."""
    add_options: Callable[[argparse._ArgumentGroup], None]
    """Adds the workflow's own options (beside ``rlscale train``'s)."""
    refuses: Mapping[str, str]
    """``rlscale train`` options the workflow refuses → why."""
    check: OptionCheck
    uses_library: bool
    """Whether it runs an RL library (its bundle names the library; runtime steps the task alone)."""
    scope: str
    """``global``: the figures cover every rank; ``rank0``: rank 0's own."""
    run: Callable[[Measurement, RunSpec, RankInfo], None]
    """Measures on this rank, filling the :class:`Measurement`."""
    summarise: Callable[[dict], list[str]]
    """The console lines of a bundle of this workflow."""
    plan: Callable[[Measurement, RunSpec, Callable[[str], NoReturn]], None] | None = None
    """Completes the measurement's settings before anything runs, refusing what cannot be measured."""


STARTUP = Workflow(
    name="startup",
    description="cold-start phases of one training iteration, timed on rank 0",
    add_options=options.add_no_options,
    refuses=options.STARTUP_REFUSES,
    check=options.check_nothing,
    uses_library=True,
    scope="rank0",
    run=run_startup,
    summarise=summary.startup_lines,
)
RUNTIME = Workflow(
    name="runtime",
    description="env-step throughput under random actions, no policy (rank 0's own rate)",
    add_options=options.add_runtime_options,
    refuses=options.RUNTIME_REFUSES,
    check=options.check_runtime,
    uses_library=False,
    scope="rank0",
    run=run_runtime,
    summarise=summary.runtime_lines,
)
TRAINING = Workflow(
    name="training",
    description="end-to-end PPO throughput (global over all ranks) and learning curves",
    add_options=options.add_training_options,
    refuses={},
    check=options.check_training,
    uses_library=True,
    scope="global",
    run=run_training,
    summarise=summary.training_lines,
    plan=plan_training,
)

WORKFLOWS = {workflow.name: workflow for workflow in (STARTUP, RUNTIME, TRAINING)}
"""The workflows by name."""
