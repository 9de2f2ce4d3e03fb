"""Settings of the velocity-tracking robots, after Isaac Lab's ``LocomotionVelocityRoughEnvCfg`` and its Go1 and G1
flat configs (``docs/robots.md`` sets them side by side); importing this needs neither JAX nor MuJoCo.

A user sets any field with ``env.<section>.<field>=VALUE`` (``env.rewards.feet_air_time=0.5``,
``env.commands.lin_vel_x=[0.0,1.0]``); a range with its minimum above its maximum is refused.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Annotated

from annotated_types import Ge, Gt, Interval

from rlscale.tasks.physics import MujocoTaskCfg

Range = tuple[float, float]
Period = tuple[float, float]
"""A ``(min, max)`` range of seconds, whose minimum must be positive."""
Share = Annotated[float, Interval(ge=0, le=1)]


def check_ranges(section: object) -> None:
    """Refuse a ``(min, max)`` field of ``section`` whose minimum is above its maximum, or a :data:`Period` whose
    minimum is not positive, naming it."""
    for item in dataclasses.fields(section):
        value, name = getattr(section, item.name), f"{type(section).__name__}.{item.name}"
        if item.type in ("Range", "Period") and value[0] > value[1]:
            raise ValueError(f"{name}: min {value[0]} > max {value[1]}")
        if item.type == "Period" and value[0] <= 0.0:
            raise ValueError(f"{name}: must be positive, got {value}")


@dataclass(kw_only=True)
class VelocityCommandCfg:
    """Isaac Lab's ``UniformVelocityCommandCfg``: ``(v_x, v_y, w_z)`` in the base frame, sampled uniformly."""

    lin_vel_x: Range = (-1.0, 1.0)
    lin_vel_y: Range = (-1.0, 1.0)
    ang_vel_z: Range = (-1.0, 1.0)
    heading: Range = (-math.pi, math.pi)
    """Heading targets (rad) of the heading envs, whose ``w_z`` command steers towards them."""
    heading_command: bool = True
    heading_control_stiffness: Annotated[float, Ge(0)] = 0.5
    rel_heading_envs: Share = 1.0
    """Share of envs whose yaw command follows a heading target (the rest get a sampled ``w_z``)."""
    rel_standing_envs: Share = 0.02
    """Share of envs commanded to stand still."""
    resampling_time_s: Period = (10.0, 10.0)
    """Seconds between resamples within an episode (Isaac Lab 2.x; its newest base config never resamples)."""

    def __post_init__(self) -> None:
        check_ranges(self)


@dataclass(kw_only=True)
class ObservationNoiseCfg:
    """Isaac Lab's additive uniform noise ``U(-n, n)`` on the policy observations (``enable_corruption``)."""

    enable: bool = True
    base_lin_vel: Annotated[float, Ge(0)] = 0.1
    base_ang_vel: Annotated[float, Ge(0)] = 0.2
    projected_gravity: Annotated[float, Ge(0)] = 0.05
    joint_pos: Annotated[float, Ge(0)] = 0.01
    joint_vel: Annotated[float, Ge(0)] = 1.5


@dataclass(kw_only=True)
class EventsCfg:
    """Isaac Lab's reset and interval events (``reset_base``, ``reset_robot_joints``, ``push_robot``)."""

    reset_yaw: Range = (-math.pi, math.pi)
    reset_base_velocity: Annotated[float, Ge(0)] = 0.1
    """Half-width of the uniform reset velocity of the base, each linear (m/s) and angular (rad/s) axis."""
    reset_joint_position_scale: Range = (0.5, 1.5)
    """Default joint positions times ``U(min, max)``, clipped to the joint ranges (``reset_joints_by_scale``)."""
    push_interval_s: Period = (10.0, 15.0)
    push_velocity_xy: Annotated[float, Ge(0)] = 0.1
    """Half-width of the uniform push added to the base's x and y velocity (m/s); 0 disables pushes."""

    def __post_init__(self) -> None:
        check_ranges(self)


@dataclass(kw_only=True)
class VelocityRewardsCfg:
    """Reward weights by Isaac Lab's term names (the base ``RewardsCfg``); 0 turns a term off, as in Isaac Lab."""

    track_lin_vel_xy_exp: float = 1.0
    track_ang_vel_z_exp: float = 0.5
    lin_vel_z_l2: float = -2.0
    ang_vel_xy_l2: float = -0.05
    dof_torques_l2: float = -1.0e-5
    dof_acc_l2: float = -2.5e-7
    action_rate_l2: float = -0.01
    feet_air_time: float = 0.125
    flat_orientation_l2: float = 0.0
    dof_pos_limits: float = 0.0


@dataclass(kw_only=True)
class BipedRewardsCfg(VelocityRewardsCfg):
    """G1's extra terms (Isaac Lab's ``G1Rewards``)."""

    termination_penalty: float = -200.0
    feet_slide: float = -0.1
    joint_deviation_hip: float = -0.1
    joint_deviation_arms: float = -0.1
    joint_deviation_torso: float = -0.1


