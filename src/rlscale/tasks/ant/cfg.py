"""``Rlscale-Ant`` settings; importing this needs neither JAX nor MuJoCo."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge, Gt

from rlscale.tasks.physics import MujocoTaskCfg


@dataclass(kw_only=True)
class AntCfg(MujocoTaskCfg):
    """Defaults: 60 Hz control over two 120 Hz physics steps, 15 s episodes (Isaac Lab's Ant timing)."""

    sim_dt: float = 1.0 / 120.0
    decimation: int = 2
    episode_length_s: float = 15.0
    action_scale: Annotated[float, Gt(0)] = 1.0
    """Motor command per unit action, clipped to the actuators' [-1, 1] range (times their gear of 15 N m)."""
    target_speed: float = 1.0
    """Forward (+x) speed in m/s that the tracking reward peaks at."""
    tracking_sigma: Annotated[float, Gt(0)] = 0.25
    """Width of the tracking kernel ``exp(-(v_x - target)^2 / sigma)`` in (m/s)^2."""
    rew_track_lin_vel_x: float = 2.0
    rew_alive: float = 0.5
    rew_termination: float = -2.0
    rew_energy: float = -0.002
    """Times ``sum |torque * joint velocity|`` (W)."""
    rew_action_rate: float = -0.01
    """Times ``sum (action - last action)^2``."""
    termination_height: float = 0.25
    """Torso heights below this (m) end the episode."""
    joint_pos_noise: Annotated[float, Ge(0)] = 0.1
    """Uniform reset noise of the joint positions around the default pose, in rad."""
    joint_vel_noise: Annotated[float, Ge(0)] = 0.1
    """Uniform reset noise of the joint velocities, in rad/s."""
