"""``Rlscale-Ant``: a quadruped locomotion task on MuJoCo MJX (extra ``rlscale[mjx]``).

Registered on every install; JAX and MuJoCo are imported only when the task is built, so listing tasks stays light
and a base install fails with one line naming the extra.
"""

from __future__ import annotations

from rlscale.tasks.ant.cfg import AntCfg
from rlscale.tasks.base import VecTask
from rlscale.tasks.mjx import require_mjx
from rlscale.tasks.registry import register_task

__all__ = ["AntCfg", "make_ant"]


def make_ant(cfg: AntCfg) -> VecTask:
    """Build the task, importing the MJX backend on first use."""
    require_mjx("Rlscale-Ant")
    from rlscale.tasks.ant.env import AntTask

    return AntTask(cfg)


register_task(
    "Rlscale-Ant",
    make_ant,
    AntCfg,
    {"rsl_rl": "rsl_rl_ppo.yaml", "rl_games": "rl_games_ppo.yaml", "skrl": "skrl_ppo.yaml"},
    package=__name__,
    check_available=lambda: require_mjx("Rlscale-Ant"),
    own_gpu_per_rank=True,
)
