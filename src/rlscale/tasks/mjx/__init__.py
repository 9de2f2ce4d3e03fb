"""MuJoCo XLA (MJX) physics behind the :class:`~rlscale.tasks.base.VecTask` interface (``physics=mjx``, extra
``rlscale[mjx]``).

This module imports neither JAX nor MuJoCo; the backend (:mod:`rlscale.tasks.mjx.backend`) is imported only when a task
is built on MJX (:func:`rlscale.tasks.physics.require_engine` first), and the renderer (:mod:`rlscale.tasks.mjx.render`,
which draws any MuJoCo task) only when a video is made.
"""

from __future__ import annotations

INSTALL_HINT = "pip install 'rlscale[warp]'"
"""What installs MuJoCo (and the video writers) for rendering."""

CAMERA_VIEWS = {"side": 90.0, "quarter": 135.0, "front": 180.0, "behind": 0.0}
"""Views of :mod:`rlscale.tasks.mjx.render`'s camera, which tracks the base: the camera's azimuth from the base's
heading in degrees (``side`` looks at the base's right side, ``quarter`` at its front right)."""
