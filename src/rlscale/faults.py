"""``RLSCALE_INJECT_FAULT``: make one rank crash, hang or slow down at training iterations, for failure-path tests.

Format: ``KIND:rank=R,iteration=I`` with KIND ``crash`` (raise), ``hang`` (block forever) or ``desync`` (nudge this
rank's policy parameters off the others', as a lost broadcast would), or
``stall:rank=R,iteration=I,seconds=S``: work S seconds longer while still heartbeating, a slow but live rank that the
hang watchdog must not mistake for a hung one, or ``delay:rank=R,seconds=S``: work S seconds longer at every
iteration (from ``iteration=I`` on, if given), a straggler that the others wait for in each update's collectives.
``probe_hang:world_size=W[,unless=NAME[=VALUE]][,rank=R]`` is ``nccl_probe``'s instead (:class:`ProbeFault`): its
ranks block before the all-reduce in a job of W ranks, unless the environment sets NAME, as a transport that hangs
until one NCCL variable is set would. Training ignores it. Unset, nothing happens.

A training fault fires in every attempt of torchrun's worker group, unless ``attempt=A`` names one: A counts torchrun's
restarts (``TORCHELASTIC_RESTART_COUNT``), so ``crash:rank=1,iteration=3,attempt=0`` crashes the first attempt only and
lets the group that ``--max_restarts`` starts after it run on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlscale.dist import worker_attempt
from rlscale.heartbeat import renew

if TYPE_CHECKING:
    from rlscale.rl.common import PolicyParameters

ENV_VAR = "RLSCALE_INJECT_FAULT"
KINDS = ("crash", "hang", "desync", "stall", "delay")
TIMED_KINDS = ("stall", "delay")
"""The kinds that take ``seconds``."""
PROBE_KINDS = ("probe_hang",)
"""The kinds that ``nccl_probe``'s ranks act on (:class:`ProbeFault`), and training ignores."""


class InjectedCrash(RuntimeError):
    """The failure raised by a ``crash`` fault."""


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int
    iteration: int
    seconds: float = 0.0
    """How long a ``stall`` or each ``delay`` lasts."""
    attempt: int | None = None
    """The attempt of torchrun's worker group it fires in (:class:`rlscale.dist.Attempt`); None: every attempt."""

    def trigger_if_due(self, rank: int, iteration: int, parameters: PolicyParameters | None = None) -> None:
        """Raise, block, stall or nudge ``parameters`` when this rank reaches the fault's iteration (a ``delay``: at
        every iteration from it on)."""
        due = iteration >= self.iteration if self.kind == "delay" else iteration == self.iteration
        if rank != self.rank or not due:
            return
        if self.kind in TIMED_KINDS:
            deadline = time.monotonic() + self.seconds
            while (left := deadline - time.monotonic()) > 0:
                time.sleep(min(1.0, left))
                renew()  # still in the same phase, but alive: what a long step that reports progress looks like
            return
        if self.kind == "crash":
            raise InjectedCrash(f"injected crash on rank {rank} at iteration {iteration}")
        if self.kind == "desync":
            parameters.nudge(1e-3)
            return
        _block_forever()


def _block_forever() -> None:
    while True:  # a hang: block without returning, as a rank stuck in a native call would
        time.sleep(3600)


@dataclass(frozen=True)
class ProbeFault:
    """``probe_hang``: a probe's ranks (or only ``rank``) block before the all-reduce in a job of ``world_size`` ranks,
    unless the environment sets ``unless``: ``NAME`` (set, to anything but empty or ``0``) or ``NAME=VALUE``."""

    world_size: int
    unless: str | None = None
    rank: int | None = None

    def excused(self, environ: Mapping[str, str]) -> bool:
        """Whether the environment holds the variable that keeps the fault from firing."""
        if self.unless is None:
            return False
        name, sep, value = self.unless.partition("=")
        given = environ.get(name)
        return given == value if sep else given not in (None, "", "0")

    def trigger_if_due(self, rank: int, world_size: int, environ: Mapping[str, str] | None = None) -> None:
        """Block forever on the named rank (every rank without one) of a job of the fault's world size, unless
        excused."""
        environ = os.environ if environ is None else environ
        if world_size != self.world_size or (self.rank is not None and rank != self.rank) or self.excused(environ):
            return
        _block_forever()


