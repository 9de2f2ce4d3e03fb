"""The project's own MJCF quadruped, and what both engines' Ant tasks share of it (:class:`AntMdp`): a torso sphere
and four two-segment legs, 8 hinge joints driven by torque motors.

Kept small for MJX compile time and step cost: capsule and sphere geoms only, and contacts only between the floor
and the four lower legs (``contype``/``conaffinity`` bits): four capsule-plane pairs, one collision function to
compile. The torso needs none: it touches the floor only below the termination height or when flipped.
The physics step (``timestep``) is set from the task config, not here.
"""

from __future__ import annotations

from rlscale.tasks.ant.cfg import AntCfg

ANT_MJCF = """
<mujoco model="rlscale_ant">
  <compiler angle="degree" inertiafromgeom="true"/>
  <option iterations="4" ls_iterations="8" cone="pyramidal">
    <flag eulerdamp="disable"/>
  </option>
  <default>
    <joint limited="true" damping="1" armature="0.01"/>
    <geom contype="0" conaffinity="0" density="5" friction="1 0.5 0.5" condim="3"/>
    <motor ctrllimited="true" ctrlrange="-1 1" gear="15"/>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1" conaffinity="1"/>
    <body name="torso" pos="0 0 0.55">
      <freejoint name="root"/>
      <geom name="torso" type="sphere" size="0.25"/>
      <body name="front_left" pos="0.2 0.2 0">
        <joint name="hip_fl" type="hinge" axis="0 0 1" range="-40 40"/>
        <geom type="capsule" fromto="0 0 0 0.2 0.2 0" size="0.08"/>
        <body pos="0.2 0.2 0">
          <joint name="knee_fl" type="hinge" axis="-1 1 0" range="-30 30"/>
          <geom type="capsule" fromto="0 0 0 0.2 0.2 -0.4" size="0.08" contype="1"/>
        </body>
      </body>
      <body name="front_right" pos="-0.2 0.2 0">
        <joint name="hip_fr" type="hinge" axis="0 0 1" range="-40 40"/>
        <geom type="capsule" fromto="0 0 0 -0.2 0.2 0" size="0.08"/>
        <body pos="-0.2 0.2 0">
          <joint name="knee_fr" type="hinge" axis="-1 -1 0" range="-30 30"/>
          <geom type="capsule" fromto="0 0 0 -0.2 0.2 -0.4" size="0.08" contype="1"/>
        </body>
      </body>
      <body name="back_left" pos="-0.2 -0.2 0">
        <joint name="hip_bl" type="hinge" axis="0 0 1" range="-40 40"/>
        <geom type="capsule" fromto="0 0 0 -0.2 -0.2 0" size="0.08"/>
        <body pos="-0.2 -0.2 0">
          <joint name="knee_bl" type="hinge" axis="1 -1 0" range="-30 30"/>
          <geom type="capsule" fromto="0 0 0 -0.2 -0.2 -0.4" size="0.08" contype="1"/>
        </body>
      </body>
      <body name="back_right" pos="0.2 -0.2 0">
        <joint name="hip_br" type="hinge" axis="0 0 1" range="-40 40"/>
        <geom type="capsule" fromto="0 0 0 0.2 -0.2 0" size="0.08"/>
        <body pos="0.2 -0.2 0">
          <joint name="knee_br" type="hinge" axis="1 1 0" range="-30 30"/>
          <geom type="capsule" fromto="0 0 0 0.2 -0.2 -0.4" size="0.08" contype="1"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="hip_fl"/><motor joint="knee_fl"/>
    <motor joint="hip_fr"/><motor joint="knee_fr"/>
    <motor joint="hip_bl"/><motor joint="knee_bl"/>
    <motor joint="hip_br"/><motor joint="knee_br"/>
  </actuator>
</mujoco>
"""


class AntMdp:
    """The Ant's MDP terms as both engines name them: a mixin of :class:`rlscale.tasks.ant.env.AntTask` (MuJoCo Warp)
    and :class:`rlscale.tasks.ant.mjx_env.AntTask` (MJX)."""

    mjcf = ANT_MJCF
    reward_terms = ("track_lin_vel_x", "alive", "termination", "energy", "action_rate")
    termination_terms = ("torso_height", "flipped")
    metric_terms = ("forward_speed",)
    observation_dims = {"policy": 34}
    cfg: AntCfg

    def reward_weights(self) -> tuple[float, ...]:
        c = self.cfg
        return (c.rew_track_lin_vel_x, c.rew_alive, c.rew_termination, c.rew_energy, c.rew_action_rate)
