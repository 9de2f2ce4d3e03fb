"""Where other packages' tasks come from: the ``module:Task-Id`` form of an id and the ``rlscale.tasks`` entry points.

A plug-in is a module that registers its tasks (:func:`rlscale.tasks.register_task`) when imported, as gymnasium's
environment packages do. This module finds and names plug-ins; the registry imports them, so that it can take back
what a broken one registered.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
from dataclasses import dataclass

ENTRY_POINT_GROUP = "rlscale.tasks"
"""The entry-point group of installed task plug-ins; each entry point names a module."""

DISABLE_PLUGINS_ENV = "RLSCALE_DISABLE_PLUGINS"
"""Comma-separated distributions whose task plug-ins are not loaded: the way around a broken one, short of
uninstalling it."""

QUALIFIED_ID = re.compile(r"(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<name>[^:]+)")
"""``package.module:Task-Id``: import ``package.module``, then look ``Task-Id`` up."""

BUILTIN_SOURCE = "rlscale"


@dataclass(frozen=True)
class Plugin:
    """An installed plug-in: its name in errors, its distribution and its entry point (which names a module)."""

    name: str
    """``<distribution> (entry point <name>)``."""
    source: str
    """The distribution that installed it."""
    entry_point: importlib.metadata.EntryPoint


class PluginSettingError(ValueError):
    """:data:`DISABLE_PLUGINS_ENV` names a distribution that installed no task plug-in."""


def installed_plugins() -> list[Plugin]:
    """Every ``rlscale.tasks`` entry point of the installed distributions, in a stable order, but those of the
    distributions :data:`DISABLE_PLUGINS_ENV` names.

    Raises:
        PluginSettingError: when that variable names a distribution with no task plug-in (a typo would otherwise
            leave the broken plug-in loaded, with no word why).
    """
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    plugins = []
    for entry_point in sorted(found, key=lambda entry: (entry.dist.name if entry.dist else "", entry.name)):
        source = entry_point.dist.name if entry_point.dist else entry_point.module
        plugins.append(Plugin(f"{source} (entry point {entry_point.name})", source, entry_point))
    raw = os.environ.get(DISABLE_PLUGINS_ENV, "")
    disabled = {_normalized(name) for name in raw.split(",") if name.strip()}
    unknown = disabled - {_normalized(plugin.source) for plugin in plugins}
    if unknown:
        installed = ", ".join(sorted({plugin.source for plugin in plugins})) or "none"
        raise PluginSettingError(
            f"{DISABLE_PLUGINS_ENV}={raw!r}: no task plug-in of {', '.join(sorted(unknown))} is installed; name "
            f"distributions that have one (installed: {installed})"
        )
    return [plugin for plugin in plugins if _normalized(plugin.source) not in disabled]


def disable_hint(plugin: Plugin) -> str:
    """How to run without ``plugin``, for the line that reports it broken."""
    return f"to run without it, set {DISABLE_PLUGINS_ENV}={plugin.source} or `pip uninstall {plugin.source}`"


def _normalized(distribution: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", distribution.strip()).lower()


def split_qualified(task_id: str) -> tuple[str, str] | None:
    """``(module, Task-Id)`` for a ``package.module:Task-Id`` id, else None."""
    match = QUALIFIED_ID.fullmatch(task_id)
    return (match["module"], match["name"]) if match else None


def source_of(package: str) -> str:
    """The distribution that installed ``package`` (its top-level name when none did, e.g. a module on sys.path)."""
    top = package.partition(".")[0]
    if top == BUILTIN_SOURCE:
        return BUILTIN_SOURCE
    return next(iter(_distributions().get(top, ())), top)


def one_line(error: BaseException) -> str:
    """``Type: message`` on one line (a YAML error spans several)."""
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()
