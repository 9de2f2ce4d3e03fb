"""``Pendulum-Swingup``: gymnasium's Pendulum-v1 as an rlscale task, registered when rlscale imports this module.

Importing it imports no torch: rlscale lists and checks task ids without it, and imports :mod:`.env` only to build
the task.
"""

from rlscale.tasks import register_task

register_task(
    task_id="Pendulum-Swingup",
    entry_point="pendulum_task.env:PendulumSwingup",
    cfg_entry_point="pendulum_task.env:PendulumCfg",
    agent_cfg_files={"rsl_rl": "rsl_rl_ppo.yaml"},  # rl_games and skrl: rlscale's generic defaults
    package=__name__,
)
