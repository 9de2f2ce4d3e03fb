"""Task registry: a new task is one module plus one :func:`register_task` call.

rlscale's own tasks are registered on first use from their packages' ``TASKS`` (:func:`register_task`'s arguments):
the registry imports those packages and they import nothing from it, so there is no import cycle.

Other packages' tasks come in as plug-ins (:mod:`.plugins`): a module that calls :func:`register_task` when imported,
named either in the id itself (``package.module:Task-Id``, gymnasium's ``make("module:Env-v0")`` convention) or by
an installed distribution's ``rlscale.tasks`` entry point, loaded on the first lookup.

Torch-free: a task is registered by the import paths of its class and config (Isaac Lab's ``entry_point`` strings),
which are imported only when something asks for them, so ids are listed and checked (``--dry_run``) without torch.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import yaml

from rlscale.argparsing import closest
from rlscale.tasks.footprint import EnvFootprint
from rlscale.tasks.overrides import with_overrides
from rlscale.tasks.plugins import (
    PluginSettingError,
    disable_hint,
    installed_plugins,
    one_line,
    source_of,
    split_qualified,
)

if TYPE_CHECKING:
    from rlscale.tasks.base import TaskCfg, VecTask


@dataclass(frozen=True)
class TaskSpec:
    """What the registry knows about one task."""

    task_id: str
    entry_point: str | Callable[..., VecTask]
    """The task's class, or a factory that imports a heavy backend only when called; or its ``module:attribute``,
    imported only when asked for."""
    cfg_entry_point: str | type[TaskCfg]
    """The task's :class:`~rlscale.tasks.base.TaskCfg` subclass, or its ``module:attribute``."""
    agent_cfg_files: dict[str, str]
    """Library name → YAML file name, relative to the ``agents/`` folder next to the task's module. A library left
    out trains with rlscale's generic defaults (:mod:`rlscale.rl.agent_defaults`)."""
    agent_package: str
    """Package holding that ``agents/`` folder."""
    check_available: Callable[[], None] | None = None
    """Raises ImportError, with one line saying what to install, when the task's optional backend is missing."""
    ranks_see_all_gpus: bool = False
    """Each rank of a CUDA job sees every GPU of its node. By default it sees only its own, as ``cuda:0``
    (:func:`rlscale.dist.isolate_own_gpu`), so that nothing opens a context on the others (JAX does on every GPU it
    sees); a task whose ranks must reach each other's GPUs opts out."""
    source: str = "rlscale"
    """The distribution the task comes from (``rlscale`` for the built-in tasks)."""
    footprint: EnvFootprint | Callable[[TaskCfg], EnvFootprint] | None = None
    """One env's sizes, or a function of the task's config that derives them; None: the task states none, and a run
    of it is not estimated before it is built."""

    def footprint_of(self, cfg: TaskCfg) -> EnvFootprint | None:
        """One env's sizes under ``cfg`` (:attr:`footprint`)."""
        return self.footprint(cfg) if callable(self.footprint) else self.footprint

    @property
    def task_class(self) -> Callable[[TaskCfg], VecTask]:
        """The task's class or factory (importing its module, and so torch)."""
        return _import(self.entry_point) if isinstance(self.entry_point, str) else self.entry_point

    @property
    def cfg_class(self) -> type[TaskCfg]:
        """The task's config class (importing its module, and so torch)."""
        return _import(self.cfg_entry_point) if isinstance(self.cfg_entry_point, str) else self.cfg_entry_point


_REGISTRY: dict[str, TaskSpec] = {}
_ALIASES: dict[str, str] = {}
"""Isaac Lab id → the rlscale task that reproduces it."""
_CLOSEST: dict[str, tuple[str, str]] = {}
"""Isaac Lab id that rlscale does not reproduce → (the closest rlscale task, why it is only the closest)."""
_LOADED_PLUGINS: set[str] = set()
"""Names of the entry-point plug-ins already loaded in this process."""
_PLUGINS_LOADED = False
"""Whether every installed plug-in is loaded (entry points are looked up once per process)."""


class UnknownTaskError(ValueError):
    """Raised for a task id that is neither registered nor an alias; the message is one line naming the way out."""


class TaskPluginError(UnknownTaskError):
    """A task plug-in could not be loaded (import error, a taken id, a bad agent config); one line naming it."""


