"""Gymnasium's Pendulum-v1, batched: swing a pendulum up from any angle and hold it upright with a weak motor.

Dynamics, reward and resets are gymnasium's (g = 10, m = l = 1, dt = 0.05 s, |torque| <= 2, |speed| <= 8), the
200-step time limit a truncation. Actions in the contract's [-1, 1] are scaled to the torque limit. The step issues
no host synchronisation and updates its state in place, so rlscale can replay it as one CUDA graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rlscale.tasks.base import Observations, TaskCfg, VecTask

REWARD_TERMS = ("angle", "speed", "torque")
"""Cost terms, each logged as ``Episode_Reward/<term>`` (the episode's sum over ``episode_length_s``)."""


@dataclass(kw_only=True)
class PendulumCfg(TaskCfg):
    """Pendulum-v1's constants; 200 control steps of 0.05 s."""

    sim_dt: float = 0.05
    decimation: int = 1
    episode_length_s: float = 10.0
    gravity: float = 10.0
    mass: float = 1.0
    length: float = 1.0
    max_torque: float = 2.0
    max_speed: float = 8.0


class PendulumSwingup(VecTask):
    """Observations ``[cos theta, sin theta, theta_dot]`` (theta = 0 upright); reward
    ``-(theta^2 + 0.1 theta_dot^2 + 0.001 torque^2)`` before the step, theta wrapped to [-pi, pi)."""

    graph_capturable = True

    def __init__(self, cfg: PendulumCfg):
        self.cfg = cfg
        self.num_envs, self.device = cfg.num_envs, torch.device(cfg.device)
        self.num_actions, self.observation_dims = 1, {"policy": 3}
        self.step_dt = cfg.sim_dt * cfg.decimation
        self.max_episode_length = math.ceil(cfg.episode_length_s / self.step_dt)
        self.generator = torch.Generator(device=self.device).manual_seed(cfg.seed)
        n = self.num_envs
        self._state = torch.zeros(n, 2, device=self.device)  # theta, theta_dot
        self._episode_length_buf = torch.zeros(n, dtype=torch.long, device=self.device)
        self._ep_steps = torch.zeros(n, dtype=torch.long, device=self.device)  # taken, whatever is written above
        self._ep_sums = torch.zeros(n, len(REWARD_TERMS), device=self.device)
        self._log_keys = [f"Episode_Reward/{term}" for term in REWARD_TERMS] + ["Episode_Termination/time_out"]
        self._log_values = torch.zeros(len(self._log_keys), device=self.device)
        self._reset_high = torch.tensor([math.pi, 1.0], device=self.device)
        self.reset()

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self._episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:  # in place: a captured graph keeps reading this buffer
        self._episode_length_buf.copy_(value)

    def reset(self) -> tuple[Observations, dict]:
        self._state.copy_(self._sample_states())
        self._episode_length_buf.zero_()
        self._ep_steps.zero_()
        self._ep_sums.zero_()
        self._log_values.zero_()
        return self.get_observations(), {"log": {}}

    def step(self, actions: torch.Tensor):
        cfg = self.cfg
        torque = actions.to(self.device, torch.float32)[:, 0].clamp(-1.0, 1.0) * cfg.max_torque
        theta, speed = self._state.unbind(1)
        costs = torch.stack((wrap_to_pi(theta).square(), 0.1 * speed.square(), 0.001 * torque.square()), dim=1)
        reward = -costs.sum(dim=1)
        accel = 3.0 * cfg.gravity / (2.0 * cfg.length) * torch.sin(theta) + 3.0 / (cfg.mass * cfg.length**2) * torque
        speed = (speed + accel * self.step_dt).clamp(-cfg.max_speed, cfg.max_speed)
        state = torch.stack((theta + speed * self.step_dt, speed), dim=1)

        self._episode_length_buf += 1
        truncated = self._episode_length_buf >= self.max_episode_length
        terminated = torch.zeros_like(truncated)  # the pendulum never fails, it only runs out of time
        ep_sums = self._ep_sums - costs
        ep_steps = self._ep_steps + 1
        done_f = truncated.float()
        num_done = done_f.sum()
        means = (ep_sums * done_f.unsqueeze(1)).sum(dim=0) / (num_done.clamp(min=1.0) * cfg.episode_length_s)
        log_values = torch.where(num_done > 0, torch.cat((means, num_done.unsqueeze(0))), self._log_values)
        self._log_values.copy_(log_values)
        extras = {
            "log": dict(zip(self._log_keys, log_values.unbind(), strict=True)),
            "episode_return": ep_sums.sum(dim=1),
            "episode_length": ep_steps,
        }
        self._state.copy_(torch.where(truncated.unsqueeze(1), self._sample_states(), state))
        self._episode_length_buf.masked_fill_(truncated, 0)
        self._ep_steps.copy_(ep_steps).masked_fill_(truncated, 0)
        self._ep_sums.copy_(ep_sums).masked_fill_(truncated.unsqueeze(1), 0.0)
        return self.get_observations(), reward, terminated, truncated, extras

    def get_observations(self) -> Observations:
        theta, speed = self._state.unbind(1)
        return {"policy": torch.stack((torch.cos(theta), torch.sin(theta), speed), dim=1)}

    def _sample_states(self) -> torch.Tensor:
        """Fresh states for every env: theta uniform in [-pi, pi], theta_dot in [-1, 1] (gymnasium's reset)."""
        u = torch.rand(self.num_envs, 2, generator=self.generator, device=self.device)
        return (2.0 * u - 1.0) * self._reset_high


def wrap_to_pi(angle: torch.Tensor) -> torch.Tensor:
    return torch.remainder(angle + math.pi, 2.0 * math.pi) - math.pi
