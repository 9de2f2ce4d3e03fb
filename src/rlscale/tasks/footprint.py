"""What one env of a task keeps on its device, as the task states it before it is built: the sizes a run's memory is
estimated from (:mod:`rlscale.run.memory_fit`), so that an env count the device cannot hold is refused before
anything is built or written.

Torch-free. A task registers its footprint, or a function of its config that derives it (``register_task(...,
footprint=...)``); ``rlscale check_task`` holds the stated sizes to the built task's.
"""

from __future__ import annotations

from dataclasses import dataclass

VALUE_BYTES = 4
"""Bytes of one observation, action or reward value: float32."""


@dataclass(frozen=True)
class EnvFootprint:
    """One env's sizes on its device.

    Args:
        observations: Values of one env's observations, every group's (``sum(observation_dims.values())``).
        actions: Values of one env's action (``num_actions``).
        state_bytes: Bytes of the task's own buffers per env besides its observations and actions: physics state,
            episode bookkeeping, one step's temporaries. 0: the task states none, and only its observations and
            actions are counted.
    """

    observations: int
    actions: int
    state_bytes: int = 0

    @property
    def task_bytes(self) -> int:
        """Bytes the task itself keeps per env."""
        return self.state_bytes + (self.observations + self.actions) * VALUE_BYTES
