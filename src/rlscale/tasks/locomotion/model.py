"""What the velocity MDP reads of a robot's MuJoCo model, once, whichever engine steps it (numpy and MuJoCo only).

Both :mod:`rlscale.tasks.locomotion.env` (MuJoCo Warp, torch) and :mod:`rlscale.tasks.locomotion.mjx_env` (MJX, JAX)
take their indices, default pose, joint limits and joint groups from here.
"""

from __future__ import annotations

import dataclasses
import re

import mujoco
import numpy as np

from rlscale.tasks.locomotion.cfg import VelocityTaskCfg
from rlscale.tasks.locomotion.robots import LeggedRobot

GRAVITY_DIR = np.array([0.0, 0.0, -1.0], np.float32)
FORWARD = np.array([1.0, 0.0, 0.0], np.float32)
STANDING_SPEED = 0.1
"""Commands slower than this (m/s) ask the robot to stand: no feet air time is rewarded (Isaac Lab's 0.1)."""
HOME_KEY = "home"


class RobotModel:
    """A mixin for the velocity tasks of both engines: the robot's model and terms, :meth:`_read_model` (their
    backends' hook) and the joint groups of the reward terms."""

    robot: LeggedRobot
    cfg: VelocityTaskCfg
    mj_model: mujoco.MjModel
    termination_terms = ("base_contact",)
    metric_terms = ("base_velocity/error_vel_xy", "base_velocity/error_vel_yaw")

    def __init__(self, cfg: VelocityTaskCfg):
        self.mjcf = self.robot.mjcf
        self.reward_terms = tuple(item.name for item in dataclasses.fields(cfg.rewards))
        self.cfg = cfg
        super().__init__(cfg)

    def reward_weights(self) -> tuple[float, ...]:
        return tuple(getattr(self.cfg.rewards, term) for term in self.reward_terms)

    def _read_model(self) -> None:
        model = self.mj_model
        if model.nq - 7 != model.nu or model.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE:
            raise ValueError(f"{self.robot.model_file}: needs a free joint first and one actuator per other joint")
        self.num_joints = model.nu
        joint_names = [model.joint(index).name for index in range(1, model.njnt)]
        home = model.key(HOME_KEY).qpos.astype(np.float32)
        self._home_qpos = home
        self._default_joint_pos = home[7:]
        limits = model.jnt_range[1:].astype(np.float32)
        middle, half = limits.mean(axis=1), (limits[:, 1] - limits[:, 0]) / 2
        factor = self.cfg.soft_joint_pos_limit_factor
        self._joint_limits = limits
        self._soft_limits = np.stack((middle - factor * half, middle + factor * half), axis=1)
        self._joint_masks = {
            term: np.array(
                [any(re.fullmatch(pattern, name) for pattern in patterns) for name in joint_names], np.float32
            )
            for term, patterns in self.robot.joint_groups.items()
        }
        self._base_body = model.body(self.robot.base_body).id
        contact_body = model.body(self.robot.base_contact_body).id
        self._base_geoms = [geom for geom in range(model.ngeom) if model.geom_bodyid[geom] == contact_body]
        self._foot_geoms = [
            [geom for geom in range(model.ngeom) if model.geom(geom).name.startswith(foot)] for foot in self.robot.feet
        ]
        if not self._base_geoms or not all(self._foot_geoms):
            raise ValueError(f"{self.robot.model_file}: the base-contact body and every foot need a geom")
        self._foot_bodies = np.array([model.body(name).id for name in self.robot.foot_bodies], np.int32)
        self._root_body = int(model.body_rootid[self._base_body])

    def _joint_mask(self, term: str) -> np.ndarray:
        return self._joint_masks.get(term, np.ones(self.num_joints, np.float32))

    # the joint-deviation terms, by Isaac Lab's names; each engine writes ``_joint_deviation(state, term)``

    def _reward_joint_deviation_hip(self, state, task_state, action, last_action, terminated):
        return self._joint_deviation(state, "joint_deviation_hip")

    def _reward_joint_deviation_arms(self, state, task_state, action, last_action, terminated):
        return self._joint_deviation(state, "joint_deviation_arms")

    def _reward_joint_deviation_torso(self, state, task_state, action, last_action, terminated):
        return self._joint_deviation(state, "joint_deviation_torso")
