"""``Rlscale-Ant``: a quadruped locomotion task on MuJoCo MJX (extra ``rlscale[mjx]``).

Registered on every install, importing neither torch nor JAX: the backend is imported only when the task is built,
so listing tasks stays light and a base install fails with one line naming the extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlscale.tasks.ant.cfg import AntCfg
    from rlscale.tasks.base import VecTask

__all__ = ["TASKS", "check_mjx", "make_ant"]

NOT_ISAAC_ANT = "rlscale does not reproduce Isaac Lab's Ant (Rlscale-Ant is a quadruped of its own, see docs/tasks.md)"
NO_DEXTEROUS_TASK = "rlscale has no dexterous-manipulation task"


def check_mjx() -> None:
    """Raise one line naming the extra when MuJoCo MJX is missing."""
    from rlscale.tasks.mjx import require_mjx  # imported here: rlscale.tasks.mjx imports torch

    require_mjx("Rlscale-Ant")


def make_ant(cfg: AntCfg) -> VecTask:
    """Build the task, importing the MJX backend on first use."""
    check_mjx()
    from rlscale.tasks.ant.env import AntTask

    return AntTask(cfg)


TASKS = (
    {
        "task_id": "Rlscale-Ant",
        "entry_point": "rlscale.tasks.ant:make_ant",
        "cfg_entry_point": "rlscale.tasks.ant.cfg:AntCfg",
        "agent_cfg_files": {"rsl_rl": "rsl_rl_ppo.yaml", "rl_games": "rl_games_ppo.yaml", "skrl": "skrl_ppo.yaml"},
        "package": __name__,
        "check_available": check_mjx,
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
