"""``rlscale benchmark compare``'s runs: each planned run in turn, a child process ``python -m rlscale benchmark
WORKFLOW ...`` supervised like every rlscale launcher (:func:`rlscale.launch.supervise.run_supervised`: its own
process group, signals forwarded, nothing left behind), its outcome recorded in ``plan.json`` as it ends.
"""

from __future__ import annotations

import math
import os
import shlex
import signal
import sys
import time
from pathlib import Path

from rlscale.benchmark.compare.plan import PLAN_FILE, Variant, bundle_path, log_path, planned_runs, run_key, write_json
from rlscale.benchmark.compare.summary import COMPLETED, run_row
from rlscale.launch.supervise import run_supervised

STOPPED_BY_SIGNAL = {128 + signal.SIGINT, 128 + signal.SIGTERM}
"""Exit codes of a run stopped by Ctrl-C or SIGTERM: the comparison stops there too."""


def run_one(argv: list[str], env: dict[str, str], log: Path, timeout_s: float | None) -> dict:
    """Run one benchmark, its stdout and stderr to ``log``; return its outcome (exit code, timed out, seconds)."""
    started = time.monotonic()
    deadline = math.inf if timeout_s is None else started + timeout_s

    def past_deadline() -> str | None:
        return f"run exceeded --run_timeout_s {timeout_s:g}" if time.monotonic() > deadline else None

    with log.open("w") as stream:
        stream.write(f"$ {shlex.join(argv)}\n")
        stream.flush()
        # `exec` keeps one process (the supervised group's leader); 2>&1 puts the run's stderr in its log too.
        shell = ["/bin/sh", "-c", 'exec "$@" 2>&1', "sh", *argv]
        code = run_supervised(shell, env, stdout=stream, abort_check=past_deadline)
    wall_s = time.monotonic() - started
    return {"exit_code": code, "timed_out": past_deadline() is not None and code != 0, "wall_s": wall_s}


def progress_line(index: int, total: int, row: dict) -> str:
    """``[3/10] compiled repeat 1: 412.0 k env-steps/s, 9.8 s``, or the run's failure."""
    head = f"[{index}/{total}] {row['variant']} repeat {row['repeat']}"
    if row["status"] != COMPLETED:
        return f"{head}: {row['status'].upper()} (see {row['log']}), {row['wall_s']:.1f} s"
    if row["throughput"] is not None:
        return f"{head}: {row['throughput'] / 1e3:,.1f} k env-steps/s, {row['wall_s']:.1f} s"
    if row["total_wall_time_s"] is not None:
        return f"{head}: startup {row['total_wall_time_s']:.2f} s, {row['wall_s']:.1f} s"
    return f"{head}: {row['wall_s']:.1f} s"


def run_comparison(directory: Path, plan: dict, timeout_s: float | None) -> int:
    """Run every planned run in turn, recording each outcome in ``plan.json``; return 0, or 130 if interrupted."""
    variants = {variant["name"]: Variant(**variant) for variant in plan["variants"]}
    runs = planned_runs(list(variants), plan["repeats"], plan["base_seed"])
    for index, run in enumerate(runs, start=1):
        variant = variants[run["variant"]]
        (directory / variant.name).mkdir(exist_ok=True)
        bundle = bundle_path(directory, variant.name, run["repeat"])
        log = log_path(directory, variant.name, run["repeat"])
        bundle.unlink(missing_ok=True)
        command = variant.command(plan["common"], run["seed"], bundle)
        outcome = run_one(command, {**os.environ, **variant.env}, log, timeout_s)
        plan["outcomes"][run_key(variant.name, run["repeat"])] = outcome
        write_json(directory / PLAN_FILE, plan)
        print(progress_line(index, len(runs), run_row(directory, plan, run)), flush=True)
        if outcome["exit_code"] in STOPPED_BY_SIGNAL and not outcome["timed_out"]:
            print("[compare] interrupted; the summary covers the runs that finished", file=sys.stderr, flush=True)
            return 130
    return 0
