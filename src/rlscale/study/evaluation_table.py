"""The evaluation stage's results as the aggregate rule reads them: typed records of each evaluated run, and the
tables of tracking error and falls per world size that ``summary.md`` shows.

An evaluation file (the ``evaluate`` rules' output, written by :func:`rlscale.study.stages.evaluate`) holds, per
checkpoint of the run, the iterations it had finished, the global env steps then, and ``rlscale evaluate``'s result
(``summary``: the mean linear-velocity tracking error in m/s, the yaw-rate error in rad/s and the share of envs that
fell, over every env and command).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class CheckpointResult:
    """``rlscale evaluate``'s result for one checkpoint of a run."""

    iterations: int
    """Iterations the checkpoint had finished."""
    env_steps: int | None
    """Global env steps the run had collected then (None if its manifest did not record them)."""
    lin_vel_error_mps: float
    ang_vel_error_radps: float
    fall_rate: float
    envs: int


@dataclass(frozen=True)
class RunEvaluation:
    """One evaluated run: its cell and its checkpoints' results, in the order of their iterations."""

    stage: str
    """``train`` or ``parity``: the rule whose run it is."""
    task: str
    rl_library: str
    world_size: int
    variant: str | None
    """The parity run's variant; None for a train run."""
    seed: int | None
    """The parity run's seed; None for a train run (the study's first seed)."""
    checkpoints: tuple[CheckpointResult, ...]

    @property
    def final(self) -> CheckpointResult:
        """The run's last checkpoint's result."""
        return self.checkpoints[-1]


def read_evaluation(path: str | Path, cell: Mapping) -> RunEvaluation:
    """The evaluation file at ``path`` of the run ``cell`` describes (:func:`rlscale.study.evaluation.
    evaluation_cells`).

    Raises:
        ValueError: If the file holds no checkpoint, or one evaluated another task or library than the cell's.
    """
    data = json.loads(Path(path).read_text())
    checkpoints = []
    for entry in data.get("checkpoints") or []:
        if (entry["task"], entry["rl_library"]) != (cell["task"], cell["rl_library"]):
            raise ValueError(
                f"{path}: evaluates {entry['task']} with {entry['rl_library']}, but was filed under {cell['task']} "
                f"with {cell['rl_library']}"
            )
        summary = entry["summary"]
        checkpoints.append(
            CheckpointResult(
                iterations=int(entry["iterations"]),
                env_steps=entry.get("env_steps"),
                lin_vel_error_mps=float(summary["lin_vel_error_mps"]),
                ang_vel_error_radps=float(summary["ang_vel_error_radps"]),
                fall_rate=float(summary["fall_rate"]),
                envs=int(summary["envs"]),
            )
        )
    if not checkpoints:
        raise ValueError(f"{path}: holds no evaluated checkpoint")
    return RunEvaluation(
        stage=cell["stage"],
        task=cell["task"],
        rl_library=cell["rl_library"],
        world_size=int(cell["world_size"]),
        variant=cell.get("variant"),
        seed=cell.get("seed"),
        checkpoints=tuple(sorted(checkpoints, key=lambda result: result.iterations)),
    )


TABLE_COLUMNS = [
    *("stage", "task", "library", "variant", "world size", "runs", "env steps"),
    *("tracking error, m/s", "yaw-rate error, rad/s", "fall rate"),
]
"""Columns of :func:`evaluation_table`."""


def evaluation_table(runs: Sequence[RunEvaluation]) -> pd.DataFrame:
    """One row per stage, task, library, variant and world size: each run's final checkpoint, the median over the
    runs (a parity cell's seeds; a train cell has one run)."""
    rows = [
        {
            "stage": run.stage,
            "task": run.task,
            "library": run.rl_library,
            "variant": run.variant or "–",
            "world size": run.world_size,
            "env steps": math.nan if run.final.env_steps is None else float(run.final.env_steps),
            "tracking error, m/s": run.final.lin_vel_error_mps,
            "yaw-rate error, rad/s": run.final.ang_vel_error_radps,
            "fall rate": run.final.fall_rate,
        }
        for run in runs
    ]
    if not rows:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    keys = ["stage", "task", "library", "variant", "world size"]
    frame = pd.DataFrame.from_records(rows)
    grouped = frame.groupby(keys, sort=False)
    table = grouped.median(numeric_only=True).reset_index()
    table["runs"] = grouped.size().to_numpy()
    return table[TABLE_COLUMNS]
