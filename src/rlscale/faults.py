"""``RLSCALE_INJECT_FAULT``: make one rank crash or hang at one training iteration, for failure-path tests.

Format: ``crash:rank=1,iteration=3`` or ``hang:rank=1,iteration=3``. Unset (the normal case), nothing happens.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

ENV_VAR = "RLSCALE_INJECT_FAULT"
KINDS = ("crash", "hang")


class InjectedCrash(RuntimeError):
    """The failure raised by a ``crash`` fault."""


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int
    iteration: int

    def trigger_if_due(self, rank: int, iteration: int) -> None:
        """Raise or block when this rank reaches the fault's iteration."""
        if (rank, iteration) != (self.rank, self.iteration):
            return
        if self.kind == "crash":
            raise InjectedCrash(f"injected crash on rank {rank} at iteration {iteration}")
        while True:  # a hang: block without returning, as a rank stuck in a native call would
            time.sleep(3600)


def parse_fault(spec: str) -> Fault:
    """Parse ``kind:rank=R,iteration=I``.

    Raises:
        ValueError: for any other form.
    """
    kind, _, fields = spec.partition(":")
    try:
        values = dict(field.split("=", 1) for field in fields.split(","))
        fault = Fault(kind, int(values.pop("rank")), int(values.pop("iteration")))
    except (KeyError, ValueError):
        raise ValueError(f"{ENV_VAR}={spec!r}: expected e.g. crash:rank=1,iteration=3") from None
    if kind not in KINDS or values or fault.rank < 0 or fault.iteration < 0:
        raise ValueError(f"{ENV_VAR}={spec!r}: kind is one of {', '.join(KINDS)}, with only rank and iteration >= 0")
    return fault


def fault_from_environment() -> Fault | None:
    spec = os.environ.get(ENV_VAR)
    return parse_fault(spec) if spec else None
