"""The evaluation stage's runs: which train and parity runs ``rlscale evaluate`` measures, and which checkpoints.

A task defines an evaluation when ``rlscale evaluate`` can measure it (:func:`rlscale.run.checkpoint_policy.
is_velocity_task`: the task is asked, so a plug-in robot gets one too). Each train run of such a task is evaluated at
its final checkpoint, each parity run at every checkpoint it saved, one process per run; a study without such a task
plans no evaluation. :mod:`.evaluation_table` reads the results for ``summary.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlscale.manifest import RunManifest, run_directory_of
from rlscale.study.paths import EVALUATION_OF_PARITY, EVALUATION_OF_TRAIN


def evaluated_tasks(tasks: Iterable[str]) -> list[str]:
    """The tasks, in order, that define an evaluation (imports each task's config class, and so torch)."""
    from rlscale.run.checkpoint_policy import is_velocity_task

    return [task for task in tasks if is_velocity_task(task)]


def evaluation_cells(
    study: Mapping, train_cells: Sequence[tuple[str, Mapping]], parity_cells: Sequence[Mapping]
) -> list[dict[str, Any]]:
    """Every evaluation of the study: per train run and parity run of a task in ``study["evaluated_tasks"]``, the path
    of its result, the record of the run it evaluates and the run's cell.

    Args:
        study: The effective config.
        train_cells: The train runs, each ``(manifest path, {task, library, world_size})``.
        parity_cells: The parity runs (:func:`rlscale.study.parity.parity_cells`).
    """
    evaluated, name = set(study.get("evaluated_tasks") or ()), study["study"]
    cells = []
    for record, cell in train_cells:
        if cell["task"] in evaluated:
            cells.append(
                {
                    "path": EVALUATION_OF_TRAIN.format(
                        study=name, task=cell["task"], library=cell["library"], ws=cell["world_size"]
                    ),
                    "record": record,
                    "stage": "train",
                    "task": cell["task"],
                    "rl_library": cell["library"],
                    "world_size": cell["world_size"],
                    "variant": None,
                    "seed": None,
                }
            )
    for cell in parity_cells:
        if cell["task"] in evaluated:
            cells.append(
                {
                    "path": EVALUATION_OF_PARITY.format(
                        study=name,
                        task=cell["task"],
                        library=cell["rl_library"],
                        ws=cell["world_size"],
                        variant=cell["variant"],
                        seed=cell["seed"],
                    ),
                    "record": cell["path"],
                    "stage": "parity",
                    **{key: cell[key] for key in ("task", "rl_library", "world_size", "variant", "seed")},
                }
            )
    return cells


def run_checkpoints(manifest: RunManifest, every: bool) -> list[tuple[int, Path]]:
    """The checkpoints of a run to evaluate, each with the iterations it had finished, in order: the final one, or
    with ``every`` each the run saved (one per iteration count; its library's adapter finds them).

    Raises:
        ValueError: If the run recorded no final checkpoint.
    """
    final, completed = manifest.checkpoint, manifest.iterations_completed
    if final is None or completed is None:
        raise ValueError("the run's manifest records no final checkpoint")
    if not every:
        return [(completed, final)]
    from rlscale.rl import load_adapter

    args, run_dir = manifest.args, run_directory_of(final)
    if run_dir is None:
        raise ValueError(f"no run manifest beside the final checkpoint {final} or in the folder above")
    found = load_adapter(args.rl_library).find_checkpoints(run_dir, dict(manifest.agent_cfg), args.ml_framework)
    by_iteration = {iterations: path for iterations, path in sorted(found) if path.resolve() != final.resolve()}
    by_iteration[completed] = final
    return sorted(by_iteration.items())


def env_steps_at(manifest: RunManifest, iterations: int) -> int | None:
    """Global env steps the run had collected after ``iterations`` iterations (None if it did not record them)."""
    for record in manifest.iterations:
        if record.iteration == iterations - 1:
            return record.env_steps
    return None
