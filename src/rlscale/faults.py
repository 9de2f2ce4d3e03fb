"""``RLSCALE_INJECT_FAULT``: make one rank crash, hang or slow down at training iterations, for failure-path tests.

Format: ``KIND:rank=R,iteration=I`` with KIND ``crash`` (raise), ``hang`` (block forever) or ``desync`` (nudge this
rank's policy parameters off the others', as a lost broadcast would), or
``stall:rank=R,iteration=I,seconds=S``: work S seconds longer while still heartbeating, a slow but live rank that the
hang watchdog must not mistake for a hung one, or ``delay:rank=R,seconds=S``: work S seconds longer at every
iteration (from ``iteration=I`` on, if given), a straggler that the others wait for in each update's collectives.
Unset, nothing happens.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlscale.heartbeat import renew

if TYPE_CHECKING:
    from rlscale.rl.common import PolicyParameters

ENV_VAR = "RLSCALE_INJECT_FAULT"
KINDS = ("crash", "hang", "desync", "stall", "delay")
TIMED_KINDS = ("stall", "delay")
"""The kinds that take ``seconds``."""


class InjectedCrash(RuntimeError):
    """The failure raised by a ``crash`` fault."""


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int
    iteration: int
    seconds: float = 0.0
    """How long a ``stall`` or each ``delay`` lasts."""

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
        while True:  # a hang: block without returning, as a rank stuck in a native call would
            time.sleep(3600)


def parse_fault(spec: str) -> Fault:
    """Parse ``kind:rank=R,iteration=I`` (``stall`` also takes ``,seconds=S``; ``delay`` takes ``rank=R,seconds=S``
    and an optional ``iteration``, 0 by default).

    Raises:
        ValueError: for any other form.
    """
    kind, _, fields = spec.partition(":")
    try:
        values = dict(field.split("=", 1) for field in fields.split(","))
        seconds = values.pop("seconds", None)
        iteration = values.pop("iteration", "0" if kind == "delay" else None)
        fault = Fault(kind, int(values.pop("rank")), int(iteration), float(seconds or 0))
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{ENV_VAR}={spec!r}: expected e.g. crash:rank=1,iteration=3") from None
    seconds_ok = (kind in TIMED_KINDS) == (seconds is not None) and 0 <= fault.seconds < float("inf")
    if kind not in KINDS or values or fault.rank < 0 or fault.iteration < 0 or not seconds_ok:
        raise ValueError(
            f"{ENV_VAR}={spec!r}: kind is one of {', '.join(KINDS)}, with only rank and iteration >= 0 "
            "(and seconds >= 0 for stall and delay, e.g. stall:rank=1,iteration=3,seconds=8 or "
            "delay:rank=1,seconds=0.5)"
        )
    return fault


def fault_from_environment(world_size: int | None = None) -> Fault | None:
    """The fault ``$RLSCALE_INJECT_FAULT`` asks for, or None.

    Raises:
        ValueError: for a malformed spec, or one naming a rank outside a job of ``world_size`` ranks (it would never
            fire).
    """
    spec = os.environ.get(ENV_VAR)
    fault = parse_fault(spec) if spec else None
    if fault is not None and world_size is not None and fault.rank >= world_size:
        raise ValueError(
            f"{ENV_VAR}={spec!r}: rank {fault.rank} does not exist in a job of {world_size} rank(s); "
            f"name a rank in 0..{world_size - 1}"
        )
    return fault
