"""Batched PyTorch tasks and their registry.

Importing this package imports no torch: the task contract lives in :mod:`rlscale.tasks.base`, and a task's modules
are imported when it is built. Other packages' tasks are plug-ins (:mod:`rlscale.tasks.plugins`, docs/tasks.md).
"""

from rlscale.tasks.footprint import EnvFootprint
from rlscale.tasks.registry import (
    TaskPluginError,
    TaskSpec,
    UnknownTaskError,
    get_spec,
    list_tasks,
    load_agent_cfg,
    make_task,
    register_task,
    resolve_task_id,
)

__all__ = [
    "EnvFootprint",
    "TaskPluginError",
    "TaskSpec",
    "UnknownTaskError",
    "get_spec",
    "list_tasks",
    "load_agent_cfg",
    "make_task",
    "register_task",
    "resolve_task_id",
]