@dataclass(kw_only=True)
class VelocityTaskCfg(MujocoTaskCfg):
    """Isaac Lab's velocity task timing: 50 Hz policy over four 200 Hz physics steps, 20 s episodes."""

    sim_dt: float = 0.005
    decimation: int = 4
    episode_length_s: float = 20.0
    action_scale: Annotated[float, Gt(0)] = 0.5
    """Joint position target = default + scale × action (``JointPositionActionCfg``, ``use_default_offset``)."""
    tracking_std: Annotated[float, Gt(0)] = 0.5
    """Width of the tracking kernels ``exp(-error² / std²)`` (Isaac Lab's ``std = sqrt(0.25)``)."""
    track_in_yaw_frame: bool = False
    """Track ``v_x, v_y`` in the gravity-aligned yaw frame and ``w_z`` in the world frame (Isaac Lab's G1 terms)
    rather than in the base frame."""
    feet_air_time_threshold: Annotated[float, Ge(0)] = 0.5
    """Seconds of air time that ``feet_air_time`` rewards beyond (quadruped) or up to (biped)."""
    foot_contact_height: float = 0.005
    """A foot touches the floor when its lowest point is below this height (m); see docs/robots.md."""
    soft_joint_pos_limit_factor: Annotated[float, Interval(gt=0, le=1)] = 0.9
    """``dof_pos_limits`` penalises joint positions outside this share of each joint's range, about its middle."""
    commands: VelocityCommandCfg = field(default_factory=VelocityCommandCfg)
    rewards: VelocityRewardsCfg = field(default_factory=VelocityRewardsCfg)
    noise: ObservationNoiseCfg = field(default_factory=ObservationNoiseCfg)
    events: EventsCfg = field(default_factory=EventsCfg)


@dataclass(kw_only=True)
class Go1FlatCfg(VelocityTaskCfg):
    """``Isaac-Velocity-Flat-Unitree-Go1-v0``: ``UnitreeGo1RoughEnvCfg`` and ``UnitreeGo1FlatEnvCfg`` overrides."""

    action_scale: float = 0.25
    # 3, not go1.xml's 1 (Playground's MJX setting): at 1 the contacts end each step unconverged, and trained
    # policies fell in 8-48 % of evaluation episodes on MuJoCo Warp; at 3 they fell in under 3 % within 75 s, for
    # 14 % less training throughput (results/h200/warp_learning)
    solver_iterations: int | None = 3
    rewards: VelocityRewardsCfg = field(
        default_factory=lambda: VelocityRewardsCfg(
            track_lin_vel_xy_exp=1.5,
            track_ang_vel_z_exp=0.75,
            dof_torques_l2=-2.0e-4,
            dof_acc_l2=-2.5e-7,
            feet_air_time=0.25,
            flat_orientation_l2=-2.5,
        )
    )


@dataclass(kw_only=True)
class G1FlatCfg(VelocityTaskCfg):
    """``Isaac-Velocity-Flat-G1-v0``: ``G1RoughEnvCfg`` and ``G1FlatEnvCfg`` overrides."""

    track_in_yaw_frame: bool = True
    feet_air_time_threshold: float = 0.4
    commands: VelocityCommandCfg = field(
        default_factory=lambda: VelocityCommandCfg(lin_vel_x=(-1.0, 1.0), lin_vel_y=(-0.5, 0.5), ang_vel_z=(-1.0, 1.0))
    )
    # tracking weighted 2.0, not Isaac Lab's 1.0: with 1.0 a G1 standing under exploration noise earns about nothing
    # per second, so the termination penalty alone kept it alive and walking paid too little (docs/robots.md)
    rewards: BipedRewardsCfg = field(
        default_factory=lambda: BipedRewardsCfg(
            track_lin_vel_xy_exp=2.0,
            track_ang_vel_z_exp=2.0,
            lin_vel_z_l2=-0.2,
            dof_torques_l2=-2.0e-6,
            dof_acc_l2=-1.0e-7,
            action_rate_l2=-0.005,
            feet_air_time=0.75,
            flat_orientation_l2=-1.0,
            dof_pos_limits=-1.0,
        )
    )
    events: EventsCfg = field(
        default_factory=lambda: EventsCfg(
            reset_base_velocity=0.0, reset_joint_position_scale=(1.0, 1.0), push_velocity_xy=0.0
        )
    )


EVALUATION_OVERRIDES = {"noise.enable": False, "events.push_velocity_xy": 0.0}
"""What Isaac Lab's ``_PLAY`` configs turn off for evaluation: observation noise and pushes."""

EVALUATION_COMMANDS = ((1.0, 0.0, 0.0), (0.5, 0.0, 0.0), (-0.5, 0.0, 0.0), (0.0, 0.5, 0.0), (0.5, 0.0, 0.5))
"""``rlscale evaluate``'s default fixed commands ``(v_x, v_y, w_z)``, inside both robots' training ranges."""
