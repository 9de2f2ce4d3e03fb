"""MuJoCo XLA (MJX) physics behind the :class:`~rlscale.tasks.base.VecTask` interface (extra ``rlscale[mjx]``).

This module imports neither JAX nor MuJoCo, so that the registry can list MJX tasks on a base install; the backend
(:mod:`rlscale.tasks.mjx.backend`) is imported only when a task is built, through :func:`require_mjx`, and the
renderer (:mod:`rlscale.tasks.mjx.render`) only when a video is made.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from rlscale.tasks.base import TaskCfg

INSTALL_HINT = "pip install 'rlscale[mjx]'"

CAMERA_VIEWS = {"side": 90.0, "quarter": 135.0, "front": 180.0, "behind": 0.0}
"""Views of :mod:`rlscale.tasks.mjx.render`'s camera, which tracks the base: the camera's azimuth from the base's
heading in degrees (``side`` looks at the base's right side, ``quarter`` at its front right)."""


class MjxUnavailableError(ImportError):
    """Raised when an MJX task is built without the ``mjx`` extra installed."""


@dataclass(kw_only=True)
class MjxTaskCfg(TaskCfg):
    """Settings shared by MJX tasks."""

    jax_cache_dir: str | None = None
    """JAX persistent compilation cache folder; None leaves JAX's own setting (``JAX_COMPILATION_CACHE_DIR``)."""


def require_mjx(task_id: str) -> None:
    """Raise one clear line if ``mujoco.mjx`` (and so JAX) is not installed."""
    try:
        missing = importlib.util.find_spec("mujoco.mjx") is None
    except ImportError:  # find_spec imports the parent package, absent without the extra
        missing = True
    if missing:
        raise MjxUnavailableError(f"{task_id} needs MuJoCo MJX and JAX: {INSTALL_HINT}")
