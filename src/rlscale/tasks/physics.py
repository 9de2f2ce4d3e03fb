"""Which MuJoCo engine steps a MuJoCo task, and the settings the engines share.

Two engines run the same MJCF: MuJoCo Warp (the default; :mod:`rlscale.tasks.mjwarp`, extra ``rlscale[warp]``),
whose MDP is torch, and MJX (:mod:`rlscale.tasks.mjx`, extra ``rlscale[mjx]``), whose MDP is JAX. This module imports
neither, so that the registry can list the tasks and refuse a missing engine in one line on a base install.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from annotated_types import Ge

from rlscale.tasks.base import TaskCfg

if TYPE_CHECKING:
    import mujoco

ENGINE_MODULES = {"warp": "mujoco_warp", "mjx": "mujoco.mjx"}
"""Physics engine → the module it needs."""
INSTALL_HINTS = {"warp": "pip install 'rlscale[warp]'", "mjx": "pip install 'rlscale[mjx]'"}
ENGINE_NAMES = {"warp": "MuJoCo Warp", "mjx": "MuJoCo MJX and JAX"}


class PhysicsUnavailableError(ImportError):
    """Raised when a MuJoCo task is built without its engine's extra installed."""


class PhysicsCapacityError(RuntimeError):
    """A world needed more contacts or constraint rows than its buffers hold; the message is one line naming the
    setting to raise."""


@dataclass(kw_only=True)
class MujocoTaskCfg(TaskCfg):
    """Settings shared by the MuJoCo tasks, whichever engine steps them."""

    physics: str = "warp"
    """The engine: ``warp`` (MuJoCo Warp, torch MDP) or ``mjx`` (MJX, JAX MDP)."""
    contacts_per_world: Annotated[int, Ge(1)] | None = None
    """MuJoCo Warp's contact capacity per world; None derives it from the model (every pair that can touch, times
    the contacts such a pair makes). A run that overflows it stops with one line naming this field."""
    constraints_per_world: Annotated[int, Ge(1)] | None = None
    """MuJoCo Warp's constraint-row capacity per world; None derives it from the model (joint limits, equality and
    friction rows, and the rows of the contact capacity)."""
    solver_iterations: Annotated[int, Ge(1)] | None = None
    """Iterations of the constraint solver per physics step; None keeps the model file's own (the Go1's task config
    sets 3). More cost time per step and stiffen contacts that the cap leaves soft."""
    jax_cache_dir: str | None = None
    """JAX persistent compilation cache folder (MJX); None leaves JAX's own setting (``JAX_COMPILATION_CACHE_DIR``).
    MuJoCo Warp keeps its kernels in ``WARP_CACHE_PATH`` (Warp's own variable; default ``~/.cache/warp``)."""

    def apply_solver_options(self, model: mujoco.MjModel) -> None:
        """Set the physics step and the solver settings on ``model`` (a ``mujoco.MjModel``), for either engine."""
        model.opt.timestep = self.sim_dt
        if self.solver_iterations is not None:
            model.opt.iterations = self.solver_iterations

    def __post_init__(self) -> None:
        if self.physics not in ENGINE_MODULES:
            raise ValueError(f"physics {self.physics!r}: one of {', '.join(ENGINE_MODULES)}")


def engine_installed(physics: str) -> bool:
    try:
        return importlib.util.find_spec(ENGINE_MODULES[physics]) is not None
    except ImportError:  # find_spec imports the parent package, absent without the extra
        return False


def require_engine(task_id: str, physics: str) -> None:
    """Raise one clear line if the engine ``physics`` is not installed."""
    if not engine_installed(physics):
        raise PhysicsUnavailableError(
            f"{task_id} with physics={physics} needs {ENGINE_NAMES[physics]}: {INSTALL_HINTS[physics]}"
        )


def require_any_engine(task_id: str) -> None:
    """Raise one clear line if no MuJoCo engine is installed (the registry's check, before the config is known)."""
    if not any(map(engine_installed, ENGINE_MODULES)):
        raise PhysicsUnavailableError(f"{task_id} needs MuJoCo Warp: {INSTALL_HINTS['warp']}")
