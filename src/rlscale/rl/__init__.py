"""The RL libraries rlscale trains with: :data:`ADAPTERS` is the one list of them, with what rlscale knows of each.

Each library has an adapter module ``rlscale.rl.<name>`` exposing ``rollout_length``, ``default_iterations``,
``train``, ``checkpoint_iteration`` and ``find_checkpoints`` (where that library keeps its checkpoints in a run
directory). Adapters are imported on demand: importing skrl creates the process group, and rl_games changes global
torch flags. This module imports neither torch nor any library, so the launcher's ``--dry_run`` can read it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Library:
    """What rlscale knows of one RL library besides its adapter.

    Args:
        distribution: Its pip distribution, whose installed version manifests and bundles record.
        agent_entry_points: Isaac Lab's ``--agent`` entry-point names that name its default agent config (the task's
            PPO), the first being the one to suggest.
        ml_frameworks: ML frameworks it trains with (``--ml_framework``), the default first.
    """

    distribution: str
    agent_entry_points: tuple[str, ...]
    ml_frameworks: tuple[str, ...] = ("torch",)


ADAPTERS = {
    "rsl_rl": Library("rsl-rl-lib", ("rsl_rl_cfg_entry_point",)),
    "rl_games": Library("rl-games", ("rl_games_cfg_entry_point",)),
    "skrl": Library("skrl", ("skrl_cfg_entry_point", "skrl_ppo_cfg_entry_point"), ("torch", "jax")),
}
"""Library name (``--rl_library``, the adapter's module name) → :class:`Library`, in the order help text lists them."""


def load_adapter(rl_library: str) -> ModuleType:
    """Import the adapter module of one library."""
    if rl_library not in ADAPTERS:
        raise KeyError(rl_library)
    return importlib.import_module(f"{__name__}.{rl_library}")
