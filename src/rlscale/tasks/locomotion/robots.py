"""What the velocity task needs to know of each robot: its model file and which parts play which role.

Torch- and JAX-free, so the registry can name the robots without the MJX extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources


@dataclass(frozen=True)
class LeggedRobot:
    """A legged robot of ``assets/``; joint groups are regular expressions over the model's joint names."""

    model_file: str
    base_body: str
    """The body whose velocity is tracked (the free joint's body)."""
    base_contact_body: str
    """Isaac Lab's ``base_contact`` body: the episode ends when one of its geoms reaches the floor."""
    feet: tuple[str, ...]
    """Foot names; a foot is every geom whose name starts with its name (the only geoms that collide)."""
    foot_bodies: tuple[str, ...] = ()
    """Bodies whose velocity ``feet_slide`` penalises while their foot touches the floor, in :attr:`feet` order."""
    joint_groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Reward term → the joints it reads (a term not named here reads every joint)."""

    @property
    def mjcf(self) -> str:
        return resources.files(__package__).joinpath("assets", self.model_file).read_text()


GO1 = LeggedRobot(
    model_file="go1.xml",
    base_body="trunk",
    base_contact_body="trunk",
    feet=("FR_foot", "FL_foot", "RR_foot", "RL_foot"),
)

G1 = LeggedRobot(
    model_file="g1.xml",
    base_body="pelvis",
    base_contact_body="torso_link",
    feet=("left_foot", "right_foot"),
    foot_bodies=("left_ankle_roll_link", "right_ankle_roll_link"),
    joint_groups={  # Isaac Lab's G1 terms, for the 29-joint G1 (its waist_* joints stand for Isaac Lab's torso_joint)
        "dof_torques_l2": (r".*_hip_.*", r".*_knee_joint"),
        "dof_acc_l2": (r".*_hip_.*", r".*_knee_joint"),
        "dof_pos_limits": (r".*_ankle_pitch_joint", r".*_ankle_roll_joint"),
        "joint_deviation_hip": (r".*_hip_yaw_joint", r".*_hip_roll_joint"),
        "joint_deviation_arms": (r".*_shoulder_.*", r".*_elbow_.*", r".*_wrist_.*"),
        "joint_deviation_torso": (r"waist_.*",),
    },
)
