"""What a benchmark workflow is: its record (:class:`Workflow`), the :class:`Measurement` it fills as it goes, and the
startup phases every workflow times.

The workflows themselves are :mod:`rlscale.benchmark.workflows`, one module each. A module of its own, apart from
them, so that a workflow module and the registry that lists it do not import each other.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NoReturn

from rlscale.dist import RankInfo
from rlscale.run.spec import RunSpec

PHASES = ("python_imports", "task_config", "env_creation", "task_compile", "first_step", "first_iteration")
"""Startup phases in order. ``task_compile`` is a JIT task's compilation (MJX), taken out of ``env_creation``; it
stays None for a task that compiles nothing."""
OPTIONAL_PHASES = {"task_compile"}
REQUIRED_PHASES = tuple(phase for phase in PHASES if phase not in OPTIONAL_PHASES)
"""The phases every run measures (``rlscale benchmark compare`` tabulates these)."""
THROUGHPUT_FIELDS = ("iteration_time_s", "collection_time_s", "learning_time_s", "collection_fps", "total_fps")

OptionCheck = Callable[[argparse.ArgumentParser, argparse.Namespace, bool], None]
"""Refuses, through ``parser.error``, what the workflow cannot do with the parsed arguments (multigpu or not)."""


@dataclass
class Measurement:
    """What one workflow measured on this rank; every figure is None until measured."""

    workflow: str
    num_envs_per_rank: int
    """Environments per rank, as configured (``--num_envs`` or the task's default)."""
    seed: int
    """Base seed; rank r seeds its task and its random actions with seed + r."""
    status: str = "completed"
    startup: dict = field(default_factory=lambda: dict.fromkeys(PHASES))
    runtime: dict = field(default_factory=dict)
    learning: dict | None = None
    max_iterations: int | None = None
    peer: dict | None = None
    """The peer baseline's result, on global rank 0 of ``training --peer`` (see :mod:`.peer_ratio`)."""
    ranks: dict | None = None
    """Where each rank's time went, on global rank 0 of a completed training run (see :mod:`.rank_breakdown`)."""

    def __post_init__(self) -> None:
        self.runtime = {
            "iterations_completed": 0,
            "warmup_iterations": 0,
            "total_wall_time_s": None,
            "steps_per_iteration": None,
            **dict.fromkeys((*THROUGHPUT_FIELDS, "iterations_per_s")),
            "environment_step_timing": None,
            "kernel_cache": None,
            "peer": None,
        }


def no_options(group: argparse._ArgumentGroup) -> None:
    """A workflow without options of its own."""


def nothing_to_check(parser: argparse.ArgumentParser, args: argparse.Namespace, multigpu: bool) -> None:
    """A workflow that checks nothing beyond the common checks."""


@dataclass(frozen=True)
class Workflow:
    """One benchmark workflow."""

    name: str
    description: str
    """One line, for ``rlscale benchmark --help``."""
    uses_library: bool
    """Whether it runs an RL library (its bundle names the library; runtime steps the task alone)."""
    scope: str
    """``global``: the figures cover every rank; ``rank0``: rank 0's own."""
    run: Callable[[Measurement, RunSpec, RankInfo], None]
    """Measures on this rank, filling the :class:`Measurement`."""
    summarise: Callable[[dict], list[str]]
    """The console lines of a bundle of this workflow (:mod:`.summary` puts the common header around them)."""
    add_options: Callable[[argparse._ArgumentGroup], None] = no_options
    """Adds the workflow's own options (beside ``rlscale train``'s)."""
    refuses: Mapping[str, str] = field(default_factory=dict)
    """``rlscale train`` options the workflow refuses → why."""
    check: OptionCheck = nothing_to_check
    plan: Callable[[Measurement, RunSpec, Callable[[str], NoReturn]], None] | None = None
    """Completes the measurement's settings before anything runs, refusing what cannot be measured."""


def record_task_creation(phases: dict, creation_s: float | None, compile_s: float | None) -> None:
    """Split a task's construction time into ``env_creation`` and its own compilation (``task_compile``)."""
    phases["task_compile"] = compile_s
    phases["env_creation"] = None if creation_s is None else creation_s - (compile_s or 0.0)


def kernel_cache(compiled_kernels: int | None) -> dict | None:
    """The bundle's ``kernel_cache``: whether ``task_compile`` compiled kernels (cold) or loaded them all (warm)."""
    if compiled_kernels is None:
        return None
    return {"state": "cold" if compiled_kernels else "warm", "modules_compiled": compiled_kernels}


def count_compile_as_creation(phases: dict) -> None:
    """For a repeat in a warm process: the task's JIT compilation was paid once per process (the MJX backend keeps
    its executables), so ``task_compile`` is null and whatever the task still reported stays in ``env_creation``."""
    if phases["task_compile"] is not None and phases["env_creation"] is not None:
        phases["env_creation"] += phases["task_compile"]
    phases["task_compile"] = None


def total_startup(phases: dict) -> float | None:
    """Sum of the phases, or None while a required one is unmeasured."""
    if any(phases[name] is None for name in REQUIRED_PHASES):
        return None
    return sum(value for value in phases.values() if value is not None)


def synchronize(device: str) -> None:
    """Wait for the device's queued kernels (nothing on the CPU)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def random_actions(task, generator):
    """Actions uniform in [-1, 1], the task's nominal range."""
    import torch

    shape = (task.num_envs, task.num_actions)
    return torch.rand(shape, generator=generator, device=task.device) * 2.0 - 1.0
