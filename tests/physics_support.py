"""What the MuJoCo tests share: which engines are installed, and XLA's cheap CPU optimisation level for MJX
(``FAST_COMPILE``, which changes compile time only, not results). The ``jax_env`` fixture is in conftest.py."""

from __future__ import annotations

import importlib.util

import pytest

HAS_WARP = importlib.util.find_spec("mujoco_warp") is not None
HAS_MJX = importlib.util.find_spec("mujoco") is not None and importlib.util.find_spec("mujoco.mjx") is not None
requires_warp = pytest.mark.skipif(not HAS_WARP, reason="MuJoCo Warp not installed (pip install 'rlscale[warp]')")
requires_mjx = pytest.mark.skipif(not HAS_MJX, reason="mujoco.mjx not installed (pip install 'rlscale[mjx]')")
FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
