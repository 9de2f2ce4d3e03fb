"""Task registry: a new task is one module plus one :func:`register_task` call."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import yaml

from rlscale.tasks.base import TaskCfg, VecTask

RL_LIBRARIES = ("rsl_rl", "rl_games", "skrl")


@dataclass(frozen=True)
class TaskSpec:
    """What the registry knows about one task."""

    task_id: str
    task_class: Callable[[TaskCfg], VecTask]
    """The task's class, or a factory that imports a heavy backend only when called."""
    cfg_class: type[TaskCfg]
    agent_cfg_files: dict[str, str]
    """Library name → YAML file name, relative to the ``agents/`` folder next to the task's module."""
    agent_package: str
    """Package holding that ``agents/`` folder."""
    check_available: Callable[[], None] | None = None
    """Raises ImportError, with one line saying what to install, when the task's optional backend is missing."""
    own_gpu_per_rank: bool = False
    """The backend opens a context on every GPU it sees (JAX), so each rank of a CUDA job is shown only its own."""


_REGISTRY: dict[str, TaskSpec] = {}


class UnknownTaskError(ValueError):
    """Raised for a task id that is not registered."""


def register_task(
    task_id: str,
    task_class: Callable[[TaskCfg], VecTask],
    cfg_class: type[TaskCfg],
    agent_cfg_files: dict[str, str],
    package: str,
    check_available: Callable[[], None] | None = None,
    own_gpu_per_rank: bool = False,
) -> None:
    """Register a task under a case-sensitive id; ``check_available`` lets ``rlscale train`` refuse it in one line
    when an optional backend is missing, and ``own_gpu_per_rank`` is :attr:`TaskSpec.own_gpu_per_rank`.

    Raises:
        ValueError: if the id is taken or an agent config names an unknown library.
    """
    if task_id in _REGISTRY:
        raise ValueError(f"task {task_id!r} is already registered")
    unknown = set(agent_cfg_files) - set(RL_LIBRARIES)
    if unknown:
        raise ValueError(f"task {task_id!r}: agent configs for unknown libraries {sorted(unknown)}")
    _REGISTRY[task_id] = TaskSpec(
        task_id, task_class, cfg_class, dict(agent_cfg_files), package, check_available, own_gpu_per_rank
    )


def list_tasks() -> list[str]:
    """Registered task ids, sorted."""
    _load_builtin_tasks()
    return sorted(_REGISTRY)


def get_spec(task_id: str) -> TaskSpec:
    """Look a task up by its exact id.

    Raises:
        UnknownTaskError: listing the known ids.
    """
    _load_builtin_tasks()
    try:
        return _REGISTRY[task_id]
    except KeyError:
        raise UnknownTaskError(f"unknown task {task_id!r}; known tasks: {', '.join(sorted(_REGISTRY))}") from None


def make_task(task_id: str, **cfg_overrides) -> VecTask:
    """Build a task from its default config with ``cfg_overrides`` applied."""
    spec = get_spec(task_id)
    return spec.task_class(spec.cfg_class(**cfg_overrides))


def load_agent_cfg(task_id: str, rl_library: str) -> dict:
    """A fresh copy of the task's default agent config for one library.

    Raises:
        ValueError: if the task has no config for that library.
    """
    spec = get_spec(task_id)
    if rl_library not in spec.agent_cfg_files:
        raise ValueError(f"task {task_id!r} has no agent config for {rl_library!r}")
    text = resources.files(spec.agent_package).joinpath("agents", spec.agent_cfg_files[rl_library]).read_text()
    return copy.deepcopy(yaml.safe_load(text))


def _load_builtin_tasks() -> None:
    # Importing the task packages runs their register_task calls; deferred so `import rlscale` stays light.
    import rlscale.tasks.ant  # noqa: F401
    import rlscale.tasks.cartpole  # noqa: F401
