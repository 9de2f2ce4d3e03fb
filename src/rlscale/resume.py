"""``rlscale train --resume auto``: which run directory to continue, and from which of its checkpoints.

Where a library keeps its checkpoints, and which iteration each holds, is its adapter's business
(``find_checkpoints``); this module only chooses among what the adapter found.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

AUTO = "auto"
"""The ``--resume`` value that continues the latest run in place."""


def latest_run(runs_root: Path, run_name: str | None, ml_framework: str) -> Path | None:
    """The run directory under ``runs_root`` whose rank-0 manifest was written last, among the runs with this
    ``--run_name`` and ML framework (skrl's torch and JAX runs share a root); None if there is none.

    Every rank of a job picks the same one: the directory a rank-0 rerun writes to stays the latest.
    """
    runs = []
    for manifest in runs_root.glob("*/manifest.json"):
        try:
            recorded = json.loads(manifest.read_text())["args"]
        except (OSError, ValueError, KeyError, TypeError):  # not an rlscale run directory
            continue
        if recorded.get("run_name") == run_name and recorded.get("ml_framework") == ml_framework:
            runs.append(manifest)
    newest = max(runs, key=lambda path: path.stat().st_mtime, default=None)
    return newest.parent if newest else None


def newest_loadable(
    candidates: Iterable[tuple[int, Path]],
    ml_framework: str,
    below: int,
    skipped: Callable[[Path, ValueError], None],
) -> Path | None:
    """The checkpoint with the most finished iterations, fewer than ``below``, that loads as weights only.

    A checkpoint at ``below`` or beyond leaves nothing to train towards a total of ``below``; one that does not load
    (damaged, or a write cut short outside rlscale's atomic saves) is reported to ``skipped`` and passed over.

    Args:
        candidates: (iterations finished, path) pairs from the adapter's ``find_checkpoints``.
        ml_framework: torch or jax, for the weights-only check.
        below: The run's total iterations.
        skipped: Called with each checkpoint that is passed over as unloadable, and why.
    """
    from rlscale.rl.common import check_weights_only

    for iterations, path in sorted(candidates, reverse=True):
        if iterations >= below:
            continue
        try:
            check_weights_only(path, ml_framework)
        except ValueError as error:
            skipped(path, error)
            continue
        return path
    return None
