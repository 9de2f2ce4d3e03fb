"""One adapter per RL library; each exposes ``rollout_length``, ``default_iterations``, ``train``,
``checkpoint_iteration`` and ``find_checkpoints`` (where that library keeps its checkpoints in a run directory).

Adapters are imported on demand: importing skrl creates the process group, and rl_games changes global torch flags.
"""

from __future__ import annotations

import importlib
from types import ModuleType

ADAPTERS = {"rsl_rl": "rlscale.rl.rsl_rl", "rl_games": "rlscale.rl.rl_games", "skrl": "rlscale.rl.skrl"}


def load_adapter(rl_library: str) -> ModuleType:
    """Import the adapter module of one library."""
    return importlib.import_module(ADAPTERS[rl_library])
