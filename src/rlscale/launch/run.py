"""Run a resolved launch: the job's environment, the supervisor, and the ranks' exit statuses.

Kept apart from :mod:`.command` (pure) and :mod:`.supervise` (process groups). ``--dry_run`` returns before anything
here imports torch or starts a process.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from rlscale.dist import RUN_TIMESTAMP_ENV, STATUS_DIR_ENV
from rlscale.launch.command import (
    NCCL_PROBE,
    TRAIN_MULTIGPU,
    LauncherCfg,
    build_launch_command,
    parse_launcher_args,
    uses_skrl_jax,
)


def job_environment(environ: Mapping[str, str], nproc_per_node: int, skrl_jax: bool, status_dir: str) -> dict:
    """The ranks' environment: the caller's, plus what lets the ranks agree on a run directory and report back."""
    env = dict(environ)
    env.setdefault(RUN_TIMESTAMP_ENV, datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S"))
    env[STATUS_DIR_ENV] = status_dir
    if skrl_jax:
        env["LOCAL_WORLD_SIZE"] = str(nproc_per_node)  # skrl's JAX launcher sets no local world size
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave the GPU's memory to the torch task
    return env


def _rank_reports(status_dir: Path) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(status_dir.glob("rank_*.json"))}


def _describe_failures(reports: dict[str, dict]) -> list[str]:
    return [
        f"{name.replace('_', ' ')} exited {report['exit_code']}" + (f" ({report['error']})" if report["error"] else "")
        for name, report in reports.items()
        if report["exit_code"] != 0
    ]


def first_failure(status_dir: Path) -> str | None:
    """The failures reported so far, while the job runs; None while every rank that finished succeeded."""
    failures = _describe_failures(_rank_reports(status_dir))
    return "; ".join(failures) if failures else None


def failed_ranks(status_dir: Path, nproc_per_node: int) -> list[str]:
    """Describe each local rank that reported a non-zero exit, and how many never reported at all."""
    reports = _rank_reports(status_dir)
    failed = _describe_failures(reports)
    if len(reports) < nproc_per_node:
        seen = ", ".join(reports) or "none"
        failed.append(f"{nproc_per_node - len(reports)} rank(s) never reported an exit status (reported: {seen})")
    return failed


def run_launcher(argv: Sequence[str], cfg: LauncherCfg, environ: Mapping[str, str] | None = None) -> int:
    """Resolve a launch; print it for ``--dry_run``, else run it supervised and check every local rank's status.

    skrl's JAX launcher exits 0 even when a rank crashed, so a zero exit code alone proves nothing.

    Returns:
        0 for ``--dry_run``; else the launcher's exit code, or 1 if it was 0 but a local rank failed.
    """
    environ = os.environ if environ is None else environ
    args, forwarded = parse_launcher_args(argv, cfg, environ)
    command = build_launch_command(args, forwarded, cfg, environ)
    if args.dry_run:
        print(shlex.join(command), flush=True)
        return 0
    print(f"[INFO] Launching distributed workers with: {shlex.join(command)}", file=sys.stderr, flush=True)
    from rlscale.launch.supervise import run_supervised

    with tempfile.TemporaryDirectory(prefix="rlscale-status-") as status_dir:
        skrl_jax = uses_skrl_jax(args, forwarded)
        code = run_supervised(
            command,
            env=job_environment(environ, args.nproc_per_node, skrl_jax, status_dir),
            # torchrun ends the job itself when a rank fails, and names it; skrl's JAX launcher waits on the others.
            abort_check=(lambda: first_failure(Path(status_dir))) if skrl_jax else None,
        )
        failures = failed_ranks(Path(status_dir), args.nproc_per_node)
    if failures:
        print(f"[ERROR] {'; '.join(failures)}", file=sys.stderr, flush=True)
        return code or 1
    return code


def main_train_multigpu(argv: list[str]) -> int:
    """Entry point of ``rlscale train_multigpu`` / ``train-multigpu``."""
    return run_launcher(argv, TRAIN_MULTIGPU)


def main_nccl_probe(argv: list[str]) -> int:
    """Entry point of ``rlscale nccl_probe``."""
    return run_launcher(argv, NCCL_PROBE)
