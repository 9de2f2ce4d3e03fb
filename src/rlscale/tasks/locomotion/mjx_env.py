"""Velocity-tracking locomotion on MJX (``physics=mjx``), after Isaac Lab's ``LocomotionVelocityRoughEnvCfg`` on flat
ground.

One class serves every robot of :mod:`rlscale.tasks.locomotion.robots`: the robot says which bodies, feet and joints
play which role, the config (:mod:`rlscale.tasks.locomotion.cfg`) holds Isaac Lab's weights, ranges and noise.
Per-env state beyond the physics (the command, its timers, the feet's air and contact times, the tracking errors)
is the backend's task state, so commands, contacts and resets all stay inside the one compiled step.

Contacts are read from the geometry rather than from contact forces: a foot touches the floor when its lowest point
is below ``foot_contact_height``, and ``base_contact`` ends the episode when a geom of the robot's base-contact body
reaches the floor (those geoms do not collide; docs/robots.md says why and what differs from Isaac Lab).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import torch
from mujoco import mjx

from rlscale.tasks.locomotion.model import FORWARD, GRAVITY_DIR, STANDING_SPEED, RobotModel
from rlscale.tasks.locomotion.robots import G1, GO1
from rlscale.tasks.mjx.backend import MjxVecTask, TaskState, quat_rotate_inverse


def quat_rotate(quat: jax.Array, vec: jax.Array) -> jax.Array:
    """Rotate a body-frame vector into the world frame by a unit quaternion ``(w, x, y, z)``."""
    w, xyz = quat[0], quat[1:]
    return vec * (2.0 * w * w - 1.0) + 2.0 * w * jnp.cross(xyz, vec) + 2.0 * xyz * jnp.dot(xyz, vec)


def wrap_to_pi(angle: jax.Array) -> jax.Array:
    return jnp.mod(angle + jnp.pi, 2.0 * jnp.pi) - jnp.pi


def lowest_point(geom_type: int, size: np.ndarray, center: jax.Array, rotation: jax.Array) -> jax.Array:
    """Height of a primitive geom's lowest point, from its world position and rotation (columns: its axes)."""
    up = rotation[2]  # the world z component of each of the geom's axes
    if geom_type == mujoco.mjtGeom.mjGEOM_SPHERE:
        return center[2] - size[0]
    if geom_type == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return center[2] - jnp.abs(up[2]) * size[1] - size[0]
    if geom_type == mujoco.mjtGeom.mjGEOM_CYLINDER:
        return center[2] - jnp.abs(up[2]) * size[1] - size[0] * jnp.sqrt(jnp.maximum(1.0 - up[2] ** 2, 0.0))
    if geom_type == mujoco.mjtGeom.mjGEOM_BOX:
        return center[2] - jnp.abs(up) @ size
    if geom_type == mujoco.mjtGeom.mjGEOM_ELLIPSOID:
        return center[2] - jnp.linalg.norm(up * size)
    raise ValueError(f"no lowest point for geom type {mujoco.mjtGeom(geom_type).name}")


def _uniform(key: jax.Array, bounds: tuple[float, float], shape: tuple[int, ...] = ()) -> jax.Array:
    return jax.random.uniform(key, shape, minval=bounds[0], maxval=bounds[1])


