"""``rlscale doctor``: its command line, the checks of its input, and the loop that runs the procedure's steps.

A bad input is one line and exit code 2, before anything is written or started. Progress lines (each step as it
starts and ends) go to stderr, the report to stdout. Exit code 0 when everything passed, 1 when something failed
(even if a workaround fixed it), 130 when interrupted.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from rlscale.argparsing import OneLineParser
from rlscale.faults import fault_from_environment
from rlscale.launch.checks import LaunchError, check_nccl_environment
from rlscale.launch.doctor.execute import command_line, execute
from rlscale.launch.doctor.procedure import procedure
from rlscale.launch.doctor.report import Report
from rlscale.launch.doctor.steps import (
    HANG_TIMEOUT_S,
    LAST_STAGE,
    PROBE_TIMEOUT_S,
    TRAIN_TIMEOUT_S,
    DoctorConfig,
    Outcome,
    Step,
    StepResult,
)
from rlscale.launch.gpus import visible_gpu_count
from rlscale.paths import unwritable_reason
from rlscale.rl import LIBRARIES
from rlscale.run.stop_signals import INTERRUPTED_EXIT_CODE

CPU_MAX_WORLD_SIZE = 3
"""Default largest world size on CPU ranks: 2, and 3 (an odd one)."""


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="rlscale doctor",
        description="The multi-GPU troubleshooting procedure for a task and library: a single-rank run, the resolved "
        "launch, nccl_probe at each world size, the topology, an NCCL_DEBUG=INFO rerun of a failing size and the "
        "NCCL workarounds one at a time. Ends with a report and, if one is needed, the export line for this machine.",
    )
    add = parser.add_argument
    add("--task", required=True, help="task id of the single-rank run and the dry run (see `rlscale list_tasks`)")
    add("--rl_library", default="rsl_rl", choices=tuple(LIBRARIES), help="RL library (default rsl_rl)")
    add(
        "--device",
        default="auto",
        choices=("auto", "cuda", "cpu"),
        help="cuda: GPU ranks (NCCL); cpu: CPU ranks (gloo); auto (default): cuda if a GPU is visible, else cpu",
    )
    add(
        "--max_world_size",
        type=int,
        help=f"largest world size probed, from 2 (default: every visible GPU; {CPU_MAX_WORLD_SIZE} on CPU ranks)",
    )
    add("--iterations", type=int, default=2, help="iterations of the single-rank run (default 2)")
    add("--num_envs", type=int, help="envs of the single-rank run (default: the task's)")
    add(
        "--probe_timeout",
        type=float,
        default=PROBE_TIMEOUT_S,
        help="seconds a probe may take in all, startup included (default %(default)g)",
    )
    add(
        "--hang_timeout",
        type=float,
        default=HANG_TIMEOUT_S,
        help="seconds a probe's ranks may make no progress once their process group formed (default %(default)g)",
    )
    add(
        "--train_timeout",
        type=float,
        default=TRAIN_TIMEOUT_S,
        help="seconds the single-rank run may take (default %(default)g)",
    )
    add("--log_dir", help="folder of each step's output (default: a new rlscale-doctor-* folder in the temp folder)")
    add("--output", help="also write the report as JSON to this file")
    return parser


def resolve_config(argv: list[str], environ: Mapping[str, str]) -> tuple[DoctorConfig, str | None]:
    """Parse and check the command line; a bad input exits 2 with one line, before anything is written.

    Returns the configuration (its ``log_dir`` still to be made) and the ``--output`` file.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("iterations", "num_envs", "max_world_size"):
        value, low = getattr(args, name), 2 if name == "max_world_size" else 1
        if value is not None and value < low:
            parser.error(f"--{name} must be at least {low}, got {value}")
    for name in ("probe_timeout", "hang_timeout", "train_timeout"):
        if not 0 < getattr(args, name) < float("inf"):
            parser.error(f"--{name} must be a number of seconds > 0, got {getattr(args, name)}")
    from rlscale.tasks import UnknownTaskError, resolve_task_id

    try:
        task = resolve_task_id(args.task)
    except UnknownTaskError as error:
        parser.error(f"--task: {error}")
    try:
        check_nccl_environment(environ)
        fault_from_environment()
        visible, source = visible_gpu_count(environ)
    except (LaunchError, ValueError) as error:
        parser.error(str(error))
    device = args.device if args.device != "auto" else ("cuda" if visible else "cpu")
    if device == "cuda":
        largest = _check_gpus(parser, visible, source, args.max_world_size)
    else:
        largest = args.max_world_size or CPU_MAX_WORLD_SIZE
    if args.output and Path(args.output).is_dir():
        parser.error(f"--output {args.output}: a folder; name a file, e.g. {Path(args.output, 'doctor.json')}")
    for flag, folder in (("--output", args.output and Path(args.output).parent), ("--log_dir", args.log_dir)):
        reason = folder is not None and unwritable_reason(Path(folder))
        if reason:
            parser.error(f"{flag} {getattr(args, flag[2:])}: {reason}; name a folder you can write")
    config = DoctorConfig(
        task=task,
        library=args.rl_library,
        device=device,
        world_sizes=tuple(range(2, largest + 1)),
        log_dir=args.log_dir or "",
        iterations=args.iterations,
        num_envs=args.num_envs,
        probe_timeout_s=args.probe_timeout,
        hang_timeout_s=args.hang_timeout,
        train_timeout_s=args.train_timeout,
    )
    return config, args.output


