"""One line, not a traceback, for a task that does not fit its device or whose physics outgrew its buffers: what
``rlscale train`` and the benchmarks wrap their run in. torch-free until it catches something."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def one_line_if_the_task_does_not_fit(command: str) -> Iterator[None]:
    """Turn a task too large for its device (:class:`rlscale.tasks.graph.TaskDoesNotFit`) into one line on stderr and
    exit code 2, like any other bad value; and a run whose physics outgrew its buffers
    (:class:`rlscale.tasks.physics.PhysicsCapacityError`, its manifest already marked crashed) into one line and
    exit code 1."""
    from rlscale.tasks.graph import TaskDoesNotFit
    from rlscale.tasks.physics import PhysicsCapacityError

    try:
        yield
    except TaskDoesNotFit as error:
        print(f"{command}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    except PhysicsCapacityError as error:
        raise SystemExit(f"{command}: error: {error}") from None
