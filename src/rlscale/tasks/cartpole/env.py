"""Isaac Lab's two Cartpole MDPs (``Isaac-Cartpole`` manager-based, ``Isaac-Cartpole-Direct``) in plain PyTorch.

Both share the physics (:mod:`rlscale.tasks.cartpole.physics`), 60 Hz control with two 120 Hz physics steps,
300-step episodes and the force ``F = action_scale * action[:, 0]`` clamped to the 400 N effort limit. They differ
in observation order, reward scaling, terminations and reset distributions (see each class). Step order follows
Isaac Lab: physics x decimation, ``episode_length_buf += 1``, dones, rewards, reset of the done envs, observations.

The step issues no host synchronisation (no ``.item()``, ``nonzero`` or data-dependent Python branches): resets
are masked ``torch.where`` updates that draw fresh reset states for every env each step from the task's own
generator, and episode statistics are masked reductions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated

import torch
from annotated_types import Gt

from rlscale.tasks.base import Observations, TaskCfg, VecTask
from rlscale.tasks.cartpole.physics import CartpoleParams, simulate

REWARD_TERMS = ("alive", "terminating", "pole_pos", "cart_vel", "pole_vel")
"""Reward term names (Isaac Lab's manager-based names), in the column order used internally."""


@dataclass(kw_only=True)
class CartpoleCfg(TaskCfg):
    """Cartpole settings. Defaults are the manager-based task's (``Isaac-Cartpole``)."""

    physics: CartpoleParams = field(default_factory=CartpoleParams)
    """Masses, lengths, joint damping and the effort limit."""
    max_cart_pos: Annotated[float, Gt(0)] = 3.0
    """Cart positions beyond +-this (m) terminate the episode."""
    action_scale: Annotated[float, Gt(0)] = 100.0
    """Force in N per unit action."""
    rew_scale_alive: float = 1.0
    rew_scale_terminated: float = -2.0
    rew_scale_pole_pos: float = -1.0
    rew_scale_cart_vel: float = -0.01
    rew_scale_pole_vel: float = -0.005
    cart_pos_range: tuple[float, float] = (-1.0, 1.0)
    """Uniform reset range of the cart position in m."""
    cart_vel_range: tuple[float, float] = (-0.5, 0.5)
    """Uniform reset range of the cart velocity in m/s."""
    pole_pos_range: tuple[float, float] = (-0.25 * math.pi, 0.25 * math.pi)
    """Uniform reset range of the pole angle in rad (0 = upright)."""
    pole_vel_range: tuple[float, float] = (-0.25 * math.pi, 0.25 * math.pi)
    """Uniform reset range of the pole angular velocity in rad/s."""


@dataclass(kw_only=True)
class CartpoleDirectCfg(CartpoleCfg):
    """``Isaac-Cartpole-Direct`` settings: only the pole angle is randomised at reset, everything else starts at 0."""

    cart_pos_range: tuple[float, float] = (0.0, 0.0)
    cart_vel_range: tuple[float, float] = (0.0, 0.0)
    pole_vel_range: tuple[float, float] = (0.0, 0.0)


class CartpoleBase(VecTask):
    """Shared state, physics, episode bookkeeping and reset logic; subclasses define the MDP.

    Public state: ``state`` (float ``(num_envs, 4)``, ``[x, theta, x_dot, theta_dot]``), ``params``
    (:class:`CartpoleParams`) and ``generator`` (the task's seeded ``torch.Generator``). ``state`` and
    ``episode_length_buf`` are persistent buffers: assigning to them copies into the buffer, and :meth:`step` and
    :meth:`reset` update them in place, so the step can be captured as a CUDA graph (:mod:`rlscale.tasks.graph`).

    ``extras`` returned by :meth:`step` (all tensors on the task's device):

    * ``"log"``: ``"Episode_Reward/<term>"`` for the five reward terms (mean over the envs that ended this step of
      the term's episodic sum, divided by ``episode_length_s``) and ``"Episode_Termination/<term>"`` (number of
      those envs that the term ended; ``time_out`` counts truncations only, so it never overlaps the others), as
      0-d float tensors. Whether any env ended is only known on the device, so the keys are always present; on a
      step where none ended, the values of the last step where some did are repeated (zeros before the first).
      That is what Isaac Lab returns too, since its ``extras["log"]`` persists between resets, and it keeps
      loggers that average these values over steps (rsl_rl) from being diluted by empty steps.
    * ``"episode_return"``: float ``(num_envs,)``, for envs that ended this step the finished episode's undiscounted
      return; for the others their running return so far.
    * ``"episode_length"``: long ``(num_envs,)``, likewise, in control steps actually taken (independent of
      writes to ``episode_length_buf``).
    * ``"done"``: bool ``(num_envs,)``, ``terminated | truncated``.

    :meth:`reset` returns ``{"log": {}}``: a forced reset ends no episode.
    """

    reward_dt_scaled: bool
    """True: every reward term is multiplied by ``step_dt`` (Isaac Lab's RewardManager)."""
    termination_terms: tuple[str, ...]
    """Names of the non-time-out termination terms, in the column order of :meth:`_termination_flags`."""
    time_out_offset: int
    """Time-out when ``episode_length_buf >= max_episode_length - time_out_offset``."""
    graph_capturable = True

    def __init__(self, cfg: CartpoleCfg):
        """Build the batch and reset every environment.

        Args:
            cfg: Task settings; ``cfg.seed`` seeds the task's generator.
        """
        self.cfg = cfg
        self.num_envs = cfg.num_envs
        self.device = torch.device(cfg.device)
        self.num_actions = 1
        self.observation_dims = {"policy": 4}
        self.step_dt = cfg.sim_dt * cfg.decimation
        self.max_episode_length = math.ceil(cfg.episode_length_s / self.step_dt)
        self.is_finite_horizon = False
        self.params = cfg.physics
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(cfg.seed)

        n, dev = self.num_envs, self.device
        ranges = torch.tensor(
            [cfg.cart_pos_range, cfg.pole_pos_range, cfg.cart_vel_range, cfg.pole_vel_range], dtype=torch.float32
        ).to(dev)
        self._reset_low, self._reset_span = ranges[:, 0], ranges[:, 1] - ranges[:, 0]
        weights = torch.tensor(
            [
                cfg.rew_scale_alive,
                cfg.rew_scale_terminated,
                cfg.rew_scale_pole_pos,
                cfg.rew_scale_cart_vel,
                cfg.rew_scale_pole_vel,
            ],
            dtype=torch.float64,
        )
        self._reward_weights = (weights * (self.step_dt if self.reward_dt_scaled else 1.0)).float().to(dev)
        self._log_keys = [f"Episode_Reward/{t}" for t in REWARD_TERMS] + [
            f"Episode_Termination/{t}" for t in ("time_out", *self.termination_terms)
        ]
        self._episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        self._state = torch.zeros(n, 4, device=dev)
        self._ep_steps = torch.zeros(n, dtype=torch.long, device=dev)
        self._ep_sums = torch.zeros(n, len(REWARD_TERMS), device=dev)
        self._log_values = torch.zeros(len(self._log_keys), device=dev)
        self.reset()

    # --- persistent state: always updated in place, so that a captured CUDA graph of step() stays valid ----------

    @property
    def state(self) -> torch.Tensor:
        return self._state

    @state.setter
    def state(self, value: torch.Tensor) -> None:
        self._state.copy_(value)

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self._episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:  # rsl_rl assigns a new tensor (init_at_random_ep_len)
        self._episode_length_buf.copy_(value)

    # --- VecTask interface -------------------------------------------------------------------------------------

    def reset(self) -> tuple[Observations, dict]:
        """Reset every environment (fresh states from the reset ranges, zeroed counters and statistics)."""
        self._state.copy_(self._sample_reset_states())
        self._episode_length_buf.zero_()
        self._ep_steps.zero_()
        self._ep_sums.zero_()
        self._log_values.zero_()
        return self.get_observations(), {"log": {}}

    def step(self, actions: torch.Tensor) -> tuple[Observations, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """Advance one control step and auto-reset the finished envs; see :class:`CartpoleBase` for ``extras``.

        Args:
            actions: Shape ``(num_envs, 1)``, on any device; force = ``action_scale * actions[:, 0]`` (clamped to
                the effort limit, not clipped otherwise).

        Returns:
            ``(observations, reward, terminated, truncated, extras)`` as in :meth:`VecTask.step`; ``reward``,
            ``terminated`` and ``truncated`` have shape ``(num_envs,)``.
        """
        force = actions.to(self.device, torch.float32)[:, 0] * self.cfg.action_scale
        state = simulate(self._state, force, self.cfg.sim_dt, self.cfg.decimation, self.params)
        self._episode_length_buf += 1
        ep_steps = self._ep_steps + 1

        term_flags = self._termination_flags(state)  # (N, K) bool
        terminated = term_flags.any(dim=1)
        time_out = self._episode_length_buf >= self.max_episode_length - self.time_out_offset
        truncated = time_out & ~terminated  # a terminal state is never reported as a time-out
        done = terminated | time_out

        reward_terms = self._reward_terms(state, terminated).mul_(self._reward_weights)  # (N, 5)
        reward = reward_terms.sum(dim=1)
        ep_sums = self._ep_sums + reward_terms

        # Episode statistics as masked reductions (no indexing by done ids, which would need a sync).
        done_f = done.float()
        num_done = done_f.sum()
        ended_sums = (ep_sums * done_f.unsqueeze(1)).sum(dim=0)  # elementwise, not a matmul: no cuBLAS to capture
        reward_means = ended_sums / (num_done.clamp(min=1.0) * self.cfg.episode_length_s)
        term_counts = torch.cat((truncated.unsqueeze(1), term_flags), dim=1).sum(dim=0)
        # A fresh tensor each step: a logger may keep earlier steps' values (rsl_rl averages them per iteration).
        log_values = torch.where(num_done > 0, torch.cat((reward_means, term_counts.float())), self._log_values)
        self._log_values.copy_(log_values)
        extras = {
            "log": dict(zip(self._log_keys, log_values.unbind(), strict=True)),
            "episode_return": ep_sums.sum(dim=1),
            "episode_length": ep_steps,
            "done": done,
        }

        # Masked reset of the done envs only, in place (see the class docstring).
        self._state.copy_(torch.where(done.unsqueeze(1), self._sample_reset_states(), state))
        self._episode_length_buf.masked_fill_(done, 0)
        self._ep_steps.copy_(ep_steps).masked_fill_(done, 0)  # ep_steps itself is returned in extras
        self._ep_sums.copy_(ep_sums).masked_fill_(done.unsqueeze(1), 0.0)
        return self.get_observations(), reward, terminated, truncated, extras

    def get_observations(self) -> Observations:
        """Observation group ``policy`` of shape ``(num_envs, 4)`` (a copy; ordering per subclass)."""
        return {"policy": self._policy_obs(self.state)}

    # --- helpers and MDP hooks ---------------------------------------------------------------------------------

    def _sample_reset_states(self) -> torch.Tensor:
        """Fresh states drawn from the reset ranges for every env, shape ``(num_envs, 4)``."""
        u = torch.rand(self.num_envs, 4, generator=self.generator, device=self.device)
        return torch.addcmul(self._reset_low, u, self._reset_span)

    def _termination_flags(self, state: torch.Tensor) -> torch.Tensor:
        """Non-time-out termination terms, bool of shape ``(num_envs, len(termination_terms))``."""
        raise NotImplementedError

    def _reward_terms(self, state: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
        """Unweighted reward terms in :data:`REWARD_TERMS` order, float of shape ``(num_envs, 5)`` (a new tensor)."""
        raise NotImplementedError

    def _policy_obs(self, state: torch.Tensor) -> torch.Tensor:
        """Policy observation, shape ``(num_envs, 4)``, not aliasing ``state``."""
        raise NotImplementedError


def wrap_to_pi(angle: torch.Tensor) -> torch.Tensor:
    """Wrap angles to ``[-pi, pi)`` (Isaac Lab uses ``(-pi, pi]``; the difference vanishes once squared)."""
    return torch.remainder(angle + math.pi, 2.0 * math.pi) - math.pi


class ManagerCartpole(CartpoleBase):
    """``Isaac-Cartpole`` (manager-based workflow).

    Observations ``[cart_pos, pole_pos, cart_vel, pole_vel]`` (joint positions then velocities, relative to the
    zero defaults, pole angle unwrapped). Rewards: alive (not terminated) +1, terminating -2, pole_pos
    -wrap_to_pi(theta)^2, cart_vel -0.01 |x_dot|, pole_vel -0.005 |theta_dot|, each times ``step_dt``. Terminations:
    ``cart_out_of_bounds`` (|x| > max_cart_pos); time-out at ``episode_length_buf >= max_episode_length``.
    """

    reward_dt_scaled = True
    termination_terms = ("cart_out_of_bounds",)
    time_out_offset = 0

    def _termination_flags(self, state: torch.Tensor) -> torch.Tensor:
        return state[:, :1].abs() > self.cfg.max_cart_pos

    def _reward_terms(self, state: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
        term = terminated.float().unsqueeze(1)
        pole_sq = wrap_to_pi(state[:, 1:2]).square()
        return torch.cat((1.0 - term, term, pole_sq, state[:, 2:].abs()), dim=1)

    def _policy_obs(self, state: torch.Tensor) -> torch.Tensor:
        return state.clone()


class DirectCartpole(CartpoleBase):
    """``Isaac-Cartpole-Direct`` (direct workflow).

    Observations ``[pole_pos, pole_vel, cart_pos, cart_vel]``. Same five reward terms and weights, not scaled by
    ``step_dt``; alive = 1 - terminated; pole term uses the raw theta^2. Terminations: ``cart_out_of_bounds``
    (|x| > max_cart_pos) and ``pole_out_of_bounds`` (|theta| > pi/2); time-out at
    ``episode_length_buf >= max_episode_length - 1`` (so episodes last 299 steps, as in Isaac Lab).
    """

    reward_dt_scaled = False
    termination_terms = ("cart_out_of_bounds", "pole_out_of_bounds")
    time_out_offset = 1

    def __init__(self, cfg: CartpoleCfg):
        # Created before the base __init__, which calls reset() and thus get_observations().
        self._obs_index = torch.tensor([1, 3, 0, 2], device=cfg.device)
        self._bounds = torch.tensor([cfg.max_cart_pos, 0.5 * math.pi], device=cfg.device)
        super().__init__(cfg)

    def _termination_flags(self, state: torch.Tensor) -> torch.Tensor:
        return state[:, :2].abs() > self._bounds

    def _reward_terms(self, state: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
        term = terminated.float().unsqueeze(1)
        return torch.cat((1.0 - term, term, state[:, 1:2].square(), state[:, 2:].abs()), dim=1)

    def _policy_obs(self, state: torch.Tensor) -> torch.Tensor:
        # A device-resident index tensor: indexing with a Python list would copy it host-to-device every call.
        return state.index_select(1, self._obs_index)
