"""Manifests for tests: a completed run's manifest data with only the keys a test cares about set, the rest filled in
as the writer fills them, read as :func:`rlscale.manifest.read_manifest` reads them (schema check included)."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

from rlscale.manifest import RecordedIteration, RunManifest, first_violation

COMPLETED_RUN: dict[str, Any] = {
    "status": "completed",
    "start_time": "2026-01-01T00:00:00+00:00",
    "end_time": "2026-01-01T00:01:00+00:00",
    "host": "node1",
    "pid": 4242,
    "versions": {"rlscale": "0.1.0", "torch": "2.8.0"},
    "git": {"sha": None, "dirty": None},
    "args": {
        "command": "rlscale train",
        "run_name": None,
        "task": "Isaac-Cartpole-Direct",
        "rl_library": "rsl_rl",
        "ml_framework": "torch",
        "num_envs": 64,
        "max_iterations": 10,
        "seed": 1,
        "env_overrides": {},
        "lr_scaling": "none",
        "normalizer_sync": False,
    },
    "agent_cfg": {},
    "seed": 1,
    "env_seed": 1,
    "rank": 0,
    "world_size": 1,
    "local_world_size": 1,
    "num_nodes": 1,
    "run_dir": "logs/rsl_rl/Isaac-Cartpole-Direct/run",
    "resumed_from": None,
    "device": "cpu",
    "torch": "2.8.0",
    "cuda": None,
    "gpu_name": None,
    "wall_time_s": 60.0,
    "iterations": [],
    "num_envs": 64,
    "start_iteration": 0,
    "iterations_completed": 0,
    "checkpoint": None,
    "param_digest": "0" * 16,
    "rank_param_digests": ["0" * 16],
    "sync_checked_at_iterations": [],
    "final_mean_return": None,
    "final_mean_episode_length": None,
}
"""A complete manifest of a completed one-rank run."""
ITERATION = {"collection_s": 0.1, "iteration_s": 0.2, "mean_return": math.nan, "mean_episode_length": math.nan}
"""What an iteration record holds besides the keys a test sets (its number defaults to its index)."""


def manifest_data(fields: Mapping[str, Any]) -> dict[str, Any]:
    """:data:`COMPLETED_RUN` with ``fields`` over it (``args`` merged into its ``args``), each iteration record
    completed with :data:`ITERATION`."""
    data = copy.deepcopy(COMPLETED_RUN) | copy.deepcopy(dict(fields))
    data["args"] = COMPLETED_RUN["args"] | dict(fields.get("args") or {})
    data["iterations"] = [
        {"iteration": index, **ITERATION, **record} for index, record in enumerate(data["iterations"])
    ]
    return data


def run_manifest(fields: Mapping[str, Any]) -> RunManifest:
    """:func:`manifest_data` of ``fields``, checked against the schema and read as a reader gets it."""
    data = manifest_data(fields)
    violation = first_violation(data)
    assert violation is None, violation
    return RunManifest.from_valid_data(data)


def recorded_iterations(records: Sequence[Mapping[str, Any]]) -> tuple[RecordedIteration, ...]:
    """Iteration records (completed with :data:`ITERATION`) as a reader gets them."""
    return run_manifest({"iterations": records}).iterations


STARTING_FIELDS = (
    *("args", "agent_cfg", "seed", "env_seed", "rank", "world_size", "local_world_size", "num_nodes", "run_dir"),
    *("resumed_from", "device", "torch", "cuda", "gpu_name"),
)
"""What a run gives the writer (:class:`rlscale.manifest.Manifest`) when it starts; the writer adds the rest."""


def starting_fields(**fields: Any) -> dict[str, Any]:
    """:data:`STARTING_FIELDS` from :data:`COMPLETED_RUN`, with ``fields`` over them."""
    return {key: copy.deepcopy(COMPLETED_RUN[key]) for key in STARTING_FIELDS} | fields
