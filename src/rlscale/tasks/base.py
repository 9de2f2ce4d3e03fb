"""The contract between a task and everything above it (adapters, benchmarks, launcher).

A task is a batch of ``num_envs`` independent environments stepped together on one torch device, following Isaac
Lab's ``DirectRLEnv``/``ManagerBasedRLEnv`` conventions: observation groups, auto-reset inside :meth:`step`,
``terminated`` kept apart from ``truncated`` (time-outs), and per-episode statistics in ``extras["log"]``.
Tasks import no RL library.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Annotated

import torch
from annotated_types import Ge, Gt


@dataclass(kw_only=True)
class TaskCfg:
    """Settings every task shares; a task subclasses this with its own fields."""

    num_envs: Annotated[int, Ge(1)] = 4096
    """Number of environments stepped in one batch."""
    seed: Annotated[int, Ge(0)] = 42
    """Seed of the task's own ``torch.Generator`` (resets and any randomisation)."""
    device: str = "cpu"
    """Torch device holding all state."""
    sim_dt: Annotated[float, Gt(0)] = 1.0 / 120.0
    """Physics step in seconds."""
    decimation: Annotated[int, Ge(1)] = 2
    """Physics steps per environment (control) step."""
    episode_length_s: Annotated[float, Gt(0)] = 5.0
    """Episode duration; ``max_episode_length = ceil(episode_length_s / (sim_dt * decimation))``."""


Observations = dict[str, torch.Tensor]
"""Observation groups: ``"policy"`` always, ``"critic"`` when the task has privileged observations.
Each tensor has shape ``(num_envs, group_dim)``."""


class VecTask(ABC):
    """A batched environment. Subclasses set the attributes below in ``__init__``."""

    cfg: TaskCfg
    num_envs: int
    device: torch.device
    num_actions: int
    """Action dimension; actions have shape ``(num_envs, num_actions)`` and nominal range [-1, 1]."""
    observation_dims: dict[str, int]
    """Dimension of each observation group."""
    max_episode_length: int
    """Control steps after which an episode is truncated."""
    step_dt: float
    """Control period in seconds (``sim_dt * decimation``)."""
    episode_length_buf: torch.Tensor
    """Control steps taken in the current episode, shape ``(num_envs,)``, dtype long. Writable: trainers may
    randomise it at the start (rsl_rl's ``init_at_random_ep_len``)."""
    is_finite_horizon: bool = False
    """False: time-outs are truncations, and trainers should bootstrap the value at them."""
    graph_capturable: bool = False
    """True when :meth:`step` can be captured as one CUDA graph and replayed: it issues no host synchronisation,
    updates its persistent tensors in place, draws random numbers from ``self.generator`` only, and returns tensors
    whose shapes never change (see :mod:`rlscale.tasks.graph`)."""
    bitwise_repeatable: bool = True
    """False when the same seed can step another trajectory on this device: a physics engine that accumulates with
    atomic operations (MuJoCo Warp on CUDA). ``check_task`` then compares no two builds' trajectories there."""
    compile_s: float | None = None
    """Seconds the constructor spent compiling the step (JIT backends such as MJX); None for a task that compiles
    nothing. Benchmarks report it as its own startup phase."""
    compiled_kernels: int | None = None
    """Kernel modules the constructor compiled into its engine's persistent kernel cache: 0 when every one came from
    the cache (a warm start), None for a task without such a cache. The startup benchmark reports it."""

    @abstractmethod
    def reset(self) -> tuple[Observations, dict]:
        """Reset every environment and return ``(observations, extras)``."""

    @abstractmethod
    def step(self, actions: torch.Tensor) -> tuple[Observations, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """Advance all environments by one control step.

        Args:
            actions: Shape ``(num_envs, num_actions)``, on any device.

        Returns:
            ``(observations, reward, terminated, truncated, extras)``. ``reward`` is float of shape ``(num_envs,)``;
            ``terminated`` and ``truncated`` are bool of shape ``(num_envs,)`` and never both true for one env.
            Environments that finished are already reset, so ``observations`` are the first of their new episode.
            ``extras`` holds, computed on the device without a host sync:

            * ``"log"``: metric name → 0-d tensor over the episodes that ended in this step (Isaac Lab's
              ``Episode_Reward/<term>`` and ``Episode_Termination/<term>``). The keys are always present; on a step
              where no episode ended the values repeat the last ones, as Isaac Lab's do.
            * ``"episode_return"``, ``"episode_length"``: shape ``(num_envs,)``, the finished episode's total
              reward and length for the envs that ended in this step (running values elsewhere).
        """

    @abstractmethod
    def get_observations(self) -> Observations:
        """Observations of the current state, without stepping."""

    def close(self) -> None:  # noqa: B027  an optional hook: most tasks hold nothing to release
        """Release resources (nothing by default)."""

    def check_physics(self) -> None:  # noqa: B027  an optional hook: most tasks have nothing to check
        """Raise, in one line, if the simulation went wrong since the task was built (a physics buffer that
        overflowed). Trainers call it once per iteration: it may read from the device."""