def _check_gpus(parser: OneLineParser, visible: int, source: str, asked: int | None) -> int:
    """The largest world size of GPU ranks: ``asked``, else every visible GPU; refuses what torch cannot run."""
    if not visible:
        parser.error(f"--device cuda: no GPU visible ({source}); pass --device cpu for CPU ranks (gloo)")
    if asked is not None and asked > visible:
        parser.error(f"--max_world_size {asked}: only {visible} GPU(s) visible ({source}); use at most {visible}")
    from rlscale.launch.torch_gpus import gpu_rank_shortfall, probe_torch_gpus

    shortfall = gpu_rank_shortfall(asked or visible, source, probe_torch_gpus())
    if shortfall is not None:
        parser.error(shortfall)
    return asked or visible


def _progress(step: Step, message: str) -> None:
    print(f"[doctor {step.kind.stage}/{LAST_STAGE}] {step.title}: {message}", file=sys.stderr, flush=True)


def _log_name(index: int, step: Step) -> str:
    return f"{index:02d}_{re.sub(r'[^A-Za-z0-9]+', '_', step.title).strip('_').lower()}.log"


StepRunner = Callable[[Step, Mapping[str, str], Path, str], StepResult]
"""Runs one step (:func:`~.execute.execute`: the step, the environment, its log file, the backend)."""


def run_doctor(config: DoctorConfig, environ: Mapping[str, str], run_step: StepRunner = execute) -> Report:
    """Drive the procedure: run each step it asks for with ``run_step``, print progress, and return its report."""
    ranks = "CPU ranks (gloo)" if config.device == "cpu" else "GPU ranks (NCCL)"
    sizes = ", ".join(map(str, config.world_sizes)) or "none"
    print(
        f"[doctor] {config.task} with {config.library} on {ranks}, world sizes {sizes}; each step's output goes to "
        f"{config.log_dir}",
        file=sys.stderr,
        flush=True,
    )
    steps = procedure(config, environ)
    result: StepResult | None = None
    index = 0
    try:
        while True:
            step = steps.send(result) if result is not None else next(steps)
            index += 1
            if step.skip is None:
                _progress(step, command_line(step) if step.argv else "started")
            try:
                result = run_step(step, environ, Path(config.log_dir, _log_name(index, step)), config.backend)
            except KeyboardInterrupt:
                result = StepResult(step, Outcome.INTERRUPTED, detail="stopped on request")
            ending = f"{result.outcome}" + (f" in {result.seconds:.1f} s" if result.outcome != Outcome.SKIPPED else "")
            _progress(step, ending + (f" ({result.detail})" if result.detail else ""))
    except StopIteration as done:
        return done.value


def main(argv: list[str]) -> int:
    """Entry point of ``rlscale doctor``."""
    environ = dict(os.environ)
    config, output = resolve_config(argv, environ)
    if config.log_dir:
        Path(config.log_dir).mkdir(parents=True, exist_ok=True)
    else:
        config = replace(config, log_dir=tempfile.mkdtemp(prefix="rlscale-doctor-"))
    report = run_doctor(config, environ)
    print("\n".join(report.lines()), flush=True)
    if output:
        Path(output).write_text(json.dumps(report.to_json(), indent=2) + "\n")
    if report.interrupted:
        return INTERRUPTED_EXIT_CODE
    return 0 if report.passed else 1
