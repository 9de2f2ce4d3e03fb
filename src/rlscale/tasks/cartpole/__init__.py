"""Isaac Lab's Cartpole tasks (manager-based and direct) on analytic, batched PyTorch physics (:mod:`.env`).

Registering them imports neither :mod:`.env` nor torch. They reproduce Isaac Lab's MDPs, so Isaac Lab 2.x's
versioned ids are accepted as aliases.
"""

from __future__ import annotations

from rlscale.tasks.registry import register_task

register_task(
    "Isaac-Cartpole",
    "rlscale.tasks.cartpole.env:ManagerCartpole",
    "rlscale.tasks.cartpole.env:CartpoleCfg",
    {"rsl_rl": "rsl_rl_ppo.yaml", "rl_games": "rl_games_ppo.yaml", "skrl": "skrl_ppo.yaml"},
    package=__name__,
    aliases=("Isaac-Cartpole-v0",),
)
# The direct task has its own config class only because its reset ranges differ (pole angle only).
register_task(
    "Isaac-Cartpole-Direct",
    "rlscale.tasks.cartpole.env:DirectCartpole",
    "rlscale.tasks.cartpole.env:CartpoleDirectCfg",
    {"rsl_rl": "rsl_rl_ppo_direct.yaml", "rl_games": "rl_games_ppo_direct.yaml", "skrl": "skrl_ppo_direct.yaml"},
    package=__name__,
    aliases=("Isaac-Cartpole-Direct-v0",),
)
