"""The ``validate`` stage's verdict: whether a short ``rlscale train`` run proves the task trains with the library."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from rlscale.manifest import RunManifest

VALIDATION_CRITERION = (
    "the run exits 0; its manifest says status 'completed' after exactly the requested iterations; every "
    "iteration's mean return is finite or NaN (NaN: no episode ended in it), never infinite; and at least one is "
    "finite, so episodes do end and returns are computed. This proves the task trains end to end with the library; "
    "it does not judge how well it learns."
)
"""The cheap, honest criterion the ``validate`` rule applies before any long job."""


PARITY_METRICS_ENV = "RLSCALE_PARITY_METRICS"
"""Environment variable through which the workflow tells its validate jobs each studied task's parity metric (JSON,
task id -> metric): an environment variable, not a rule param, so that a study in progress reruns none of its jobs."""


def parity_metric(task: str, environ: Mapping[str, str]) -> str | None:
    """The parity target's metric of ``task`` that the workflow set in :data:`PARITY_METRICS_ENV`, if any."""
    return json.loads(environ.get(PARITY_METRICS_ENV) or "{}").get(task)


def validation_verdict(
    manifest: RunManifest | None, iterations: int, exit_code: int, metric: str | None = None
) -> dict:
    """Apply :data:`VALIDATION_CRITERION` to a finished ``rlscale train`` run; with ``metric`` (the task's parity
    target's), also refuse a ``Metrics/<name>`` the task does not log, before any parity run spends its budget on it.

    Args:
        manifest: The run's rank-0 manifest, or ``None`` if it left none.
        iterations: Iterations the run was asked for.
        exit_code: Its exit code.
        metric: The task's parity metric, if it has a parity target.

    Returns:
        ``{"ok": bool, "reasons": [why not ...], "criterion": ..., ...}``.
    """
    reasons = []
    if exit_code != 0:
        reasons.append(f"rlscale train exited {exit_code}")
    if manifest is None:
        reasons.append("the run left no manifest.json")
    else:
        if manifest.status != "completed":
            reasons.append(f"manifest status is {manifest.status!r}, not 'completed'")
        if manifest.iterations_completed != iterations:
            reasons.append(f"{manifest.iterations_completed} iterations completed, {iterations} requested")
    records = manifest.iterations if manifest is not None else ()
    returns = [record.mean_return for record in records]
    if any(math.isinf(value) for value in returns):
        reasons.append("an iteration's mean return is infinite")
    if manifest is not None and not any(math.isfinite(value) for value in returns):
        reasons.append("no iteration has a finite mean return (no episode ever ended)")
    logged = sorted({key for record in records for key in record.metrics})
    if metric and metric.startswith("Metrics/") and records and metric not in logged:
        reasons.append(
            f"the parity target's metric {metric!r} is not among the task's log values "
            f"({', '.join(logged) or 'none'}); set parity.target.<task>.metric to one of them, mean_episode_length or "
            "mean_return"
        )
    finite = [value for value in returns if math.isfinite(value)]
    return {
        "ok": not reasons,
        "reasons": reasons,
        "criterion": VALIDATION_CRITERION,
        "iterations_completed": None if manifest is None else manifest.iterations_completed,
        "first_finite_return": finite[0] if finite else None,
        "last_finite_return": finite[-1] if finite else None,
        "final_mean_episode_length": None if manifest is None else manifest.final_mean_episode_length,
        "wall_time_s": None if manifest is None else manifest.wall_time_s,
    }
