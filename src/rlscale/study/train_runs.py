"""The ``train`` rule's runs as the aggregate rule reads them: one row each for ``summary.md``, and their learning
curves.

A train run's record is its rank-0 manifest, whose ``iterations`` hold every iteration's global ``env_steps`` and
``mean_return`` (:class:`rlscale.rl.progress.IterationRecord`), whatever the library. A run resumed from a checkpoint
(``--resume auto`` after a kill) keeps the earlier invocations' records before its ``start_iteration``, then its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from rlscale.manifest import RunManifest

CURVE_COLUMNS = [
    *("task", "rl_library", "ml_framework", "num_envs_per_rank", "world_size", "seed", "start_iteration"),
    *("env_steps", "mean_return"),
]
"""Columns of :func:`train_curves`."""


def train_table(manifests: Sequence[RunManifest], cells: Sequence[Mapping]) -> pd.DataFrame:
    """One row per ``train`` run: its final return and episode length, where its checkpoint is, and what all its
    segments (the run and each resume of it) took: their count, the iterations they trained and their wall time
    (None when one ended without recording its own, killed, or the manifest records no segments)."""
    rows = []
    for manifest, cell in zip(manifests, cells, strict=True):
        segments = manifest.segments
        wall_times = [segment.wall_time_s for segment in segments]
        rows.append(
            {
                **cell,
                "iterations": manifest.iterations_completed,
                "segments": len(segments),
                "iterations_trained": sum(segment.iterations for segment in segments),
                "final_mean_return": manifest.final_mean_return,
                "final_mean_episode_length": manifest.final_mean_episode_length,
                "wall_time_s": sum(wall_times) if segments and None not in wall_times else None,
                "checkpoint": None if manifest.checkpoint is None else str(manifest.checkpoint),
            }
        )
    return pd.DataFrame.from_records(rows)


def train_curves(manifests: Sequence[RunManifest], cells: Sequence[Mapping]) -> pd.DataFrame:
    """Every ``train`` run's mean return per iteration (NaN where no episode ended) against the global env steps
    collected since training started, one row per iteration.

    Args:
        manifests: The runs' manifests.
        cells: Per manifest, the task, library and world size it was filed under (the aggregate rule's
            ``train_cells``).
    """
    rows = []
    for manifest, cell in zip(manifests, cells, strict=True):
        run = {
            "task": cell["task"],
            "rl_library": cell["library"],
            "ml_framework": manifest.args.ml_framework,
            "num_envs_per_rank": manifest.num_envs,
            "world_size": cell["world_size"],
            "seed": manifest.args.seed,
            "start_iteration": manifest.start_iteration,
        }
        for record in manifest.iterations:
            rows.append({**run, "env_steps": record.env_steps, "mean_return": record.mean_return})
    return pd.DataFrame.from_records(rows, columns=CURVE_COLUMNS)
