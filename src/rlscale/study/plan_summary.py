"""The study's plan in a few lines, printed when Snakemake parses the workflow (``snakemake -n`` included): the
device, the cells and runs, and each run's budget, so that a user sees what a config will run before it runs."""

from __future__ import annotations

from collections.abc import Mapping

from rlscale.study.config import envs_for


def plan_lines(study: Mapping) -> list[str]:
    """Lines describing the effective config ``study`` (:func:`rlscale.study.config.validated_config`)."""
    tasks, libraries, sizes, seeds = study["tasks"], study["libraries"], study["world_sizes"], study["seeds"]
    env_counts = sum(len(envs_for(study, task)) for task in tasks)
    cells = env_counts * len(libraries) * len(sizes)
    iterations = study["iterations"]
    lines = [
        f"plan: {study['study']} on {study['device']}, world sizes {sorted(sizes)}: {len(tasks)} task(s) x "
        f"{len(libraries)} librar{'y' if len(libraries) == 1 else 'ies'} x {len(sizes)} world size(s), "
        f"{env_counts} task/env-count pair(s): {cells} training cell(s), {cells * len(seeds)} benchmark run(s) "
        f"({len(seeds)} seed(s)), {len(tasks) * len(libraries) * len(sizes)} train run(s)",
        f"plan budgets per run: check_task at {study['validate_num_envs']} envs; validate {iterations['validate']} "
        f"iterations and train {iterations['train']} at the task's largest env count per rank; benchmark "
        f"{iterations['benchmark']} iterations ({study['warmup_iterations']} warm-up) per seed",
    ]
    parity = study.get("parity") or {}
    budgets = {task: steps for task, steps in (parity.get("max_env_steps") or {}).items() if task in tasks}
    targets = [task for task in (parity.get("target") or {}) if task in tasks]
    if targets:
        steps = ", ".join(f"{task} {budgets.get(task, 0):,}" for task in targets)
        lines.append(f"plan parity: at most these global env steps per run: {steps}")
    evaluated = study.get("evaluated_tasks") or []
    if evaluated:
        evaluation = study["evaluation"]
        lines.append(
            f"plan evaluation (rlscale evaluate, one process per run): {', '.join(evaluated)}: the final checkpoint "
            f"of each of their {len(evaluated) * len(libraries) * len(sizes)} train run(s) and every checkpoint of "
            f"their parity runs{' (none)' if not set(evaluated) & set(targets) else ''}, {evaluation['num_envs']} envs "
            f"and seed {evaluation['seed']} each"
        )
    return [*lines, *source_lines(study)]


PLANNED_KEYS = (
    "cluster",
    "tasks",
    "libraries",
    "world_sizes",
    "num_envs_per_rank",
    "num_envs_per_task",
    "seeds",
    "iterations",
    "parity.max_env_steps",
    "parity.target",
)
"""The axes and budgets whose source the plan names."""


def source_lines(study: Mapping) -> list[str]:
    """Where each axis and budget came from: the user's file or ``--config``, ``cpu_fallback``, or the defaults
    (``config/config.yaml`` and the schema); and which of the user's values the fallback left alone."""
    explicit, filled = study.get("explicit") or {}, set(study.get("fallback_filled") or ())
    parts = []
    for key in PLANNED_KEYS:
        value = study
        for name in key.split("."):
            value = (value or {}).get(name)
        written = sorted({source for path, source in explicit.items() if path == key or path.startswith(f"{key}.")})
        from_fallback = key in filled or any(path.startswith(f"{key}.") for path in filled)
        source = ", ".join(written) or ("cpu_fallback" if from_fallback else "default")
        parts.append(f"{key} {_short(value)} ({source})")
    lines = [f"plan values (source): {'; '.join(parts)}"]
    kept = study.get("fallback_kept") or []
    if kept:
        lines.append("plan cpu_fallback left your values: " + ", ".join(f"{key} ({source})" for key, source in kept))
    return lines


def _short(value) -> str:
    """A value as the plan shows it: lists and mappings inline, library entries by name."""
    if isinstance(value, list):
        return "[" + ", ".join(entry["name"] if isinstance(entry, Mapping) else str(entry) for entry in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key}: {_short(entry)}" for key, entry in value.items()) + "}"
    return str(value)
