"""Pictures of one world of an MJX task, drawn by MuJoCo's renderer (``rlscale play --video``).

The scene is the task's MJCF compiled a second time with what only the eye needs; the physics model is untouched.
Added: a checkered floor, a sky, and a light that follows the robot and casts its shadow. The robot is coloured by
part, so that a small picture shows the gait: the base, the left limbs, the right limbs, and the geoms that touch the
floor (the feet). Every group of geoms is shown; the robots keep their feet in a hidden group. Each frame copies one
world's ``qpos`` into the scene. The camera tracks the base from one of :data:`~rlscale.tasks.mjx.CAMERA_VIEWS`,
turned with the base's heading (smoothed, so that the gait's yaw sway does not shake the picture).

Importing this imports MuJoCo, which picks its GL backend then (``MUJOCO_GL``): choose it first.
"""

from __future__ import annotations

import math
import re

import mujoco
import numpy as np

from rlscale.tasks.mjx import CAMERA_VIEWS

ELEVATION = -18.0
"""Degrees the camera looks down."""
HEADING_TIME_CONSTANT_S = 0.6
"""How quickly the camera turns after the base's heading (the time constant of its smoothing)."""
FRAMING = 2.0
"""Camera distance in units of the robot's size (the larger of its height and its length at the start)."""

PALETTE = {
    "base": (0.24, 0.29, 0.37),
    "left": (0.93, 0.53, 0.20),
    "right": (0.22, 0.55, 0.84),
    "contact": (0.14, 0.14, 0.15),
}
"""Colour of each part of a robot (RGB)."""
FLOOR_SQUARES = ((0.84, 0.86, 0.88), (0.64, 0.67, 0.71))
FLOOR_SQUARE_M = 0.5
"""Side of one floor square (metres): enough squares pass under a walking robot to show its speed."""
SKY = ((0.62, 0.76, 0.90), (0.97, 0.98, 1.0))
"""The sky's gradient, top to horizon."""

LEFT = re.compile(r"(^|_)(left|[FR]L)(_|$)", re.IGNORECASE)
RIGHT = re.compile(r"(^|_)(right|[FR]R)(_|$)", re.IGNORECASE)
"""Body names of the left and right limbs: ``left_knee_link``, ``FL_calf`` (front left), ``back_right``."""


def scene_model(mjcf: str, width: int, height: int) -> mujoco.MjModel:
    """The task's model with a floor texture, a sky, a shadow-casting light and the robot's colours, for pictures
    of ``width`` × ``height`` pixels."""
    spec = mujoco.MjSpec.from_string(mjcf)
    spec.add_texture(
        name="rlscale_floor",
        type=mujoco.mjtTexture.mjTEXTURE_2D,
        builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
        rgb1=FLOOR_SQUARES[0],
        rgb2=FLOOR_SQUARES[1],
        width=256,
        height=256,
    )
    spec.add_texture(
        name="rlscale_sky",
        type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
        builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
        rgb1=SKY[0],
        rgb2=SKY[1],
        width=64,
        height=64,
    )
    # A checker texture holds 2 × 2 squares; texuniform repeats it per metre of floor
    floor = spec.add_material(name="rlscale_floor", texrepeat=[0.5 / FLOOR_SQUARE_M] * 2, texuniform=True)
    floor.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "rlscale_floor"
    for geom in spec.geoms:
        if geom.type == mujoco.mjtGeom.mjGEOM_PLANE:
            geom.material, geom.rgba = "rlscale_floor", [1.0, 1.0, 1.0, 1.0]
    # A spot light high above the robot's centre of mass and following it: its shadow shows the feet's contacts, and
    # its even light inside the cone keeps the floor flat (which a GIF compresses well)
    spec.worldbody.add_light(
        pos=[-1.0, -1.0, 6.0],
        dir=[1.0 / 6.0, 1.0 / 6.0, -1.0],
        mode=mujoco.mjtCamLight.mjCAMLIGHT_TRACKCOM,
        castshadow=True,
        diffuse=[0.55] * 3,
        cutoff=30.0,
        exponent=0.0,
    )
    spec.visual.headlight.ambient = [0.4] * 3
    spec.visual.headlight.diffuse = [0.4] * 3
    spec.visual.headlight.specular = [0.1] * 3
    spec.visual.quality.shadowsize = 2048
    spec.visual.global_.offwidth, spec.visual.global_.offheight = width, height
    model = spec.compile()
    colour_parts(model)
    return model


