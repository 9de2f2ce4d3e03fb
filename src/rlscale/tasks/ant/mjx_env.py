"""``Rlscale-Ant``: the quadruped of :mod:`rlscale.tasks.ant.model` learning to run forward (+x), on MJX
(``physics=mjx``).

The MDP follows Isaac Lab's locomotion tasks; ``docs/tasks.md`` has the observation table and the reward weights.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from mujoco import mjx

from rlscale.tasks.ant.model import AntMdp
from rlscale.tasks.mjx.backend import MjxVecTask, TaskState, quat_rotate_inverse

GRAVITY_DIR = np.array([0.0, 0.0, -1.0], np.float32)  # numpy: a JAX array here would start JAX on its default device


class AntTask(AntMdp, MjxVecTask):
    """Observations (34): torso height, body-frame linear and angular velocity, projected gravity, joint positions
    (relative to the default pose) and velocities, last action. Actions (8): motor commands."""

    def _sample_reset(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        pos_key, vel_key = jax.random.split(key)
        nj = self.mj_model.nu
        joint_noise = jax.random.uniform(pos_key, (nj,), minval=-1.0, maxval=1.0) * self.cfg.joint_pos_noise
        qpos = jnp.asarray(self.mj_model.qpos0, jnp.float32).at[7:].add(joint_noise)
        joint_vel = jax.random.uniform(vel_key, (nj,), minval=-1.0, maxval=1.0) * self.cfg.joint_vel_noise
        return qpos, jnp.zeros(self.mj_model.nv, jnp.float32).at[6:].set(joint_vel)

    def _control(self, action: jax.Array) -> jax.Array:
        return jnp.clip(action * self.cfg.action_scale, -1.0, 1.0)

    def _observe(self, data: mjx.Data, task_state: TaskState, last_action: jax.Array, key: jax.Array) -> jax.Array:
        quat = data.qpos[3:7]
        return jnp.concatenate(
            (
                data.qpos[2:3],
                quat_rotate_inverse(quat, data.qvel[:3]),  # a free joint's linear velocity is in the world frame
                data.qvel[3:6],  # and its angular velocity in the body frame
                quat_rotate_inverse(quat, GRAVITY_DIR),
                data.qpos[7:] - self.mj_model.qpos0[7:],
                data.qvel[6:],
                last_action,
            )
        )

    def _termination_flags(self, data: mjx.Data, task_state: TaskState) -> jax.Array:
        up_z = quat_rotate_inverse(data.qpos[3:7], GRAVITY_DIR)[2]
        return jnp.stack((data.qpos[2] < self.cfg.termination_height, up_z > 0.0))

    def _reward_values(
        self, data: mjx.Data, task_state: TaskState, action: jax.Array, last_action: jax.Array, terminated: jax.Array
    ) -> jax.Array:
        speed_error = data.qvel[0] - self.cfg.target_speed
        term = terminated.astype(jnp.float32)
        return jnp.stack(
            (
                jnp.exp(-jnp.square(speed_error) / self.cfg.tracking_sigma),
                1.0 - term,
                term,
                jnp.abs(data.qfrc_actuator[6:] * data.qvel[6:]).sum(),
                jnp.square(action - last_action).sum(),
            )
        )

    def _episode_metrics(self, data: mjx.Data, task_state: TaskState, episode_steps: jax.Array) -> jax.Array:
        # Resets start the torso at x = 0, so the final x over the episode's duration is its mean forward speed (m/s).
        return jnp.stack((data.qpos[0] / (episode_steps * self.step_dt),))