def register_task(
    task_id: str,
    entry_point: str | Callable[..., VecTask],
    cfg_entry_point: str | type[TaskCfg],
    agent_cfg_files: dict[str, str],
    package: str,
    check_available: Callable[[], None] | None = None,
    ranks_see_all_gpus: bool = False,
    aliases: Iterable[str] = (),
    closest_for: Mapping[str, str] | None = None,
    footprint: EnvFootprint | Callable[[TaskCfg], EnvFootprint] | None = None,
) -> None:
    """Register a task under a case-sensitive id.

    The task's class and config class are given as ``module:attribute`` strings (imported only when asked for, so
    that listing the tasks needs no torch) or, as gymnasium allows, as the objects themselves.

    Args:
        task_id: The canonical id, as listed and as named in run directories.
        entry_point: :attr:`TaskSpec.entry_point`.
        cfg_entry_point: :attr:`TaskSpec.cfg_entry_point`.
        agent_cfg_files: :attr:`TaskSpec.agent_cfg_files`; each file is read here, so a broken one is refused now.
        package: :attr:`TaskSpec.agent_package`, also what :attr:`TaskSpec.source` is found from.
        check_available: Lets ``rlscale train`` refuse the task in one line when an optional backend is missing.
        ranks_see_all_gpus: :attr:`TaskSpec.ranks_see_all_gpus`.
        aliases: Isaac Lab ids of the task this one reproduces (``Isaac-Cartpole-v0``), accepted wherever an id is.
        closest_for: Isaac Lab ids that rlscale does not reproduce, for which this task is the closest, each with the
            reason it is only the closest; they are refused with that line.
        footprint: :attr:`TaskSpec.footprint`.

    Raises:
        ValueError: if an id or alias is not a string, is taken or has a ``:`` (reserved for ``module:Task-Id``), an
            entry point is neither ``module:attribute`` nor a class (a callable for ``entry_point``), or an agent
            config is missing or not a YAML mapping, or ``footprint`` is neither an :class:`EnvFootprint` nor a
            callable.
    """
    closest_for = dict(closest_for or {})
    for name in (task_id, *aliases, *closest_for):
        if not isinstance(name, str) or not name:
            raise ValueError(f"task id {name!r} ({type(name).__name__}) must be a non-empty string")
    for name in (task_id, *aliases, *closest_for):
        if name in _REGISTRY or name in _ALIASES or name in _CLOSEST:
            owner = _REGISTRY.get(_ALIASES.get(name, name))
            by = f" (by {owner.source})" if owner else ""
            raise ValueError(f"task id {name!r} is already registered{by}")
        if ":" in name:
            raise ValueError(f"task id {name!r}: ':' is reserved for package.module:Task-Id")
    _check_entry_point(task_id, "entry_point", entry_point, "the task's class or a factory", callable)
    _check_entry_point(task_id, "cfg_entry_point", cfg_entry_point, "its config class", inspect.isclass)
    for file_name in agent_cfg_files.values():
        _read_agent_cfg(task_id, package, file_name)
    if footprint is not None and not (isinstance(footprint, EnvFootprint) or callable(footprint)):
        raise ValueError(f"task {task_id!r}: footprint must be an EnvFootprint or a function of the task's config")
    _REGISTRY[task_id] = TaskSpec(
        task_id,
        entry_point,
        cfg_entry_point,
        dict(agent_cfg_files),
        package,
        check_available,
        ranks_see_all_gpus,
        source_of(package),
        footprint,
    )
    _ALIASES.update(dict.fromkeys(aliases, task_id))
    _CLOSEST.update((name, (task_id, reason)) for name, reason in closest_for.items())


def _check_entry_point(task_id: str, name: str, value: object, kind: str, accepts: Callable[[object], bool]) -> None:
    """Refuse an entry point that is neither ``module:attribute`` nor an object ``accepts``, saying what it expects."""
    if isinstance(value, str) and all(value.partition(":")[::2]):
        return
    if not isinstance(value, str) and accepts(value):
        return
    raise ValueError(
        f"task {task_id!r}: {name} must be a 'module:attribute' string or {kind}, got {value!r} "
        f"({type(value).__name__})"
    )


def list_tasks() -> list[str]:
    """Registered task ids, sorted (aliases left out): the built-in tasks, the installed plug-ins' and those of any
    module a ``module:Task-Id`` id imported in this process.

    Raises:
        TaskPluginError: if an installed plug-in cannot be loaded.
    """
    _register_installed_tasks()
    return sorted(_REGISTRY)


