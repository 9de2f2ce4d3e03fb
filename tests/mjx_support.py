"""What the MJX tests share: whether MJX is installed, and XLA's cheap CPU optimisation level (``FAST_COMPILE``,
which changes compile time only, not results). The ``jax_env`` fixture is in conftest.py."""

from __future__ import annotations

import importlib.util

import pytest

HAS_MJX = importlib.util.find_spec("mujoco") is not None and importlib.util.find_spec("mujoco.mjx") is not None
requires_mjx = pytest.mark.skipif(not HAS_MJX, reason="mujoco.mjx not installed (pip install 'rlscale[mjx]')")
FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
