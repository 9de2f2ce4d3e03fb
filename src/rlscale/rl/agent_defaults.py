"""The agent config a run starts from: the task's own YAML for the library, else rlscale's generic PPO for it.

Tasks know no RL library, so the generic configs live here, one YAML per library in ``default_agents/``; the fields
that depend on the task are filled in from its observation and action dimensions (:func:`hidden_units`). A run's
``--agent`` and ``agent.KEY=VALUE`` overrides apply on top of either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import yaml

from rlscale.rl import LIBRARIES, default_agent_path, set_config_entry
from rlscale.tasks import get_spec, load_agent_cfg, make_task

MIN_UNITS, MAX_UNITS = 64, 256
"""Bounds of the generic networks' layer width."""


def agent_cfg(task_id: str, rl_library: str) -> dict:
    """A fresh copy of the agent config that ``rl_library`` trains ``task_id`` with.

    Raises:
        ValueError: for an unknown library, or a task whose agent configs name one (one line naming where the task
            comes from).
    """
    if rl_library not in LIBRARIES:
        raise ValueError(f"unknown RL library {rl_library!r}; one of {', '.join(LIBRARIES)}")
    spec = get_spec(task_id)
    unknown = sorted(set(spec.agent_cfg_files) - set(LIBRARIES))
    if unknown:
        raise ValueError(
            f"task {spec.task_id!r} ({spec.source}): agent configs for unknown libraries {unknown}; "
            f"libraries: {', '.join(LIBRARIES)}"
        )
    if rl_library in spec.agent_cfg_files:
        return load_agent_cfg(task_id, rl_library)
    task = make_task(task_id, num_envs=1, device="cpu")  # the dimensions are only known once a task is built
    try:
        return default_agent_cfg(rl_library, spec.task_id, task.observation_dims, task.num_actions)
    finally:
        task.close()


def default_agent_cfg(rl_library: str, task_id: str, observation_dims: Mapping[str, int], num_actions: int) -> dict:
    """rlscale's generic PPO config of one library, sized for a task with these dimensions, where its
    :class:`~rlscale.rl.AgentLayout` says.

    The critic reads the ``critic`` observation group when the task has one, else ``policy``.
    """
    layout = LIBRARIES[rl_library].agent_layout
    cfg = yaml.safe_load(default_agent_path(rl_library).read_text())
    units = hidden_units(observation_dims["policy"], num_actions)
    set_config_entry(cfg, layout.run_name, re.sub(r"\W+", "_", task_id).strip("_").lower())
    if layout.observation_groups is not None:
        critic_group = "critic" if "critic" in observation_dims else "policy"
        set_config_entry(cfg, layout.observation_groups, {"actor": ["policy"], "critic": [critic_group]})
    for key in layout.hidden_units:
        set_config_entry(cfg, key, units)
    return cfg


def hidden_units(observation_dim: int, num_actions: int) -> list[int]:
    """Two hidden layers, each as wide as the power of two at or above ``4 x (observation_dim + num_actions)``,
    kept within [:data:`MIN_UNITS`, :data:`MAX_UNITS`]: 64 for Cartpole-sized tasks, 256 from about 40 inputs and
    outputs on (Ant)."""
    width = 1 << max(0, 4 * (observation_dim + num_actions) - 1).bit_length()
    width = min(MAX_UNITS, max(MIN_UNITS, width))
    return [width, width]