def resolve_task_id(task_id: str) -> str:
    """The id that names ``task_id``'s task in every process: itself, or the task an Isaac Lab alias stands for.

    A ``package.module:Task-Id`` id imports ``package.module`` (which registers its tasks) and stays qualified, so
    that a rank, a study job or a bundle naming it can import the module again.

    Raises:
        TaskPluginError: if an installed plug-in, or the module a qualified id names, cannot be loaded.
        UnknownTaskError: for an Isaac Lab task rlscale does not reproduce, naming the closest one; for any other id,
            naming the nearest spelling and the known ids.
    """
    _register_installed_tasks()
    qualified = split_qualified(task_id)
    if qualified is not None:
        module, name = qualified
        _load_plugin(f"module {module}", lambda: importlib.import_module(module))
        if name not in _REGISTRY and name not in _ALIASES:
            raise UnknownTaskError(f"unknown task {task_id!r}: importing {module} registered no task {name!r}")
        return f"{module}:{_ALIASES.get(name, name)}"
    if task_id in _REGISTRY:
        return task_id
    if task_id in _ALIASES:
        return _ALIASES[task_id]
    if task_id in _CLOSEST:
        stand_in, reason = _CLOSEST[task_id]
        raise UnknownTaskError(f"unknown task {task_id!r}: {reason}; closest: {stand_in} (`rlscale list_tasks`)")
    accepted = {name.lower(): name for name in (*_REGISTRY, *_ALIASES)}
    close = closest(task_id.lower(), accepted)
    hint = f"did you mean {accepted[close]!r}? " if close else ""
    raise UnknownTaskError(f"unknown task {task_id!r}; {hint}known tasks: {', '.join(sorted(_REGISTRY))}")


def get_spec(task_id: str) -> TaskSpec:
    """Look a task up by its id, an alias or its ``module:Task-Id`` form.

    Raises:
        UnknownTaskError: from :func:`resolve_task_id`.
    """
    return _REGISTRY[resolve_task_id(task_id).rpartition(":")[2]]


def make_task(task_id: str, **cfg_overrides: Any) -> VecTask:
    """Build a task from its default config with ``cfg_overrides`` applied (a dotted key sets a nested config's
    field, as :func:`rlscale.tasks.overrides.field_value` reads them)."""
    spec = get_spec(task_id)
    return spec.task_class(with_overrides(spec.cfg_class(), cfg_overrides))


def load_agent_cfg(task_id: str, rl_library: str) -> dict:
    """A fresh copy of the agent config the task ships for one library.

    Raises:
        ValueError: if the task ships none for that library (:func:`rlscale.rl.agent_defaults.agent_cfg` then
            falls back to rlscale's defaults).
    """
    spec = get_spec(task_id)
    if rl_library not in spec.agent_cfg_files:
        raise ValueError(f"task {task_id!r} has no agent config for {rl_library!r}")
    return copy.deepcopy(_read_agent_cfg(spec.task_id, spec.agent_package, spec.agent_cfg_files[rl_library]))


def _read_agent_cfg(task_id: str, package: str, file_name: str) -> dict:
    try:
        cfg = yaml.safe_load(resources.files(package).joinpath("agents", file_name).read_text())
    except (OSError, ImportError, yaml.YAMLError) as error:
        raise ValueError(f"task {task_id!r}: agent config agents/{file_name}: {one_line(error)}") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"task {task_id!r}: agent config agents/{file_name} is not a YAML mapping")
    return cfg


def _import(entry_point: str) -> Any:
    module, _, attribute = entry_point.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _load_plugin(name: str, load: Callable[[], object], hint: str = "") -> None:
    """Run ``load`` (a plug-in's import); if it fails, take back what it registered and raise one line naming it and
    ``hint``, how to do without it."""
    before = (set(_REGISTRY), set(_ALIASES), set(_CLOSEST))
    try:
        load()
    except Exception as error:
        for table, kept in zip((_REGISTRY, _ALIASES, _CLOSEST), before, strict=True):
            for key in set(table) - kept:
                del table[key]
        raise TaskPluginError(f"task plug-in {name}: {one_line(error)}{'; ' + hint if hint else ''}") from error


def _register_installed_tasks() -> None:
    """The built-in tasks, then the installed plug-ins, once per process; a broken one is tried again next time."""
    global _PLUGINS_LOADED
    _register_builtin_tasks()
    if _PLUGINS_LOADED:
        return
    try:
        plugins = installed_plugins()
    except PluginSettingError as error:
        raise TaskPluginError(str(error)) from None
    for plugin in plugins:
        if plugin.name not in _LOADED_PLUGINS:
            _load_plugin(plugin.name, plugin.entry_point.load, disable_hint(plugin))
            _LOADED_PLUGINS.add(plugin.name)
    _PLUGINS_LOADED = True


@functools.cache
def _register_builtin_tasks() -> None:
    # Their modules import nothing heavy; a task's class is imported only when asked for.
    from rlscale.tasks import ant, cartpole, locomotion

    for task in (*ant.TASKS, *cartpole.TASKS, *locomotion.TASKS):
        register_task(**task)