def parse_probe_fault(spec: str) -> ProbeFault:
    """Parse ``probe_hang:world_size=W[,unless=NAME[=VALUE]][,rank=R]``.

    Raises:
        ValueError: for any other form.
    """
    kind, _, fields = spec.partition(":")
    usage = (
        f"{ENV_VAR}={spec!r}: expected probe_hang:world_size=W with W >= 2, optionally ,unless=NAME or "
        "unless=NAME=VALUE (the variable that keeps it from firing) and ,rank=R; e.g. "
        "probe_hang:world_size=3,unless=NCCL_P2P_DISABLE"
    )
    try:
        values = dict(field.split("=", 1) for field in fields.split(","))
        rank = values.pop("rank", None)
        fault = ProbeFault(
            int(values.pop("world_size")), values.pop("unless", None), None if rank is None else int(rank)
        )
    except (KeyError, TypeError, ValueError):
        raise ValueError(usage) from None
    unless_ok = fault.unless is None or bool(fault.unless.partition("=")[0])
    rank_ok = fault.rank is None or 0 <= fault.rank < fault.world_size
    if kind not in PROBE_KINDS or values or fault.world_size < 2 or not unless_ok or not rank_ok:
        raise ValueError(usage)
    return fault


def _probe_kind(spec: str) -> bool:
    return spec.partition(":")[0] in PROBE_KINDS


def parse_fault(spec: str) -> Fault:
    """Parse ``kind:rank=R,iteration=I`` (``stall`` also takes ``,seconds=S``; ``delay`` takes ``rank=R,seconds=S``
    and an optional ``iteration``, 0 by default); any kind takes an optional ``,attempt=A``.

    Raises:
        ValueError: for any other form.
    """
    kind, _, fields = spec.partition(":")
    try:
        values = dict(field.split("=", 1) for field in fields.split(","))
        seconds = values.pop("seconds", None)
        iteration = values.pop("iteration", "0" if kind == "delay" else None)
        attempt = values.pop("attempt", None)
        attempt = None if attempt is None else int(attempt)
        fault = Fault(kind, int(values.pop("rank")), int(iteration), float(seconds or 0), attempt)
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{ENV_VAR}={spec!r}: expected e.g. crash:rank=1,iteration=3") from None
    seconds_ok = (kind in TIMED_KINDS) == (seconds is not None) and 0 <= fault.seconds < float("inf")
    attempt_ok = fault.attempt is None or fault.attempt >= 0
    if kind not in KINDS or values or fault.rank < 0 or fault.iteration < 0 or not seconds_ok or not attempt_ok:
        raise ValueError(
            f"{ENV_VAR}={spec!r}: kind is one of {', '.join(KINDS)}, with only rank and iteration >= 0 "
            "(and seconds >= 0 for stall and delay, e.g. stall:rank=1,iteration=3,seconds=8 or "
            "delay:rank=1,seconds=0.5; attempt >= 0 to fire in that attempt of torchrun's workers only)"
        )
    return fault


def fault_from_environment(world_size: int | None = None) -> Fault | None:
    """The training fault ``$RLSCALE_INJECT_FAULT`` asks for in this attempt of the worker group, or None (also for a
    probe's, or one of another attempt, checked all the same).

    Raises:
        ValueError: for a malformed spec, or one naming a rank outside a job of ``world_size`` ranks (it would never
            fire).
    """
    spec = os.environ.get(ENV_VAR)
    if spec and _probe_kind(spec):
        parse_probe_fault(spec)  # nccl_probe's: checked, and ignored by training
        return None
    fault = parse_fault(spec) if spec else None
    if fault is not None and world_size is not None and fault.rank >= world_size:
        raise ValueError(
            f"{ENV_VAR}={spec!r}: rank {fault.rank} does not exist in a job of {world_size} rank(s); "
            f"name a rank in 0..{world_size - 1}"
        )
    if fault is not None and fault.attempt not in (None, worker_attempt().number):
        return None
    return fault


def probe_fault_from_environment(environ: Mapping[str, str] | None = None) -> ProbeFault | None:
    """The probe fault ``$RLSCALE_INJECT_FAULT`` asks for; None when it is unset or names a training fault.

    Raises:
        ValueError: for a malformed ``probe_hang`` spec.
    """
    spec = (os.environ if environ is None else environ).get(ENV_VAR)
    return parse_probe_fault(spec) if spec and _probe_kind(spec) else None
