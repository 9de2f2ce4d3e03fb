"""The library paths the multi-process tests train: each RL library on torch, and skrl on JAX.

skrl's JAX backend is an optional install (``rlscale[jax]``), like the W&B tracker: its runs are marked ``extras``, so
``make test-extras`` runs them and ``make test`` does not.
"""

from __future__ import annotations

import pytest

TORCH_PATHS = [("rsl_rl", "torch"), ("rl_games", "torch"), ("skrl", "torch")]
PATHS = [*TORCH_PATHS, pytest.param("skrl", "jax", marks=pytest.mark.extras, id="skrl-jax")]
"""``(library, framework)`` pairs for ``pytest.mark.parametrize(("library", "framework"), PATHS)``."""
PATH_PARAMS = [pytest.param(path, id="-".join(path)) for path in TORCH_PATHS] + [
    pytest.param(("skrl", "jax"), marks=pytest.mark.extras, id="skrl-jax")
]
"""The same paths as one ``(library, framework)`` value each, for a parametrized fixture's ``params``."""
