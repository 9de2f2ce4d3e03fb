"""rlscale's tasks as skrl 2.1.1 environments, torch and JAX: the wrappers the skrl adapter (:mod:`rlscale.rl.skrl`)
hands skrl's Runner. skrl itself is imported inside them, so importing this module creates no process group.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import torch

from rlscale.tasks.base import VecTask


def _spaces(task: VecTask):
    def box(dim: int) -> gymnasium.spaces.Box:
        return gymnasium.spaces.Box(-np.inf, np.inf, (dim,), np.float32)

    critic_dim = task.observation_dims.get("critic")
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (task.num_actions,), np.float32)
    return box(task.observation_dims["policy"]), box(critic_dim) if critic_dim else None, action_space


class _RolloutEndLog:
    """Passes the task's ``extras["log"]`` to skrl on the last step of each rollout only.

    skrl's trainer calls ``.item()`` on every log value at every step it is given them (``environment_info: log``),
    a host sync per value per step that stalls the GPU pipeline. The values only change when episodes end and repeat
    otherwise, so one sample per rollout logs the same information.
    """

    def __init__(self, rollouts: int) -> None:
        self.rollouts, self.steps = rollouts, 0

    def info(self, extras: dict) -> dict:
        self.steps += 1
        return {"log": extras.get("log", {})} if self.steps % self.rollouts == 0 else {}


def torch_env(task: VecTask, rollouts: int):
    from skrl.envs.wrappers.torch import Wrapper

    class SkrlTorchEnv(Wrapper):
        """skrl's torch env contract, as its ``IsaacLabWrapper``: reset once, then rely on the task's auto-reset."""

        def __init__(self) -> None:
            super().__init__(task)
            self._obs_space, self._state_space, self._act_space = _spaces(task)
            self._observations: dict[str, torch.Tensor] | None = None
            self._log = _RolloutEndLog(rollouts)

        observation_space = property(lambda self: self._obs_space)
        state_space = property(lambda self: self._state_space)
        action_space = property(lambda self: self._act_space)

        def agent_inputs(self, observations: dict[str, torch.Tensor]):
            """The task's observation groups as skrl's agent takes them: ``(observations, states)``."""
            return observations["policy"], observations.get("critic")

        def task_actions(self, actions: torch.Tensor) -> torch.Tensor:
            """skrl's actions as the task takes them."""
            return actions

        def reset(self):
            if self._observations is None:
                self._observations, _ = task.reset()
            return self._observations["policy"], {}

        def step(self, actions):
            self._observations, reward, terminated, truncated, extras = task.step(self.task_actions(actions))
            info = self._log.info(extras)
            return self._observations["policy"], reward.view(-1, 1), terminated.view(-1, 1), truncated.view(-1, 1), info

        def state(self):
            return None if self._observations is None else self._observations.get("critic")

        def render(self, *args, **kwargs):
            return None

        def close(self) -> None:
            task.close()

    return SkrlTorchEnv()


def jax_env(task: VecTask, rollouts: int):
    import jax
    from skrl import config
    from skrl.envs.wrappers.jax import Wrapper

    if not config.jax.is_distributed:  # distributed, skrl pins JAX to the rank's local device itself
        config.jax.device = "cpu" if task.device.type == "cpu" else f"cuda:{task.device.index or 0}"
    # JAX on the CPU cannot import a CUDA buffer through DLPack; skrl's own Isaac Lab wrapper copies to host then.
    host_copy = jax.devices()[0].platform == "cpu" and task.device.type != "cpu"

    def to_jax(tensor: torch.Tensor):
        tensor = tensor.contiguous()
        return jax.dlpack.from_dlpack(tensor.cpu() if host_copy else tensor)

    class SkrlJaxEnv(Wrapper):
        """skrl's JAX env contract; tensors cross between torch and JAX through DLPack, without a copy on one
        device. ``terminated``/``truncated`` are int8, the dtype of skrl's JAX PPO memory."""

        def __init__(self) -> None:
            super().__init__(task)
            self._device = config.jax.device if config.jax.is_distributed else jax.devices()[0]
            self._obs_space, self._state_space, self._act_space = _spaces(task)
            self._observations = None
            self._log = _RolloutEndLog(rollouts)

        observation_space = property(lambda self: self._obs_space)
        state_space = property(lambda self: self._state_space)
        action_space = property(lambda self: self._act_space)

        def agent_inputs(self, observations: dict[str, torch.Tensor]):
            """The task's observation groups as skrl's agent takes them: ``(observations, states)``, JAX arrays."""
            critic = observations.get("critic")
            return to_jax(observations["policy"]), None if critic is None else to_jax(critic)

        def task_actions(self, actions) -> torch.Tensor:
            """skrl's actions (a JAX array) as the task takes them: a torch tensor on its device."""
            return torch.from_dlpack(actions).to(task.device)

        def reset(self):
            if self._observations is None:
                self._observations, _ = task.reset()
            return to_jax(self._observations["policy"]), {}

        def step(self, actions):
            self._observations, reward, terminated, truncated, extras = task.step(self.task_actions(actions))
            return (
                to_jax(self._observations["policy"]),
                to_jax(reward.view(-1, 1)),
                to_jax(terminated.view(-1, 1).to(torch.int8)),
                to_jax(truncated.view(-1, 1).to(torch.int8)),
                self._log.info(extras),
            )

        def state(self):
            critic = None if self._observations is None else self._observations.get("critic")
            return None if critic is None else to_jax(critic)

        def render(self, *args, **kwargs):
            return None

        def close(self) -> None:
            task.close()

    return SkrlJaxEnv()
