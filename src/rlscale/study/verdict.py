"""The ``validate`` stage's verdict: whether a short ``rlscale train`` run proves the task trains with the library."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

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


def validation_verdict(manifest: Mapping | None, iterations: int, exit_code: int, metric: str | None = None) -> dict:
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
        manifest = {}
    elif manifest.get("status") != "completed":
        reasons.append(f"manifest status is {manifest.get('status')!r}, not 'completed'")
    if manifest and manifest.get("iterations_completed") != iterations:
        reasons.append(f"{manifest.get('iterations_completed')} iterations completed, {iterations} requested")
    returns = [record.get("mean_return") for record in manifest.get("iterations", [])]
    returns = [math.nan if value is None else float(value) for value in returns]
    if any(math.isinf(value) for value in returns):
        reasons.append("an iteration's mean return is infinite")
    if manifest and not any(math.isfinite(value) for value in returns):
        reasons.append("no iteration has a finite mean return (no episode ever ended)")
    records = manifest.get("iterations", [])
    logged = sorted({key for record in records for key in record.get("metrics") or {}})
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
        "iterations_completed": manifest.get("iterations_completed"),
        "first_finite_return": finite[0] if finite else None,
        "last_finite_return": finite[-1] if finite else None,
        "final_mean_episode_length": manifest.get("final_mean_episode_length"),
        "wall_time_s": manifest.get("wall_time_s"),
    }