def colour_parts(model: mujoco.MjModel) -> None:
    """Colour each robot geom by its part (:data:`PALETTE`): the geoms that collide are the feet; a limb's side is in
    the name of its body or of the nearest named body above it."""
    for geom in range(model.ngeom):
        body = int(model.geom_bodyid[geom])
        if body == 0:  # the world's: the floor
            continue
        if model.geom_contype[geom] or model.geom_conaffinity[geom]:
            part = "contact"
        else:
            name = _named_ancestor(model, body)
            part = "left" if LEFT.search(name) else "right" if RIGHT.search(name) else "base"
        model.geom_rgba[geom] = (*PALETTE[part], 1.0)


def _named_ancestor(model: mujoco.MjModel, body: int) -> str:
    while body and not model.body(body).name:
        body = int(model.body_parentid[body])
    return model.body(body).name


def heading(quat: np.ndarray) -> float:
    """Yaw (rad) of a unit quaternion ``(w, x, y, z)``."""
    w, x, y, z = quat
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


class WorldRenderer:
    """Frames of one world of an MJX task: ``frame(qpos)`` for each picture, ``new_episode=True`` after a reset (the
    camera jumps with the robot instead of swinging round).

    Args:
        mjcf: The task's model.
        width, height: Picture size in pixels.
        view: One of :data:`~rlscale.tasks.mjx.CAMERA_VIEWS`.
        frame_dt: Seconds between two frames (for the camera's smoothing).
    """

    def __init__(self, mjcf: str, width: int, height: int, view: str, frame_dt: float):
        self.model = scene_model(mjcf, width, height)
        self.data = mujoco.MjData(self.model)
        self.renderer = mujoco.Renderer(self.model, height, width)
        self.option = mujoco.MjvOption()
        self.option.geomgroup[:] = 1
        self.option.sitegroup[:] = 0
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        self.camera.elevation = ELEVATION
        self.view_azimuth = CAMERA_VIEWS[view]
        self.turn = 1.0 - math.exp(-frame_dt / HEADING_TIME_CONSTANT_S)
        self.free_joint_qpos = self._free_joint_address()
        self._frame_robot()
        self.smoothed_heading: float | None = None

    def _free_joint_address(self) -> int:
        free = np.flatnonzero(self.model.jnt_type == mujoco.mjtJoint.mjJNT_FREE)
        if len(free) == 0:
            raise ValueError("the model has no free joint: no base for the camera to track")
        return int(self.model.jnt_qposadr[free[0]])

    def _frame_robot(self) -> None:
        """Camera distance and height from the robot's bounding box at its start (keyframe 0, else ``qpos0``)."""
        if self.model.nkey:
            mujoco.mj_resetDataKeyframe(self.model, self.data, 0)
        mujoco.mj_forward(self.model, self.data)
        robot = self.model.geom_bodyid > 0
        radius = self.model.geom_rbound[robot][:, None]
        low = (self.data.geom_xpos[robot] - radius).min(axis=0)
        high = (self.data.geom_xpos[robot] + radius).max(axis=0)
        self.look_height = float(low[2] + high[2]) / 2.0  # fixed, so that the base's bobbing shows
        self.camera.distance = FRAMING * float(max(high[2] - low[2], *(high[:2] - low[:2])))

    def frame(self, qpos: np.ndarray, new_episode: bool = False) -> np.ndarray:
        """The picture ``(height, width, 3)`` uint8 of the world in state ``qpos``."""
        self.data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)  # the light follows the centre of mass
        base = qpos[self.free_joint_qpos : self.free_joint_qpos + 7]
        yaw = heading(base[3:7])
        if self.smoothed_heading is None or new_episode:
            self.smoothed_heading = yaw
        else:  # along the shorter way round
            self.smoothed_heading += self.turn * math.remainder(yaw - self.smoothed_heading, 2.0 * math.pi)
        self.camera.lookat[:] = (base[0], base[1], self.look_height)
        self.camera.azimuth = math.degrees(self.smoothed_heading) + self.view_azimuth
        self.renderer.update_scene(self.data, self.camera, self.option)
        return self.renderer.render()

    def close(self) -> None:
        self.renderer.close()