class VelocityTask(RobotModel, MjxVecTask):
    """Track a base velocity command ``(v_x, v_y, w_z)``.

    Observations (Isaac Lab's ``PolicyCfg``, in order): base linear and angular velocity (base frame), projected
    gravity, the command, joint positions relative to the default pose, joint velocities, last action; with uniform
    noise. Actions: joint position targets around the default pose (``action_scale``), held by the model's PD
    actuators. Rewards and terminations by Isaac Lab's names; ``Metrics/base_velocity/error_vel_xy`` and
    ``error_vel_yaw`` are each episode's mean tracking errors (m/s, rad/s), as Isaac Lab's command metrics.
    """

    # --- evaluation (rlscale evaluate): fixed commands, each env's tracking error --------------------------------

    def set_commands(self, commands: torch.Tensor) -> None:
        """Give every env a fixed ``(v_x, v_y, w_z)`` command ``(num_envs, 3)`` from now on: no heading control, no
        standing envs, no resampling (until the env's next reset)."""
        task_state = {
            **self._state["task"],
            "command": jnp.array(self._to_jax(commands, torch.float32), copy=True),
            "heading_env": jnp.zeros(self.num_envs, bool),
            "standing_env": jnp.zeros(self.num_envs, bool),
            "command_time_left": jnp.full(self.num_envs, jnp.inf, jnp.float32),
        }
        self._state = {**self._state, "task": task_state}

    @property
    def episode_tracking_errors(self) -> torch.Tensor:
        """Each env's mean tracking errors so far in its episode, ``(num_envs, 2)``: linear xy (m/s), yaw (rad/s)."""
        steps = jnp.maximum(self._state["ep_steps"], 1)[:, None]
        return torch.from_dlpack(self._state["task"]["error_sums"] / steps)

    def _lowest(self, data: mjx.Data, geoms: list[int]) -> jax.Array:
        model = self.mj_model
        return jnp.stack(
            [lowest_point(model.geom_type[g], model.geom_size[g], data.geom_xpos[g], data.geom_xmat[g]) for g in geoms]
        )

    # --- commands --------------------------------------------------------------------------------------------

    def _sample_command(self, key: jax.Array) -> TaskState:
        c = self.cfg.commands
        keys = jax.random.split(key, 7)
        command = jnp.stack(
            (_uniform(keys[0], c.lin_vel_x), _uniform(keys[1], c.lin_vel_y), _uniform(keys[2], c.ang_vel_z))
        )
        return {
            "command": command,
            "heading_target": _uniform(keys[3], c.heading),
            "heading_env": jax.random.uniform(keys[4]) < c.rel_heading_envs if c.heading_command else jnp.bool_(False),
            "standing_env": jax.random.uniform(keys[5]) < c.rel_standing_envs,
            "command_time_left": _uniform(keys[6], c.resampling_time_s),
        }

    def _init_task_state(self, key: jax.Array, data: mjx.Data) -> TaskState:
        command_key, push_key = jax.random.split(key)
        feet = len(self.robot.feet)
        return {
            **self._sample_command(command_key),
            "push_time_left": _uniform(push_key, self.cfg.events.push_interval_s),
            "foot_contact": jnp.zeros(feet, bool),
            "first_contact": jnp.zeros(feet, bool),
            "air_time": jnp.zeros(feet, jnp.float32),
            "contact_time": jnp.zeros(feet, jnp.float32),
            "last_air_time": jnp.zeros(feet, jnp.float32),
            "error_sums": jnp.zeros(2, jnp.float32),
        }

    # --- the MDP hooks ---------------------------------------------------------------------------------------

    def _sample_reset(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        e = self.cfg.events
        yaw_key, scale_key, velocity_key = jax.random.split(key, 3)
        yaw = _uniform(yaw_key, e.reset_yaw)
        joints = self._default_joint_pos * _uniform(scale_key, e.reset_joint_position_scale, (self.num_joints,))
        joints = jnp.clip(joints, self._joint_limits[:, 0], self._joint_limits[:, 1])
        quat = jnp.stack((jnp.cos(yaw / 2), 0.0, 0.0, jnp.sin(yaw / 2)))
        qpos = jnp.concatenate((self._home_qpos[:3], quat, joints))
        base_velocity = _uniform(velocity_key, (-e.reset_base_velocity, e.reset_base_velocity), (6,))
        return qpos, jnp.concatenate((base_velocity, jnp.zeros(self.num_joints, jnp.float32)))

    def _control(self, action: jax.Array) -> jax.Array:
        return self._default_joint_pos + self.cfg.action_scale * action

    def _base_velocities(self, data: mjx.Data) -> tuple[jax.Array, jax.Array]:
        """Linear and angular base velocity in the base frame (a free joint's are world and body frame)."""
        return quat_rotate_inverse(data.qpos[3:7], data.qvel[:3]), data.qvel[3:6]

    def _tracked_velocity(self, data: mjx.Data) -> jax.Array:
        """``(v_x, v_y, w_z)`` as the tracking rewards read it: base frame, or yaw frame and world ``w_z``."""
        lin_b, ang_b = self._base_velocities(data)
        if not self.cfg.track_in_yaw_frame:
            return jnp.concatenate((lin_b[:2], ang_b[2:]))
        heading = self._heading(data)
        cos, sin = jnp.cos(heading), jnp.sin(heading)
        vx, vy = data.qvel[0], data.qvel[1]
        ang_w = quat_rotate(data.qpos[3:7], ang_b)
        return jnp.stack((cos * vx + sin * vy, -sin * vx + cos * vy, ang_w[2]))

    def _heading(self, data: mjx.Data) -> jax.Array:
        forward = quat_rotate(data.qpos[3:7], FORWARD)
        return jnp.arctan2(forward[1], forward[0])

    def _after_physics(self, data: mjx.Data, task_state: TaskState, action: jax.Array) -> TaskState:
        """Feet contact bookkeeping (Isaac Lab's contact sensor, at the policy rate) and the tracking errors."""
        dt = self.step_dt
        lowest = [self._lowest(data, geoms).min() for geoms in self._foot_geoms]
        contact = jnp.stack(lowest) < self.cfg.foot_contact_height
        air_time, contact_time = task_state["air_time"], task_state["contact_time"]
        first_contact = contact & (air_time > 0.0)
        lin_b, ang_b = self._base_velocities(data)
        command = task_state["command"]
        errors = jnp.stack((jnp.linalg.norm(command[:2] - lin_b[:2]), jnp.abs(command[2] - ang_b[2])))
        return {
            **task_state,
            "foot_contact": contact,
            "first_contact": first_contact,
            "last_air_time": jnp.where(first_contact, air_time, task_state["last_air_time"]),
            "air_time": jnp.where(contact, 0.0, air_time + dt),
            "contact_time": jnp.where(contact, contact_time + dt, 0.0),
            "error_sums": task_state["error_sums"] + errors,
        }

    def _before_observe(self, data: mjx.Data, task_state: TaskState, key: jax.Array) -> tuple[mjx.Data, TaskState]:
        """Isaac Lab's command manager (resampling, heading control, standing envs) and ``push_robot``."""
        c, e, dt = self.cfg.commands, self.cfg.events, self.step_dt
        command_key, push_key, interval_key = jax.random.split(key, 3)
        time_left = task_state["command_time_left"] - dt
        resampled = self._sample_command(command_key)
        expired = time_left <= 0.0
        task_state = {
            **task_state,
            **{name: jnp.where(expired, new, task_state[name]) for name, new in resampled.items()},
        }
        task_state["command_time_left"] = jnp.where(expired, resampled["command_time_left"], time_left)
        command = task_state["command"]
        if c.heading_command:
            error = wrap_to_pi(task_state["heading_target"] - self._heading(data))
            steered = jnp.clip(c.heading_control_stiffness * error, *c.ang_vel_z)
            command = command.at[2].set(jnp.where(task_state["heading_env"], steered, command[2]))
        task_state["command"] = jnp.where(task_state["standing_env"], 0.0, command)
        if e.push_velocity_xy > 0.0:
            push_left = task_state["push_time_left"] - dt
            push = _uniform(push_key, (-e.push_velocity_xy, e.push_velocity_xy), (2,))
            data = data.replace(qvel=data.qvel.at[:2].add(jnp.where(push_left <= 0.0, push, 0.0)))
            next_push = _uniform(interval_key, e.push_interval_s)
            task_state["push_time_left"] = jnp.where(push_left <= 0.0, next_push, push_left)
        return data, task_state

    def _observe(self, data: mjx.Data, task_state: TaskState, last_action: jax.Array, key: jax.Array) -> jax.Array:
        lin_b, ang_b = self._base_velocities(data)
        terms = (
            (lin_b, "base_lin_vel"),
            (ang_b, "base_ang_vel"),
            (quat_rotate_inverse(data.qpos[3:7], GRAVITY_DIR), "projected_gravity"),
            (task_state["command"], None),
            (data.qpos[7:] - self._default_joint_pos, "joint_pos"),
            (data.qvel[6:], "joint_vel"),
            (last_action, None),
        )
        noise = self.cfg.noise
        keys = jax.random.split(key, len(terms))
        return jnp.concatenate(
            [
                value + _uniform(term_key, (-getattr(noise, name), getattr(noise, name)), value.shape)
                if noise.enable and name is not None
                else value
                for (value, name), term_key in zip(terms, keys, strict=True)
            ]
        )

    def _termination_flags(self, data: mjx.Data, task_state: TaskState) -> jax.Array:
        return jnp.stack((self._lowest(data, self._base_geoms).min() < 0.0,))

    def _reward_values(
        self, data: mjx.Data, task_state: TaskState, action: jax.Array, last_action: jax.Array, terminated: jax.Array
    ) -> jax.Array:
        weights = dict(zip(self.reward_terms, self.reward_weights(), strict=True))
        # a term of weight 0 is not computed, as in Isaac Lab's reward manager (its log stays 0)
        return jnp.stack(
            [
                getattr(self, f"_reward_{term}")(data, task_state, action, last_action, terminated)
                if weights[term]
                else jnp.float32(0.0)
                for term in self.reward_terms
            ]
        )

    def _episode_metrics(self, data: mjx.Data, task_state: TaskState, episode_steps: jax.Array) -> jax.Array:
        return task_state["error_sums"] / jnp.maximum(episode_steps, 1)

    # --- reward terms, by Isaac Lab's names (``mdp/rewards.py`` and ``isaaclab.envs.mdp.rewards``) ---------------

    def _reward_track_lin_vel_xy_exp(self, data, task_state, action, last_action, terminated):
        error = jnp.sum(jnp.square(task_state["command"][:2] - self._tracked_velocity(data)[:2]))
        return jnp.exp(-error / self.cfg.tracking_std**2)

    def _reward_track_ang_vel_z_exp(self, data, task_state, action, last_action, terminated):
        error = jnp.square(task_state["command"][2] - self._tracked_velocity(data)[2])
        return jnp.exp(-error / self.cfg.tracking_std**2)

    def _reward_lin_vel_z_l2(self, data, task_state, action, last_action, terminated):
        return jnp.square(self._base_velocities(data)[0][2])

    def _reward_ang_vel_xy_l2(self, data, task_state, action, last_action, terminated):
        return jnp.sum(jnp.square(self._base_velocities(data)[1][:2]))

    def _reward_dof_torques_l2(self, data, task_state, action, last_action, terminated):
        return jnp.sum(jnp.square(data.actuator_force) * self._joint_mask("dof_torques_l2"))

    def _reward_dof_acc_l2(self, data, task_state, action, last_action, terminated):
        return jnp.sum(jnp.square(data.qacc[6:]) * self._joint_mask("dof_acc_l2"))

    def _reward_action_rate_l2(self, data, task_state, action, last_action, terminated):
        return jnp.sum(jnp.square(action - last_action))

    def _reward_feet_air_time(self, data, task_state, action, last_action, terminated):
        """Quadrupeds: air time beyond the threshold at each touchdown; bipeds (two feet): Isaac Lab's
        ``feet_air_time_positive_biped``, the shorter single-stance phase time, capped at the threshold."""
        threshold = self.cfg.feet_air_time_threshold
        if len(self.robot.feet) == 2:
            contact = task_state["foot_contact"]
            in_mode_time = jnp.where(contact, task_state["contact_time"], task_state["air_time"])
            single_stance = contact.sum() == 1
            reward = jnp.minimum(jnp.min(jnp.where(single_stance, in_mode_time, 0.0)), threshold)
        else:
            reward = jnp.sum((task_state["last_air_time"] - threshold) * task_state["first_contact"])
        return reward * (jnp.linalg.norm(task_state["command"][:2]) > STANDING_SPEED)

    def _reward_flat_orientation_l2(self, data, task_state, action, last_action, terminated):
        return jnp.sum(jnp.square(quat_rotate_inverse(data.qpos[3:7], GRAVITY_DIR)[:2]))

    def _reward_dof_pos_limits(self, data, task_state, action, last_action, terminated):
        joints = data.qpos[7:]
        below = -jnp.minimum(joints - self._soft_limits[:, 0], 0.0)
        above = jnp.maximum(joints - self._soft_limits[:, 1], 0.0)
        return jnp.sum((below + above) * self._joint_mask("dof_pos_limits"))

    def _reward_termination_penalty(self, data, task_state, action, last_action, terminated):
        return terminated.astype(jnp.float32)

    def _reward_feet_slide(self, data, task_state, action, last_action, terminated):
        """Speed of each foot body over the floor while it touches it (from the com-based body velocity)."""
        angular, linear = data.cvel[self._foot_bodies, :3], data.cvel[self._foot_bodies, 3:]
        offset = data.xpos[self._foot_bodies] - data.subtree_com[self._root_body]
        velocity = linear + jnp.cross(angular, offset)
        return jnp.sum(jnp.linalg.norm(velocity[:, :2], axis=1) * task_state["foot_contact"])

    def _joint_deviation(self, data: mjx.Data, term: str) -> jax.Array:
        return jnp.sum(jnp.abs(data.qpos[7:] - self._default_joint_pos) * self._joint_mask(term))


class Go1FlatTask(VelocityTask):
    """``Rlscale-Go1-Flat``: the Unitree Go1 (12 joints), observations 48."""

    robot = GO1
    observation_dims = {"policy": 48}


class G1FlatTask(VelocityTask):
    """``Rlscale-G1-Flat``: the Unitree G1 (29 joints), observations 99."""

    robot = G1
    observation_dims = {"policy": 99}
