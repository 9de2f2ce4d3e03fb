"""``Rlscale-Ant``: the quadruped of :mod:`rlscale.tasks.ant.model` learning to run forward (+x), on MuJoCo Warp.

The MDP follows Isaac Lab's locomotion tasks; ``docs/tasks.md`` has the observation table and the reward weights. The
same terms in JAX step it on MJX (:mod:`rlscale.tasks.ant.mjx_env`, ``physics=mjx``).
"""

from __future__ import annotations

import torch

from rlscale.tasks.ant.model import AntMdp
from rlscale.tasks.mjwarp.backend import Physics, TaskState, WarpVecTask
from rlscale.tasks.mjwarp.rotations import quat_rotate_inverse


class AntTask(AntMdp, WarpVecTask):
    """Observations (34): torso height, body-frame linear and angular velocity, projected gravity, joint positions
    (relative to the default pose) and velocities, last action. Actions (8): motor commands."""

    def _read_model(self) -> None:
        self._qpos0 = torch.as_tensor(self.mj_model.qpos0, dtype=torch.float32, device=self.device)
        self._gravity = torch.tensor([0.0, 0.0, -1.0], device=self.device)

    def _sample_reset(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        nj = self.mj_model.nu
        qpos = self._qpos0.repeat(n, 1)
        qpos[:, 7:] += self.uniform((-1.0, 1.0), (n, nj)) * self.cfg.joint_pos_noise
        qvel = torch.zeros(n, self.mj_model.nv, device=self.device)
        qvel[:, 6:] = self.uniform((-1.0, 1.0), (n, nj)) * self.cfg.joint_vel_noise
        return qpos, qvel

    def _control(self, action: torch.Tensor) -> torch.Tensor:
        return torch.clamp(action * self.cfg.action_scale, -1.0, 1.0)

    def _projected_gravity(self, physics: Physics) -> torch.Tensor:
        return quat_rotate_inverse(physics.qpos[:, 3:7], self._gravity.expand(self.num_envs, 3))

    def _observe(self, physics: Physics, task_state: TaskState, last_action: torch.Tensor) -> torch.Tensor:
        quat = physics.qpos[:, 3:7]
        return torch.cat(
            (
                physics.qpos[:, 2:3],
                quat_rotate_inverse(quat, physics.qvel[:, :3]),  # a free joint's linear velocity is in the world frame
                physics.qvel[:, 3:6],  # and its angular velocity in the body frame
                self._projected_gravity(physics),
                physics.qpos[:, 7:] - self._qpos0[7:],
                physics.qvel[:, 6:],
                last_action,
            ),
            dim=1,
        )

    def _termination_flags(self, physics: Physics, task_state: TaskState) -> torch.Tensor:
        up_z = self._projected_gravity(physics)[:, 2]
        return torch.stack((physics.qpos[:, 2] < self.cfg.termination_height, up_z > 0.0), dim=1)

    def _reward_values(self, physics, task_state, action, last_action, terminated) -> torch.Tensor:
        speed_error = physics.qvel[:, 0] - self.cfg.target_speed
        term = terminated.float()
        return torch.stack(
            (
                torch.exp(-speed_error.square() / self.cfg.tracking_sigma),
                1.0 - term,
                term,
                (physics.qfrc_actuator[:, 6:] * physics.qvel[:, 6:]).abs().sum(dim=1),
                (action - last_action).square().sum(dim=1),
            ),
            dim=1,
        )

    def _episode_metrics(self, physics: Physics, task_state: TaskState, episode_steps: torch.Tensor) -> torch.Tensor:
        # Resets start the torso at x = 0, so the final x over the episode's duration is its mean forward speed (m/s).
        return (physics.qpos[:, 0] / (episode_steps * self.step_dt))[:, None]
