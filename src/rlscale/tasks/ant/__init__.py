"""``Rlscale-Ant``: a quadruped locomotion task on MuJoCo Warp (extra ``rlscale[warp]``; MJX with ``env.physics=mjx``).

Registered on every install, importing neither torch, Warp nor JAX: the engine is imported only when the task is
built, so listing tasks stays light and a base install fails with one line naming the extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlscale.tasks.footprint import EnvFootprint

if TYPE_CHECKING:
    from rlscale.tasks.ant.cfg import AntCfg
    from rlscale.tasks.base import VecTask

__all__ = ["TASKS", "check_physics", "make_ant"]

FOOTPRINT = EnvFootprint(observations=34, actions=8, state_bytes=28 * 1024)
"""One world: MuJoCo Warp's buffers of it (contacts and constraint rows at the model's capacity) and the MDP's, about
31 KiB a world built and stepped on the CPU."""
NOT_ISAAC_ANT = "rlscale does not reproduce Isaac Lab's Ant (Rlscale-Ant is a quadruped of its own, see docs/tasks.md)"
NO_DEXTEROUS_TASK = "rlscale has no dexterous-manipulation task"


def check_physics() -> None:
    """Raise one line naming the extra when no MuJoCo engine is installed."""
    from rlscale.tasks.physics import require_any_engine

    require_any_engine("Rlscale-Ant")


def make_ant(cfg: AntCfg) -> VecTask:
    """Build the task on the config's engine, importing it on first use."""
    from rlscale.tasks.physics import require_engine

    require_engine("Rlscale-Ant", cfg.physics)
    if cfg.physics == "mjx":
        from rlscale.tasks.ant.mjx_env import AntTask
    else:
        from rlscale.tasks.ant.env import AntTask
    return AntTask(cfg)


TASKS = (
    {
        "task_id": "Rlscale-Ant",
        "entry_point": "rlscale.tasks.ant:make_ant",
        "cfg_entry_point": "rlscale.tasks.ant.cfg:AntCfg",
        "agent_cfg_files": {"rsl_rl": "rsl_rl_ppo.yaml", "rl_games": "rl_games_ppo.yaml", "skrl": "skrl_ppo.yaml"},
        "package": __name__,
        "check_available": check_physics,
        "footprint": FOOTPRINT,
        "closest_for": {
            **dict.fromkeys(("Isaac-Ant", "Isaac-Ant-v0", "Isaac-Ant-Direct", "Isaac-Ant-Direct-v0"), NOT_ISAAC_ANT),
            **dict.fromkeys(
                ("Isaac-Reorient-KukaAllegro", "Isaac-Dexsuite-Kuka-Allegro-Reorient-v0"), NO_DEXTEROUS_TASK
            ),
        },
    },
)
"""The registry's :func:`~rlscale.tasks.registry.register_task` arguments (the registry imports this package, not the
other way round)."""
