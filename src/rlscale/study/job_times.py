"""Where a study's time went: one record per leased job command, appended by the job that ran it, tabled by the
aggregate rule (``job_timing.csv`` and summary.md's "Where the time went").

Each record is one JSON line in ``$RLSCALE_JOB_TIMES`` (the workflow sets ``logs/<study>/job_times.jsonl``): the
rule, the command's cell (task, library, world size, env count, seeds), when it started, how long it waited for the
host and for its GPUs, how long it ran, its exit code and how it held its GPUs. Lines are appended with one
``write`` of a file opened ``O_APPEND``, so concurrent jobs never interleave them. Jobs that lease nothing (``plan``,
a local dry run) and the ranks of multi-node jobs (started by ``srun``) are not recorded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported where the table is made: the job launchers that record skip its import
    import pandas as pd

JOB_TIMES_ENV = "RLSCALE_JOB_TIMES"
"""File the study's jobs append their records to; unset, nothing is recorded."""
STUDY_CALL_ENV = "RLSCALE_STUDY_CALL"
"""When the Snakemake call that started the job parsed the workflow: a study continued in a later call keeps apart."""

COLUMNS = [
    "call",
    "rule",
    "command",
    "task",
    "library",
    "world_size",
    "num_envs",
    "seeds",
    "gpus",
    "gpu_lease",
    "started_s",
    "host_wait_s",
    "gpu_wait_s",
    "run_s",
    "exit_code",
]
"""Columns of ``job_timing.csv``: ``started_s`` counts from the first job of the same call."""


@dataclass(frozen=True)
class TimedCommand:
    """What a job time record says of the command: its ``rlscale`` subcommand and its cell, by column (``task``,
    ``library``, ``world_size``, ``num_envs``, ``seeds``), from the job's record
    (:meth:`rlscale.study.job.Job.timed`)."""

    command: str
    cell: Mapping[str, str]


def record_job(
    *,
    rule: str,
    timed: TimedCommand | None,
    started_unix: float,
    host_wait_s: float,
    gpu_wait_s: float,
    run_s: float,
    exit_code: int,
    gpu_ids: Sequence[str],
    gpu_lease: str,
    environ: Mapping[str, str],
) -> None:
    """Append one job command's record to ``$RLSCALE_JOB_TIMES`` (nothing when unset); ``timed`` names its command
    and cell (none for a command that is no study job's)."""
    path = environ.get(JOB_TIMES_ENV)
    if not path:
        return
    record = {
        "call": environ.get(STUDY_CALL_ENV, ""),
        "rule": rule,
        "command": timed.command if timed else "",
        **(timed.cell if timed else {}),
        "gpus": ",".join(gpu_ids),
        "gpu_lease": gpu_lease,
        "started_unix": round(started_unix, 3),
        "host_wait_s": round(host_wait_s, 3),
        "gpu_wait_s": round(gpu_wait_s, 3),
        "run_s": round(run_s, 3),
        "exit_code": exit_code,
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def read_job_times(path: Path | str | None) -> pd.DataFrame:
    """The records of ``path`` as ``job_timing.csv``'s table, in start order; empty if there is no file."""
    import pandas as pd

    lines = Path(path).read_text().splitlines() if path is not None and Path(path).is_file() else []
    records = pd.DataFrame([json.loads(line) for line in lines if line.strip()])
    if records.empty:
        return pd.DataFrame(columns=COLUMNS)
    records = records.reindex(columns=[*COLUMNS, "started_unix"]).sort_values("started_unix", kind="stable")
    first = records.groupby("call")["started_unix"].transform("min")
    records["started_s"] = (records["started_unix"] - first).round(3)
    return records[COLUMNS].reset_index(drop=True)


def busy_seconds(starts: Sequence[float], ends: Sequence[float]) -> float:
    """Seconds covered by at least one of the intervals [start, end)."""
    busy = 0.0
    reach = float("-inf")
    for start, end in sorted(zip(starts, ends, strict=True)):
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return busy


def timing_markdown(table: pd.DataFrame) -> list[str]:
    """summary.md's "Where the time went": per Snakemake call its span and GPU-held time, then per rule the jobs'
    run and wait times. No lines for an empty table."""
    if table.empty:
        return []
    lines = [
        "## Where the time went",
        "",
        "Each leased job command's wait and run time (`job_timing.csv`; `plan`, a local dry run, is not timed).",
        "*Span*: the first command's start to the last one's end, per Snakemake call. *GPU held*: the time at least",
        "one command held a GPU. Commands of `check_task`, `validate`, `train` and `evaluate` time nothing and share",
        "a GPU; `benchmark` and `parity` commands hold theirs alone, so a train run's `wall_time_s` above may include",
        "shared time.",
        "",
        "| call | commands | span, s | GPU held, s |",
        "|---|---:|---:|---:|",
    ]
    ends = table["started_s"] + table["host_wait_s"] + table["gpu_wait_s"] + table["run_s"]
    for call, rows in table.groupby("call", sort=False):
        on_gpu = rows["gpus"].fillna("").astype(str) != ""
        run_starts = rows["started_s"] + rows["host_wait_s"] + rows["gpu_wait_s"]
        held = busy_seconds(list(run_starts[on_gpu]), list(ends[rows.index][on_gpu])) if on_gpu.any() else None
        lines.append(
            f"| {call} | {len(rows)} | {ends[rows.index].max():.0f} | {'–' if held is None else f'{held:.0f}'} |"
        )
    lines += [
        "",
        "| rule | commands | run, s (total) | run, s (median) | waited, s (total) | GPU lease |",
        "|---|---:|---:|---:|---:|---|",
    ]
    waited = table["host_wait_s"] + table["gpu_wait_s"]
    for rule, rows in table.groupby("rule", sort=False):
        leases = ", ".join(sorted(set(rows["gpu_lease"].astype(str))))
        lines.append(
            f"| {rule} | {len(rows)} | {rows['run_s'].sum():.0f} | {rows['run_s'].median():.1f} "
            f"| {waited[rows.index].sum():.0f} | {leases} |"
        )
    return [*lines, ""]
