"""Batched PyTorch tasks and their registry."""

from rlscale.tasks.base import Observations, TaskCfg, VecTask
from rlscale.tasks.registry import (
    RL_LIBRARIES,
    UnknownTaskError,
    get_spec,
    list_tasks,
    load_agent_cfg,
    make_task,
    register_task,
)

__all__ = [
    "RL_LIBRARIES",
    "Observations",
    "TaskCfg",
    "UnknownTaskError",
    "VecTask",
    "get_spec",
    "list_tasks",
    "load_agent_cfg",
    "make_task",
    "register_task",
]
