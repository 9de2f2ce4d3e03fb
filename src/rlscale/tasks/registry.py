"""Task registry: a new task is one module plus one :func:`register_task` call.

rlscale's own tasks are registered on first use from their packages' ``TASKS`` (:func:`register_task`'s arguments):
the registry imports those packages and they import nothing from it, so there is no import cycle.

Torch-free: a task is registered by the import paths of its class and config (Isaac Lab's ``entry_point`` strings),
which are imported only when something asks for them, so ids are listed and checked (``--dry_run``) without torch.
"""

from __future__ import annotations

import copy
import difflib
import functools
import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import yaml

from rlscale.tasks.overrides import with_overrides

if TYPE_CHECKING:
    from rlscale.tasks.base import TaskCfg, VecTask

RL_LIBRARIES = ("rsl_rl", "rl_games", "skrl")


@dataclass(frozen=True)
class TaskSpec:
    """What the registry knows about one task."""

    task_id: str
    entry_point: str
    """``module:attribute`` of the task's class, or of a factory that imports a heavy backend only when called."""
    cfg_entry_point: str
    """``module:attribute`` of the task's :class:`~rlscale.tasks.base.TaskCfg` subclass."""
    agent_cfg_files: dict[str, str]
    """Library name → YAML file name, relative to the ``agents/`` folder next to the task's module."""
    agent_package: str
    """Package holding that ``agents/`` folder."""
    check_available: Callable[[], None] | None = None
    """Raises ImportError, with one line saying what to install, when the task's optional backend is missing."""
    own_gpu_per_rank: bool = False
    """The backend opens a context on every GPU it sees (JAX), so each rank of a CUDA job is shown only its own."""

    @property
    def task_class(self) -> Callable[[TaskCfg], VecTask]:
        """The task's class or factory (importing its module, and so torch)."""
        return _import(self.entry_point)

    @property
    def cfg_class(self) -> type[TaskCfg]:
        """The task's config class (importing its module, and so torch)."""
        return _import(self.cfg_entry_point)


_REGISTRY: dict[str, TaskSpec] = {}
_ALIASES: dict[str, str] = {}
"""Isaac Lab id → the rlscale task that reproduces it."""
_CLOSEST: dict[str, tuple[str, str]] = {}
"""Isaac Lab id that rlscale does not reproduce → (the closest rlscale task, why it is only the closest)."""


class UnknownTaskError(ValueError):
    """Raised for a task id that is neither registered nor an alias; the message is one line naming the way out."""


def register_task(
    task_id: str,
    entry_point: str,
    cfg_entry_point: str,
    agent_cfg_files: dict[str, str],
    package: str,
    check_available: Callable[[], None] | None = None,
    own_gpu_per_rank: bool = False,
    aliases: Iterable[str] = (),
    closest_for: Mapping[str, str] | None = None,
) -> None:
    """Register a task under a case-sensitive id.

    Args:
        task_id: The canonical id, as listed and as named in run directories.
        entry_point: :attr:`TaskSpec.entry_point`.
        cfg_entry_point: :attr:`TaskSpec.cfg_entry_point`.
        agent_cfg_files: :attr:`TaskSpec.agent_cfg_files`.
        package: :attr:`TaskSpec.agent_package`.
        check_available: Lets ``rlscale train`` refuse the task in one line when an optional backend is missing.
        own_gpu_per_rank: :attr:`TaskSpec.own_gpu_per_rank`.
        aliases: Isaac Lab ids of the task this one reproduces (``Isaac-Cartpole-v0``), accepted wherever an id is.
        closest_for: Isaac Lab ids that rlscale does not reproduce, for which this task is the closest, each with the
            reason it is only the closest; they are refused with that line.

    Raises:
        ValueError: if an id or alias is taken, an entry point is not ``module:attribute`` or an agent config names
            an unknown library.
    """
    closest_for = dict(closest_for or {})
    for name in (task_id, *aliases, *closest_for):
        if name in _REGISTRY or name in _ALIASES or name in _CLOSEST:
            raise ValueError(f"task id {name!r} is already registered")
    for path in (entry_point, cfg_entry_point):
        if not all(path.partition(":")[::2]):
            raise ValueError(f"task {task_id!r}: entry point {path!r} is not module:attribute")
    unknown = set(agent_cfg_files) - set(RL_LIBRARIES)
    if unknown:
        raise ValueError(f"task {task_id!r}: agent configs for unknown libraries {sorted(unknown)}")
    _REGISTRY[task_id] = TaskSpec(
        task_id, entry_point, cfg_entry_point, dict(agent_cfg_files), package, check_available, own_gpu_per_rank
    )
    _ALIASES.update(dict.fromkeys(aliases, task_id))
    _CLOSEST.update((name, (task_id, reason)) for name, reason in closest_for.items())


def list_tasks() -> list[str]:
    """Registered task ids, sorted (aliases left out)."""
    _register_builtin_tasks()
    return sorted(_REGISTRY)


def resolve_task_id(task_id: str) -> str:
    """The registered id that ``task_id`` names: itself, or the task an Isaac Lab alias stands for.

    Raises:
        UnknownTaskError: for an Isaac Lab task rlscale does not reproduce, naming the closest one; for any other id,
            naming the nearest spelling and the known ids.
    """
    _register_builtin_tasks()
    if task_id in _REGISTRY:
        return task_id
    if task_id in _ALIASES:
        return _ALIASES[task_id]
    if task_id in _CLOSEST:
        closest, reason = _CLOSEST[task_id]
        raise UnknownTaskError(f"unknown task {task_id!r}: {reason}; closest: {closest} (`rlscale list_tasks`)")
    accepted = {name.lower(): name for name in (*_REGISTRY, *_ALIASES)}
    close = difflib.get_close_matches(task_id.lower(), accepted, n=1)
    hint = f"did you mean {accepted[close[0]]!r}? " if close else ""
    raise UnknownTaskError(f"unknown task {task_id!r}; {hint}known tasks: {', '.join(sorted(_REGISTRY))}")


def get_spec(task_id: str) -> TaskSpec:
    """Look a task up by its id or an alias.

    Raises:
        UnknownTaskError: from :func:`resolve_task_id`.
    """
    return _REGISTRY[resolve_task_id(task_id)]


def make_task(task_id: str, **cfg_overrides: Any) -> VecTask:
    """Build a task from its default config with ``cfg_overrides`` applied (a dotted key sets a nested config's
    field, as :func:`rlscale.tasks.overrides.field_value` reads them)."""
    spec = get_spec(task_id)
    return spec.task_class(with_overrides(spec.cfg_class(), cfg_overrides))


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


def _import(entry_point: str) -> Any:
    module, _, attribute = entry_point.partition(":")
    return getattr(importlib.import_module(module), attribute)


@functools.cache
def _register_builtin_tasks() -> None:
    # Their modules import nothing heavy; a task's class is imported only when asked for.
    from rlscale.tasks import ant, cartpole

    for task in (*ant.TASKS, *cartpole.TASKS):
        register_task(**task)
