"""Velocity-tracking locomotion on MuJoCo Warp, after Isaac Lab's ``LocomotionVelocityRoughEnvCfg`` on flat ground.

One class serves every robot of :mod:`rlscale.tasks.locomotion.robots`: the robot says which bodies, feet and joints
play which role, the config (:mod:`rlscale.tasks.locomotion.cfg`) holds Isaac Lab's weights, ranges and noise. The MDP
is batched torch over every env; per-env state beyond the physics (the command, its timers, the feet's air and
contact times, the tracking errors) is the backend's task state, so commands, contacts and resets all stay inside
the one captured step. The same terms in JAX step the robots on MJX (:mod:`rlscale.tasks.locomotion.mjx_env`, with
``physics=mjx``); tests/test_robots.py holds the two to the same values on the same states.

Contacts are read from the geometry rather than from contact forces: a foot touches the floor when its lowest point
is below ``foot_contact_height``, and ``base_contact`` ends the episode when a geom of the robot's base-contact body
reaches the floor (those geoms do not collide; docs/robots.md says why and what differs from Isaac Lab).
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import torch

from rlscale.tasks.locomotion.model import FORWARD, GRAVITY_DIR, STANDING_SPEED, RobotModel
from rlscale.tasks.locomotion.robots import G1, GO1
from rlscale.tasks.mjwarp.backend import Physics, TaskState, WarpVecTask
from rlscale.tasks.mjwarp.rotations import quat_rotate, quat_rotate_inverse


def wrap_to_pi(angle: torch.Tensor) -> torch.Tensor:
    return torch.remainder(angle + math.pi, 2.0 * math.pi) - math.pi


def lowest_point(geom_type: int, size: torch.Tensor, center: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Height of a primitive geom's lowest point in every env, from its size ``(3,)`` (on the envs' device: the step
    copies nothing from the host), world positions ``(envs, 3)`` and rotations ``(envs, 3, 3)`` (columns: its axes)."""
    up = rotation[:, 2]  # the world z component of each of the geom's axes
    radius, half = size[0], size[1]
    if geom_type == mujoco.mjtGeom.mjGEOM_SPHERE:
        return center[:, 2] - radius
    if geom_type == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return center[:, 2] - up[:, 2].abs() * half - radius
    if geom_type == mujoco.mjtGeom.mjGEOM_CYLINDER:
        return center[:, 2] - up[:, 2].abs() * half - radius * (1.0 - up[:, 2] ** 2).clamp(min=0.0).sqrt()
    if geom_type == mujoco.mjtGeom.mjGEOM_BOX:
        return center[:, 2] - up.abs() @ size
    if geom_type == mujoco.mjtGeom.mjGEOM_ELLIPSOID:
        return center[:, 2] - torch.linalg.norm(up * size, dim=1)
    raise ValueError(f"no lowest point for geom type {mujoco.mjtGeom(geom_type).name}")


