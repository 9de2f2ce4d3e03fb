"""The doctor's vocabulary, as data: its configuration, its steps and their results, and the workarounds it tries.

Pure: nothing here starts a process or reads the environment; :mod:`.execute` runs a :class:`Step` and
:mod:`.procedure` decides which one comes next.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

Variables = tuple[tuple[str, str], ...]
"""Environment variables set for one step, in order: ``(("NCCL_P2P_DISABLE", "1"),)``."""


class StepKind(enum.StrEnum):
    SINGLE_RANK = "single_rank"
    DRY_RUN = "dry_run"
    PROBE = "probe"
    TOPOLOGY = "topology"
    NCCL_DEBUG = "nccl_debug"
    WORKAROUND = "workaround"
    CONFIRM = "confirm"
    VERIFY = "verify"

    @property
    def stage(self) -> int:
        """The step of the procedure (1 to 6) this kind belongs to."""
        return STAGES[self]


STAGES = {
    StepKind.SINGLE_RANK: 1,
    StepKind.DRY_RUN: 2,
    StepKind.PROBE: 3,
    StepKind.TOPOLOGY: 4,
    StepKind.NCCL_DEBUG: 5,
    StepKind.WORKAROUND: 6,
    StepKind.CONFIRM: 6,
    StepKind.VERIFY: 6,
}
LAST_STAGE = 6


class Outcome(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    HUNG = "hung"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"

    @property
    def failed(self) -> bool:
        """Whether the step found a failure (an error or a hang)."""
        return self in (Outcome.FAILED, Outcome.HUNG)


@dataclass(frozen=True)
class Step:
    """One command of the procedure.

    Args:
        kind: What the step is for.
        title: Its name in progress lines and the report ("probe at world size 3").
        argv: ``rlscale``'s arguments (``nccl_probe --num_gpus 3 ...``); none for the topology.
        env: Variables set for this step over the doctor's environment.
        world_size: Ranks it starts; None for the single-rank run, the dry run and the topology.
        timeout_s: Seconds it may run before it counts as hung and is stopped.
        skip: Why it is not run; None to run it.
    """

    kind: StepKind
    title: str
    argv: tuple[str, ...] = ()
    env: Variables = ()
    world_size: int | None = None
    timeout_s: float = 0.0
    skip: str | None = None


@dataclass(frozen=True)
class StepResult:
    """What one step gave.

    Args:
        step: The step.
        outcome: Passed, failed, hung, skipped or interrupted.
        seconds: Its wall time.
        detail: One line: its verdict, or the cause of its failure.
        text: What it printed that the report keeps: the dry run's command, the topology.
        transports: The transports NCCL picked (``P2P``, ``SHM``, ``NET/IB``, ...), read from an ``NCCL_DEBUG=INFO``
            run's log; ``TCP (gloo)`` for CPU ranks.
        log: The file that holds its whole output.
    """

    step: Step
    outcome: Outcome
    seconds: float = 0.0
    detail: str = ""
    text: str = ""
    transports: tuple[str, ...] = ()
    log: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASSED


@dataclass(frozen=True)
class Workaround:
    """One workaround of the troubleshooting table: variables to set for a job, tried one at a time.

    Args:
        variables: What it sets.
        what: What it changes, in a few words.
        instead: What it sets instead where ``instead[0][0]`` is already set: ``NCCL_P2P_LEVEL=LOC`` in place of
            ``NCCL_P2P_DISABLE=1``, which the launcher refuses beside any ``NCCL_P2P_LEVEL``.
    """

    variables: Variables
    what: str
    instead: Variables = ()

    def variables_for(self, environ: Mapping[str, str]) -> Variables | None:
        """The variables to try in ``environ``; None when they are already in effect there (they cannot be the fix)."""
        chosen = self.instead if self.instead and environ.get(self.instead[0][0]) else self.variables
        if all(environ.get(name) == value for name, value in chosen):
            return None
        return chosen


WORKAROUNDS = (
    Workaround((("NCCL_P2P_DISABLE", "1"),), "no direct GPU-to-GPU copies", instead=(("NCCL_P2P_LEVEL", "LOC"),)),
    Workaround((("NCCL_SHM_DISABLE", "1"),), "no shared-memory transport"),
    Workaround((("NCCL_CUMEM_HOST_ENABLE", "0"),), "host buffers without the cuMem API"),
    Workaround((("NCCL_CUMEM_ENABLE", "0"),), "no cuMem allocations"),
    Workaround((("NCCL_IB_DISABLE", "1"),), "no InfiniBand/RoCE"),
    Workaround((("NCCL_ALGO", "Ring"),), "ring algorithm only"),
    Workaround((("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),), "CUDA's device indices in PCI bus order"),
)
"""The multi-GPU troubleshooting page's workarounds, in the order the doctor tries them."""


def describe(variables: Variables) -> str:
    """``NAME=VALUE NAME=VALUE``."""
    return " ".join(f"{name}={value}" for name, value in variables)


PROBE_TIMEOUT_S = 180.0
"""Default seconds a probe may take in all, startup (imports, NCCL's setup) included."""
HANG_TIMEOUT_S = 30.0
"""Default seconds a probe's ranks may make no progress once their process group formed."""
TRAIN_TIMEOUT_S = 600.0
"""Default seconds the single-rank run may take."""


@dataclass(frozen=True)
class DoctorConfig:
    """What the doctor checks, resolved from its command line.

    Args:
        task: Task id of the single-rank run and the dry run.
        library: RL library of both.
        device: ``cpu`` (gloo ranks) or ``cuda`` (NCCL, one GPU per rank).
        world_sizes: The probes' world sizes, 2 up to the maximum; empty with one GPU.
        log_dir: Where each step's output goes.
        iterations: Iterations of the single-rank run.
        num_envs: Its env count; None for the task's default.
        probe_timeout_s: Seconds a probe may run in all, startup included.
        hang_timeout_s: Seconds a probe's ranks may make no progress once their process group formed.
        train_timeout_s: Seconds the single-rank run may take.
        workarounds: Tried in order.
    """

    task: str
    library: str
    device: str
    world_sizes: tuple[int, ...]
    log_dir: str
    iterations: int = 2
    num_envs: int | None = None
    probe_timeout_s: float = PROBE_TIMEOUT_S
    hang_timeout_s: float = HANG_TIMEOUT_S
    train_timeout_s: float = TRAIN_TIMEOUT_S
    workarounds: tuple[Workaround, ...] = field(default=WORKAROUNDS)

    @property
    def backend(self) -> str:
        return "gloo" if self.device == "cpu" else "nccl"
