"""Isaac Lab's Cartpole tasks (manager-based and direct) on analytic, batched PyTorch physics (:mod:`.env`).

Registering them imports neither :mod:`.env` nor torch. They reproduce Isaac Lab's MDPs, so Isaac Lab 2.x's
versioned ids are accepted as aliases.
"""

from __future__ import annotations

from rlscale.tasks.footprint import EnvFootprint

FOOTPRINT = EnvFootprint(observations=4, actions=1, state_bytes=192)
"""Either task's env: its state, episode sums and one step's temporaries, about 200 bytes at the peak of building
and stepping a million envs on the CPU."""

TASKS = (
    {
        "task_id": "Isaac-Cartpole",
        "entry_point": "rlscale.tasks.cartpole.env:ManagerCartpole",
        "cfg_entry_point": "rlscale.tasks.cartpole.env:CartpoleCfg",
        "agent_cfg_files": {"rsl_rl": "rsl_rl_ppo.yaml", "rl_games": "rl_games_ppo.yaml", "skrl": "skrl_ppo.yaml"},
        "package": __name__,
        "aliases": ("Isaac-Cartpole-v0",),
        "footprint": FOOTPRINT,
    },
    # The direct task has its own config class only because its reset ranges differ (pole angle only).
    {
        "task_id": "Isaac-Cartpole-Direct",
        "entry_point": "rlscale.tasks.cartpole.env:DirectCartpole",
        "cfg_entry_point": "rlscale.tasks.cartpole.env:CartpoleDirectCfg",
        "agent_cfg_files": {
            "rsl_rl": "rsl_rl_ppo_direct.yaml",
            "rl_games": "rl_games_ppo_direct.yaml",
            "skrl": "skrl_ppo_direct.yaml",
        },
        "package": __name__,
        "aliases": ("Isaac-Cartpole-Direct-v0",),
        "footprint": FOOTPRINT,
    },
)
"""The registry's :func:`~rlscale.tasks.registry.register_task` arguments for each task (the registry imports this
package, not the other way round)."""