class VelocityTask(RobotModel, WarpVecTask):
    """Track a base velocity command ``(v_x, v_y, w_z)``.

    Observations (Isaac Lab's ``PolicyCfg``, in order): base linear and angular velocity (base frame), projected
    gravity, the command, joint positions relative to the default pose, joint velocities, last action; with uniform
    noise. Actions: joint position targets around the default pose (``action_scale``), held by the model's PD
    actuators. Rewards and terminations by Isaac Lab's names; ``Metrics/base_velocity/error_vel_xy`` and
    ``error_vel_yaw`` are each episode's mean tracking errors (m/s, rad/s), as Isaac Lab's command metrics.
    """

    def _read_model(self) -> None:
        super()._read_model()
        tensor = lambda array: torch.as_tensor(array, device=self.device)  # noqa: E731
        self._home = tensor(self._home_qpos)
        self._default = tensor(self._default_joint_pos)
        self._limits = tensor(self._joint_limits)
        self._soft = tensor(self._soft_limits)
        self._masks = {term: tensor(self._joint_mask(term)) for term in self.reward_terms}
        self._foot_body_index = tensor(self._foot_bodies).long()
        self._gravity = tensor(GRAVITY_DIR)
        self._forward = tensor(FORWARD)
        self._geom_size = tensor(self.mj_model.geom_size.astype(np.float32))

    # --- evaluation (rlscale evaluate): fixed commands, each env's tracking error --------------------------------

    def set_commands(self, commands: torch.Tensor) -> None:
        """Give every env a fixed ``(v_x, v_y, w_z)`` command ``(num_envs, 3)`` from now on: no heading control, no
        standing envs, no resampling (until the env's next reset)."""
        state = self.task_state
        state["command"].copy_(commands)
        state["heading_env"].fill_(False)
        state["standing_env"].fill_(False)
        state["command_time_left"].fill_(math.inf)

    @property
    def episode_tracking_errors(self) -> torch.Tensor:
        """Each env's mean tracking errors so far in its episode, ``(num_envs, 2)``: linear xy (m/s), yaw (rad/s)."""
        return self.task_state["error_sums"] / self._ep_steps.clamp(min=1)[:, None]

    # --- geometry and frames ---------------------------------------------------------------------------------

    def _lowest(self, physics: Physics, geoms: list[int]) -> torch.Tensor:
        """Lowest point of each of ``geoms`` in every env, ``(envs, len(geoms))``."""
        model = self.mj_model
        return torch.stack(
            [
                lowest_point(model.geom_type[g], self._geom_size[g], physics.geom_xpos[:, g], physics.geom_xmat[:, g])
                for g in geoms
            ],
            dim=1,
        )

    def _base_velocities(self, physics: Physics) -> tuple[torch.Tensor, torch.Tensor]:
        """Linear and angular base velocity in the base frame (a free joint's are world and body frame)."""
        return quat_rotate_inverse(physics.qpos[:, 3:7], physics.qvel[:, :3]), physics.qvel[:, 3:6]

    def _heading(self, physics: Physics) -> torch.Tensor:
        forward = quat_rotate(physics.qpos[:, 3:7], self._forward.expand(self.num_envs, 3))
        return torch.atan2(forward[:, 1], forward[:, 0])

    def _tracked_velocity(self, physics: Physics) -> torch.Tensor:
        """``(v_x, v_y, w_z)`` as the tracking rewards read it: base frame, or yaw frame and world ``w_z``."""
        lin_b, ang_b = self._base_velocities(physics)
        if not self.cfg.track_in_yaw_frame:
            return torch.cat((lin_b[:, :2], ang_b[:, 2:]), dim=1)
        heading = self._heading(physics)
        cos, sin = torch.cos(heading), torch.sin(heading)
        vx, vy = physics.qvel[:, 0], physics.qvel[:, 1]
        ang_w = quat_rotate(physics.qpos[:, 3:7], ang_b)
        return torch.stack((cos * vx + sin * vy, -sin * vx + cos * vy, ang_w[:, 2]), dim=1)

    # --- commands, resets and events -------------------------------------------------------------------------

    def _sample_command(self, n: int) -> TaskState:
        c = self.cfg.commands
        command = torch.stack(
            (self.uniform(c.lin_vel_x, (n,)), self.uniform(c.lin_vel_y, (n,)), self.uniform(c.ang_vel_z, (n,))), dim=1
        )
        heading_env = self.uniform((0.0, 1.0), (n,)) < c.rel_heading_envs
        return {
            "command": command,
            "heading_target": self.uniform(c.heading, (n,)),
            "heading_env": heading_env & c.heading_command,
            "standing_env": self.uniform((0.0, 1.0), (n,)) < c.rel_standing_envs,
            "command_time_left": self.uniform(c.resampling_time_s, (n,)),
        }

    def _init_task_state(self, n: int, physics: Physics) -> TaskState:
        feet = len(self.robot.feet)
        flags = torch.zeros(n, feet, dtype=torch.bool, device=self.device)
        times = torch.zeros(n, feet, device=self.device)
        return {
            **self._sample_command(n),
            "push_time_left": self.uniform(self.cfg.events.push_interval_s, (n,)),
            "foot_contact": flags,
            "first_contact": flags.clone(),
            "air_time": times,
            "contact_time": times.clone(),
            "last_air_time": times.clone(),
            "error_sums": torch.zeros(n, 2, device=self.device),
        }

    def _sample_reset(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        e = self.cfg.events
        yaw = self.uniform(e.reset_yaw, (n,))
        joints = self._default * self.uniform(e.reset_joint_position_scale, (n, self.num_joints))
        joints = torch.clamp(joints, self._limits[:, 0], self._limits[:, 1])
        zero = torch.zeros_like(yaw)
        quat = torch.stack((torch.cos(yaw / 2), zero, zero, torch.sin(yaw / 2)), dim=1)
        qpos = torch.cat((self._home[:3].expand(n, 3), quat, joints), dim=1)
        base_velocity = self.uniform((-e.reset_base_velocity, e.reset_base_velocity), (n, 6))
        return qpos, torch.cat((base_velocity, torch.zeros(n, self.num_joints, device=self.device)), dim=1)

    def _control(self, action: torch.Tensor) -> torch.Tensor:
        return self._default + self.cfg.action_scale * action

    def _after_physics(self, physics: Physics, task_state: TaskState, action: torch.Tensor) -> TaskState:
        """Feet contact bookkeeping (Isaac Lab's contact sensor, at the policy rate) and the tracking errors."""
        dt = self.step_dt
        lowest = torch.stack([self._lowest(physics, geoms).amin(dim=1) for geoms in self._foot_geoms], dim=1)
        contact = lowest < self.cfg.foot_contact_height
        air_time, contact_time = task_state["air_time"], task_state["contact_time"]
        first_contact = contact & (air_time > 0.0)
        lin_b, ang_b = self._base_velocities(physics)
        command = task_state["command"]
        errors = torch.stack(
            (torch.linalg.norm(command[:, :2] - lin_b[:, :2], dim=1), (command[:, 2] - ang_b[:, 2]).abs()), dim=1
        )
        return {
            **task_state,
            "foot_contact": contact,
            "first_contact": first_contact,
            "last_air_time": torch.where(first_contact, air_time, task_state["last_air_time"]),
            "air_time": torch.where(contact, 0.0, air_time + dt),
            "contact_time": torch.where(contact, contact_time + dt, 0.0),
            "error_sums": task_state["error_sums"] + errors,
        }

    def _before_observe(self, physics: Physics, task_state: TaskState) -> TaskState:
        """Isaac Lab's command manager (resampling, heading control, standing envs) and ``push_robot``."""
        c, e, dt, n = self.cfg.commands, self.cfg.events, self.step_dt, self.num_envs
        time_left = task_state["command_time_left"] - dt
        resampled = self._sample_command(n)
        expired = time_left <= 0.0
        task_state = {
            **task_state,
            **{
                name: torch.where(expired.reshape((-1,) + (1,) * (new.ndim - 1)), new, task_state[name])
                for name, new in resampled.items()
            },
        }
        task_state["command_time_left"] = torch.where(expired, resampled["command_time_left"], time_left)
        command = task_state["command"]
        if c.heading_command:
            error = wrap_to_pi(task_state["heading_target"] - self._heading(physics))
            steered = torch.clamp(c.heading_control_stiffness * error, *c.ang_vel_z)
            yaw = torch.where(task_state["heading_env"], steered, command[:, 2])
            command = torch.cat((command[:, :2], yaw[:, None]), dim=1)
        task_state["command"] = torch.where(task_state["standing_env"][:, None], 0.0, command)
        if e.push_velocity_xy > 0.0:
            push_left = task_state["push_time_left"] - dt
            push = self.uniform((-e.push_velocity_xy, e.push_velocity_xy), (n, 2))
            due = push_left <= 0.0
            physics.qvel[:, :2] += torch.where(due[:, None], push, 0.0)
            next_push = self.uniform(e.push_interval_s, (n,))
            task_state["push_time_left"] = torch.where(due, next_push, push_left)
        return task_state

    # --- observation, terminations, rewards -------------------------------------------------------------------

    def _observe(self, physics: Physics, task_state: TaskState, last_action: torch.Tensor) -> torch.Tensor:
        lin_b, ang_b = self._base_velocities(physics)
        gravity = quat_rotate_inverse(physics.qpos[:, 3:7], self._gravity.expand(self.num_envs, 3))
        terms = (
            (lin_b, "base_lin_vel"),
            (ang_b, "base_ang_vel"),
            (gravity, "projected_gravity"),
            (task_state["command"], None),
            (physics.qpos[:, 7:] - self._default, "joint_pos"),
            (physics.qvel[:, 6:], "joint_vel"),
            (last_action, None),
        )
        noise = self.cfg.noise
        return torch.cat(
            [
                value + self.uniform((-getattr(noise, name), getattr(noise, name)), value.shape)
                if noise.enable and name is not None
                else value
                for value, name in terms
            ],
            dim=1,
        )

    def _termination_flags(self, physics: Physics, task_state: TaskState) -> torch.Tensor:
        return (self._lowest(physics, self._base_geoms).amin(dim=1) < 0.0)[:, None]

    def _reward_values(self, physics, task_state, action, last_action, terminated) -> torch.Tensor:
        weights = dict(zip(self.reward_terms, self.reward_weights(), strict=True))
        zero = torch.zeros(self.num_envs, device=self.device)
        # a term of weight 0 is not computed, as in Isaac Lab's reward manager (its log stays 0)
        return torch.stack(
            [
                getattr(self, f"_reward_{term}")(physics, task_state, action, last_action, terminated)
                if weights[term]
                else zero
                for term in self.reward_terms
            ],
            dim=1,
        )

    def _episode_metrics(self, physics: Physics, task_state: TaskState, episode_steps: torch.Tensor) -> torch.Tensor:
        return task_state["error_sums"] / episode_steps.clamp(min=1)[:, None]

    # --- reward terms, by Isaac Lab's names (``mdp/rewards.py`` and ``isaaclab.envs.mdp.rewards``) ---------------

    def _reward_track_lin_vel_xy_exp(self, physics, task_state, action, last_action, terminated):
        error = (task_state["command"][:, :2] - self._tracked_velocity(physics)[:, :2]).square().sum(dim=1)
        return torch.exp(-error / self.cfg.tracking_std**2)

    def _reward_track_ang_vel_z_exp(self, physics, task_state, action, last_action, terminated):
        error = (task_state["command"][:, 2] - self._tracked_velocity(physics)[:, 2]).square()
        return torch.exp(-error / self.cfg.tracking_std**2)

    def _reward_lin_vel_z_l2(self, physics, task_state, action, last_action, terminated):
        return self._base_velocities(physics)[0][:, 2].square()

    def _reward_ang_vel_xy_l2(self, physics, task_state, action, last_action, terminated):
        return self._base_velocities(physics)[1][:, :2].square().sum(dim=1)

    def _reward_dof_torques_l2(self, physics, task_state, action, last_action, terminated):
        return (physics.actuator_force.square() * self._masks["dof_torques_l2"]).sum(dim=1)

    def _reward_dof_acc_l2(self, physics, task_state, action, last_action, terminated):
        return (physics.qacc[:, 6:].square() * self._masks["dof_acc_l2"]).sum(dim=1)

    def _reward_action_rate_l2(self, physics, task_state, action, last_action, terminated):
        return (action - last_action).square().sum(dim=1)

    def _reward_feet_air_time(self, physics, task_state, action, last_action, terminated):
        """Quadrupeds: air time beyond the threshold at each touchdown; bipeds (two feet): Isaac Lab's
        ``feet_air_time_positive_biped``, the shorter single-stance phase time, capped at the threshold."""
        threshold = self.cfg.feet_air_time_threshold
        if len(self.robot.feet) == 2:
            contact = task_state["foot_contact"]
            in_mode_time = torch.where(contact, task_state["contact_time"], task_state["air_time"])
            single_stance = contact.sum(dim=1) == 1
            shorter = torch.where(single_stance[:, None], in_mode_time, 0.0).amin(dim=1)
            reward = shorter.clamp(max=threshold)
        else:
            reward = ((task_state["last_air_time"] - threshold) * task_state["first_contact"]).sum(dim=1)
        return reward * (torch.linalg.norm(task_state["command"][:, :2], dim=1) > STANDING_SPEED)

    def _reward_flat_orientation_l2(self, physics, task_state, action, last_action, terminated):
        gravity = quat_rotate_inverse(physics.qpos[:, 3:7], self._gravity.expand(self.num_envs, 3))
        return gravity[:, :2].square().sum(dim=1)

    def _reward_dof_pos_limits(self, physics, task_state, action, last_action, terminated):
        joints = physics.qpos[:, 7:]
        below = -(joints - self._soft[:, 0]).clamp(max=0.0)
        above = (joints - self._soft[:, 1]).clamp(min=0.0)
        return ((below + above) * self._masks["dof_pos_limits"]).sum(dim=1)

    def _reward_termination_penalty(self, physics, task_state, action, last_action, terminated):
        return terminated.float()

    def _reward_feet_slide(self, physics, task_state, action, last_action, terminated):
        """Speed of each foot body over the floor while it touches it (from the com-based body velocity)."""
        feet = self._foot_body_index
        angular, linear = physics.cvel[:, feet, :3], physics.cvel[:, feet, 3:]
        offset = physics.xpos[:, feet] - physics.subtree_com[:, self._root_body, None]
        velocity = linear + torch.linalg.cross(angular, offset)
        return (torch.linalg.norm(velocity[..., :2], dim=2) * task_state["foot_contact"]).sum(dim=1)

    def _joint_deviation(self, physics: Physics, term: str) -> torch.Tensor:
        return ((physics.qpos[:, 7:] - self._default).abs() * self._masks[term]).sum(dim=1)


class Go1FlatTask(VelocityTask):
    """``Rlscale-Go1-Flat``: the Unitree Go1 (12 joints), observations 48."""

    robot = GO1
    observation_dims = {"policy": 48}


class G1FlatTask(VelocityTask):
    """``Rlscale-G1-Flat``: the Unitree G1 (29 joints), observations 99."""

    robot = G1
    observation_dims = {"policy": 99}
