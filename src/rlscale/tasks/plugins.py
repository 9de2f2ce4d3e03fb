"""Where other packages' tasks come from: the ``module:Task-Id`` form of an id and the ``rlscale.tasks`` entry points.

A plug-in is a module that registers its tasks (:func:`rlscale.tasks.register_task`) when imported, as gymnasium's
environment packages do. This module finds and names plug-ins; the registry imports them, so that it can take back
what a broken one registered.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from dataclasses import dataclass

ENTRY_POINT_GROUP = "rlscale.tasks"
"""The entry-point group of installed task plug-ins; each entry point names a module."""

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


def installed_plugins() -> list[Plugin]:
    """Every ``rlscale.tasks`` entry point of the installed distributions, in a stable order."""
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    plugins = []
    for entry_point in sorted(found, key=lambda entry: (entry.dist.name if entry.dist else "", entry.name)):
        source = entry_point.dist.name if entry_point.dist else entry_point.module
        plugins.append(Plugin(f"{source} (entry point {entry_point.name})", source, entry_point))
    return plugins


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
