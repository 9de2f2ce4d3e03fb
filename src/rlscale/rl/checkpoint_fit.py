"""Whether a checkpoint given to ``--resume`` fits the run, checked before launch: its library, its task and the
observation size its policy reads.

The library shows in the checkpoint's top-level keys (``Library.checkpoint_policy_key``); the task in the manifest of
the run that wrote it (beside the checkpoint, or one folder up where the library keeps checkpoints in a subfolder),
which the caller reads (:func:`rlscale.manifest.read_checkpoint_manifest`: this layer is below it).
A checkpoint copied away from its run has no manifest: then the observation size of its policy's first weight matrix
is compared with the task's, which takes building the task once (on the CPU, one env).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlscale.rl import LIBRARIES
from rlscale.tasks import make_task


class CheckpointMismatch(ValueError):
    """The checkpoint was written by another library, for another task, or for other observations."""


@dataclass(frozen=True)
class WritingRun:
    """What the manifest of the run that wrote a checkpoint says of that run."""

    task: str
    rl_library: str
    agent_cfg: Mapping[str, Any]


def check_checkpoint_fits(
    state: Any, task_id: str, rl_library: str, agent_cfg: dict, writing_run: WritingRun | None
) -> None:
    """Refuse a checkpoint (``state``, as loaded) that ``rl_library`` cannot resume on ``task_id`` with the networks
    of ``agent_cfg``; ``writing_run`` is its run's, None for a checkpoint without a run manifest.

    Raises:
        CheckpointMismatch: one line naming what the checkpoint is and what the run is.
    """
    run = f"this run is {task_id} with {rl_library}"
    written_by = _library_of(state)
    if written_by is not None and written_by != rl_library:
        raise CheckpointMismatch(
            f"a {written_by} checkpoint, but {run}; pass --rl_library {written_by}, or a {rl_library} checkpoint"
        )
    if writing_run is not None and (writing_run.task, writing_run.rl_library) != (task_id, rl_library):
        raise CheckpointMismatch(
            f"written by a run of {writing_run.task} with {writing_run.rl_library} (its manifest.json), but {run}; "
            "pass a checkpoint of this task and library"
        )
    for key in LIBRARIES[rl_library].network_keys if writing_run is not None else ():
        written, wanted = _entry(writing_run.agent_cfg, key), _entry(agent_cfg, key)
        if written is not None and wanted is not None and written != wanted:
            raise CheckpointMismatch(
                f"its networks have {key} {written} (its manifest.json), but this run's {key} is {wanted}; drop the "
                "override, or train from scratch"
            )
    inputs = _policy_inputs(state, rl_library)
    if inputs is None or writing_run is not None:  # its run's manifest vouches for the task: no build needed
        return
    task = make_task(task_id, num_envs=1, device="cpu")
    try:
        expected = task.observation_dims["policy"]
    finally:
        task.close()
    if inputs != expected:
        raise CheckpointMismatch(
            f"its policy reads {inputs} observations, but {task_id}'s policy observations are {expected} ({run}); "
            "pass a checkpoint of this task"
        )


def _library_of(state: Any) -> str | None:
    if not isinstance(state, dict):
        return None
    return next((name for name, library in LIBRARIES.items() if library.checkpoint_policy_key in state), None)


def _entry(cfg: Any, key: str) -> Any:
    """``cfg[a][b]...`` for ``a.b...``, or None."""
    for part in key.split("."):
        if not isinstance(cfg, Mapping):
            return None
        cfg = cfg.get(part)
    return cfg


def _policy_inputs(state: Any, rl_library: str) -> int | None:
    """Columns of the first weight matrix of the policy: the observations it reads (None when not a torch state)."""
    policy = state.get(LIBRARIES[rl_library].checkpoint_policy_key) if isinstance(state, dict) else None
    if not isinstance(policy, dict):
        return None
    for name, value in policy.items():
        if name.endswith("weight") and getattr(value, "ndim", 0) == 2:
            return int(value.shape[1])
    return None
