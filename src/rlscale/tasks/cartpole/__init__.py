"""Isaac Lab's Cartpole tasks (manager-based and direct) on analytic, batched PyTorch physics."""

from __future__ import annotations

from rlscale.tasks.cartpole.env import CartpoleCfg, CartpoleDirectCfg, DirectCartpole, ManagerCartpole
from rlscale.tasks.registry import register_task

__all__ = ["CartpoleCfg", "CartpoleDirectCfg", "DirectCartpole", "ManagerCartpole"]

register_task(
    "Isaac-Cartpole",
    ManagerCartpole,
    CartpoleCfg,
    {"rsl_rl": "rsl_rl_ppo.yaml", "rl_games": "rl_games_ppo.yaml", "skrl": "skrl_ppo.yaml"},
    package=__name__,
)
# The direct task has its own config class only because its reset ranges differ (pole angle only).
register_task(
    "Isaac-Cartpole-Direct",
    DirectCartpole,
    CartpoleDirectCfg,
    {"rsl_rl": "rsl_rl_ppo_direct.yaml", "rl_games": "rl_games_ppo_direct.yaml", "skrl": "skrl_ppo_direct.yaml"},
    package=__name__,
)
