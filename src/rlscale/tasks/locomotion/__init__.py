"""Velocity-tracking robots on MuJoCo Warp (extra ``rlscale[warp]``; MJX with ``env.physics=mjx``):
``Rlscale-Go1-Flat`` and ``Rlscale-G1-Flat``, the closest rlscale tasks for Isaac Lab's
``Isaac-Velocity-Flat-Unitree-Go1-v0`` and ``Isaac-Velocity-Flat-G1-v0``.

Registered on every install, importing neither torch, Warp nor JAX (as :mod:`rlscale.tasks.ant`); docs/robots.md.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from rlscale.tasks.footprint import EnvFootprint

if TYPE_CHECKING:
    from rlscale.tasks.base import VecTask
    from rlscale.tasks.locomotion.cfg import G1FlatCfg, Go1FlatCfg

__all__ = ["TASKS", "check_physics", "make_g1_flat", "make_go1_flat"]

NOT_ISAAC_VELOCITY = (
    "rlscale does not reproduce Isaac Lab's velocity task exactly (same terms and weights on MuJoCo, contacts read "
    "from the geometry; docs/robots.md)"
)
NO_ROUGH_TERRAIN = "rlscale has no rough terrain (flat ground only; docs/robots.md)"


def check_physics(task_id: str) -> None:
    """Raise one line naming the extra when no MuJoCo engine is installed."""
    from rlscale.tasks.physics import require_any_engine

    require_any_engine(task_id)


def make_go1_flat(cfg: Go1FlatCfg) -> VecTask:
    """Build ``Rlscale-Go1-Flat`` on the config's engine, importing it on first use."""
    from rlscale.tasks.physics import require_engine

    require_engine("Rlscale-Go1-Flat", cfg.physics)
    if cfg.physics == "mjx":
        from rlscale.tasks.locomotion.mjx_env import Go1FlatTask
    else:
        from rlscale.tasks.locomotion.env import Go1FlatTask
    return Go1FlatTask(cfg)


def make_g1_flat(cfg: G1FlatCfg) -> VecTask:
    """Build ``Rlscale-G1-Flat`` on the config's engine, importing it on first use."""
    from rlscale.tasks.physics import require_engine

    require_engine("Rlscale-G1-Flat", cfg.physics)
    if cfg.physics == "mjx":
        from rlscale.tasks.locomotion.mjx_env import G1FlatTask
    else:
        from rlscale.tasks.locomotion.env import G1FlatTask
    return G1FlatTask(cfg)


def _robot(task_id: str, robot: str, isaac_robot: str, maker: str, cfg: str, footprint: EnvFootprint) -> dict:
    """The registry's arguments for one robot: its flat task, its footprint, and the Isaac Lab ids it is the closest
    for."""
    flat = (f"Isaac-Velocity-Flat-{isaac_robot}-v0", f"Isaac-Velocity-Flat-{isaac_robot}-Play-v0")
    rough = (f"Isaac-Velocity-Rough-{isaac_robot}-v0", f"Isaac-Velocity-Rough-{isaac_robot}-Play-v0")
    return {
        "task_id": task_id,
        "entry_point": f"rlscale.tasks.locomotion:{maker}",
        "cfg_entry_point": f"rlscale.tasks.locomotion.cfg:{cfg}",
        "agent_cfg_files": {library: f"{robot}_{library}_ppo.yaml" for library in ("rsl_rl", "rl_games", "skrl")},
        "package": __name__,
        "check_available": functools.partial(check_physics, task_id),
        "footprint": footprint,
        "closest_for": {**dict.fromkeys(flat, NOT_ISAAC_VELOCITY), **dict.fromkeys(rough, NO_ROUGH_TERRAIN)},
    }


# One world: MuJoCo Warp's buffers of it (contacts and constraint rows at the model's capacity) and the MDP's, built
# and stepped on the CPU: about 40 KiB for the Go1, 135 KiB for the G1.
TASKS = (
    _robot("Rlscale-Go1-Flat", "go1", "Unitree-Go1", "make_go1_flat", "Go1FlatCfg", EnvFootprint(48, 12, 36 * 1024)),
    _robot("Rlscale-G1-Flat", "g1", "G1", "make_g1_flat", "G1FlatCfg", EnvFootprint(99, 29, 128 * 1024)),
)
"""The registry's :func:`~rlscale.tasks.registry.register_task` arguments."""
