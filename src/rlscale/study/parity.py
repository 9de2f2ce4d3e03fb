"""The parity stage's cells: which runs answer "do N ranks solve the task sooner, and do they learn as well?".

A parity run is one uninterrupted ``rlscale train_multigpu`` run of a task × library × world size × seed (and, above
one rank, a variant: the learning-rate scaling and the normalizer sync) for a budget of **global** env steps, the
same at every world size. Its manifest records every iteration; :mod:`.parity_table` finds the first one that reaches
the task's target after the run. ``docs/parity.md`` describes the stage.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping

from rlscale.dist import global_env_steps
from rlscale.rl import LIBRARIES
from rlscale.rl.agent_defaults import agent_cfg as default_agent_cfg
from rlscale.rl.rank_scaling import LR_SCALINGS
from rlscale.study.config import envs_for
from rlscale.study.paths import PARITY_RECORD


def variant_name(lr_scaling: str, normalizer_sync: bool) -> str:
    """Path segment of a variant: ``lr-<scaling>_norm-<synced|library>`` (library: the library's own behaviour)."""
    return f"lr-{lr_scaling}_norm-{'synced' if normalizer_sync else 'library'}"


BASE_VARIANT = variant_name("none", False)
"""The one variant at world size 1, where neither knob changes anything: the baseline of every variant."""


def variant_knobs(name: str) -> tuple[str, bool]:
    """``(lr_scaling, normalizer_sync)`` of a :func:`variant_name`.

    Raises:
        ValueError: for a name that no variant has.
    """
    for lr_scaling, sync in itertools.product(LR_SCALINGS, (False, True)):
        if variant_name(lr_scaling, sync) == name:
            return lr_scaling, sync
    raise ValueError(f"{name!r} is not a parity variant (lr-<{'|'.join(LR_SCALINGS)}>_norm-<synced|library>)")


def variant_options(name: str) -> list[str]:
    """``rlscale train`` options of a variant."""
    lr_scaling, sync = variant_knobs(name)
    return ["--lr_scaling", lr_scaling, *(["--sync_normalizer"] if sync else [])]


def variants(parity: Mapping, world_size: int) -> list[str]:
    """The variants run at ``world_size``: every ``lr_scaling`` × ``normalizer_sync`` pair above one rank, else
    :data:`BASE_VARIANT` alone."""
    if world_size == 1:
        return [BASE_VARIANT]
    return [variant_name(lr, sync) for lr, sync in itertools.product(parity["lr_scaling"], parity["normalizer_sync"])]


def parity_tasks(study: Mapping) -> list[str]:
    """The study's tasks that have a parity target, in the study's order."""
    targets = (study.get("parity") or {}).get("target") or {}
    return [task for task in study["tasks"] if task in targets]


def parity_envs(study: Mapping, task: str) -> int:
    """Environments per rank of a task's parity runs: ``parity.num_envs_per_rank``, else the task's smallest."""
    return int((study["parity"].get("num_envs_per_rank") or {}).get(task, min(envs_for(study, task))))


def parity_libraries(study: Mapping, task: str, library_keys: list[str]) -> list[str]:
    """Library keys of a task's parity runs: ``parity.libraries``' entry, else every library of the study."""
    return list((study["parity"].get("libraries") or {}).get(task, library_keys))


def rollout_length(agent_cfg: Mapping, library: str) -> int:
    """Env steps per env per iteration of a library's agent config, from its record: torch-free, unlike its adapter,
    which imports the library (a Snakefile must not)."""
    return LIBRARIES[library].rollout_length(agent_cfg)


def parity_iterations(max_env_steps: float, rollout: int, num_envs: int, world_size: int) -> int:
    """Iterations that collect at least ``max_env_steps`` global env steps."""
    return max(1, math.ceil(max_env_steps / global_env_steps(rollout, num_envs, world_size)))


def parity_cells(
    study: Mapping, library_keys: list[str], agent_cfg: Callable[[str, str], Mapping] = default_agent_cfg
) -> list[dict]:
    """Every parity run of the study, each with the record path its rule writes and what it runs.

    Args:
        study: The effective config (its libraries are torch ones, so a library key is the library's name).
        library_keys: The study's library keys (``rsl_rl``, ...).
        agent_cfg: The agent config a run of ``(task, library)`` starts from, for the rollout length.
    """
    parity, cells = study["parity"], []
    for task in parity_tasks(study):
        envs, budget, target = parity_envs(study, task), float(parity["max_env_steps"][task]), parity["target"][task]
        for library in parity_libraries(study, task, library_keys):
            rollout = rollout_length(agent_cfg(task, library), library)
            for world_size in sorted(study["world_sizes"]):
                for variant in variants(parity, world_size):
                    lr_scaling, sync = variant_knobs(variant)
                    for seed in parity["seeds"]:
                        cells.append(
                            {
                                "path": PARITY_RECORD.format(
                                    study=study["study"],
                                    task=task,
                                    library=library,
                                    ws=world_size,
                                    variant=variant,
                                    seed=seed,
                                ),
                                "task": task,
                                "rl_library": library,
                                "variant": variant,
                                "lr_scaling": lr_scaling,
                                "normalizer_sync": sync,
                                "world_size": world_size,
                                "seed": seed,
                                "num_envs_per_rank": envs,
                                "max_env_steps": budget,
                                "iterations": parity_iterations(budget, rollout, envs, world_size),
                                "metric": target["metric"],
                                "target": float(target.get("at_least", target.get("at_most"))),
                                "direction": "at_most" if "at_most" in target else "at_least",
                            }
                        )
    return cells
