"""Run a resolved launch: the job's environment, the supervisor, and the ranks' exit statuses.

Kept apart from :mod:`.command` (pure) and :mod:`.supervise` (process groups). ``--dry_run`` returns before anything
here imports torch or starts a process.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import shlex
import sys
import tempfile
from argparse import Namespace
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from signal import SIGTERM
from typing import TYPE_CHECKING

from rlscale.device import Device
from rlscale.dist import (
    HANG_TIMEOUT_ENV,
    HEARTBEAT_DIR_ENV,
    LOG_ALL_RANKS_ENV,
    PLACEMENT_ENV,
    RUN_TIMESTAMP_ENV,
    STATUS_DIR_ENV,
    SUPERVISOR_PID_ENV,
    NodePlacement,
)
from rlscale.launch.command import (
    NCCL_PROBE,
    TRAIN_MULTIGPU,
    LauncherCfg,
    build_launch_command,
    build_parser,
    parse_launcher_args,
    uses_skrl_jax,
)
from rlscale.launch.gpus import free_gpu_memory, visible_gpu_count
from rlscale.launch.hang_watch import HangWatch
from rlscale.launch.placement import describe_placement, local_gpu_ids, plan_node
from rlscale.launch.ports import free_local_port, port_taken
from rlscale.launch.torch_gpus import TorchGpuProbe, gpu_rank_shortfall, probe_torch_gpus
from rlscale.resume import continue_command, start_over_note
from rlscale.run.memory_fit import DeviceMemory, MemoryProbe, device_memory
from rlscale.run.spec import RUN_SPEC_ENV, JobShape, write_spec
from rlscale.run.stop_signals import (
    INTERRUPTED_EXIT_CODE,
    REQUEUE_EXIT_CODE,
    REQUEUE_SIGNAL,
    StopSignals,
    asks_requeue,
)

if TYPE_CHECKING:
    from rlscale.run.spec import RunSpec


RANK_PREFIX_TEMPLATE = "[rank${rank}]:"
"""torchrun's prefix of a rank's console lines (``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE``) with ``--log_all_ranks``:
the global rank, which tells the ranks of several nodes apart (torchrun's own names the local rank)."""


def job_environment(
    environ: Mapping[str, str],
    nproc_per_node: int,
    skrl_jax: bool,
    status_dir: str,
    *,
    heartbeat_dir: str | None = None,
    hang_timeout: float = 0.0,
    run_spec: Path | None = None,
    placement: NodePlacement | None = None,
    log_all_ranks: bool = False,
    max_restarts: int = 0,
) -> dict:
    """The ranks' environment: the caller's, plus what lets the ranks agree on a run directory, report back, beat for
    the hang watchdog, size their collective timeout, notice this launcher's death, find their resolved spec and their
    CPUs (none for ranks this launcher does not place), print to the console (torchrun ranks, ``log_all_ranks``), and
    lets torchrun restart them (``max_restarts``).

    The caller's ``NCCL_*`` variables pass unchanged: some hosts need NVLink multicast kept off through them.
    """
    env = dict(environ)
    if placement is None:
        env.pop(PLACEMENT_ENV, None)
    else:
        env[PLACEMENT_ENV] = placement.to_json()
    if run_spec is not None:
        env[RUN_SPEC_ENV] = str(run_spec)
    env.setdefault(RUN_TIMESTAMP_ENV, datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S"))
    env[STATUS_DIR_ENV] = status_dir
    env[SUPERVISOR_PID_ENV] = str(os.getpid())
    env[HANG_TIMEOUT_ENV] = str(hang_timeout)
    if heartbeat_dir is not None:
        env[HEARTBEAT_DIR_ENV] = heartbeat_dir
    # A timed-out NCCL collective then ends its rank instead of blocking forever (the timeout follows --hang_timeout,
    # rlscale.dist.collective_timeout). Not TORCH_NCCL_BLOCKING_WAIT: it makes every collective wait on the CPU.
    env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3")
    if log_all_ranks and not skrl_jax:
        env[LOG_ALL_RANKS_ENV] = "1"
        env.setdefault("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", RANK_PREFIX_TEMPLATE)
    if max_restarts:
        # torchrun's c10d rendezvous shares one store among all attempts by default, where a restarted group can
        # read the failed group's addresses (gloo) or NCCL id and never connect; unshared, each attempt's rank 0
        # hosts its own.
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    if skrl_jax:
        env["LOCAL_WORLD_SIZE"] = str(nproc_per_node)  # skrl's JAX launcher sets no local world size
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave the GPU's memory to the torch task
    return env


def _rank_reports(status_dir: Path) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(status_dir.glob("rank_*.json"))}


def _describe_failures(reports: dict[str, dict]) -> list[str]:
    """One phrase per failed rank, the first to fail first: the others' errors (a broken connection) are mostly its
    symptoms."""
    failed = sorted(
        ((name, report) for name, report in reports.items() if report["exit_code"] != 0),
        key=lambda item: item[1].get("failed_at", math.inf),
    )
    return [
        f"{name.replace('_', ' ')}{' failed first:' if index == 0 and len(failed) > 1 else ''} exited "
        f"{report['exit_code']}" + (f" ({report['error']})" if report["error"] else "")
        for index, (name, report) in enumerate(failed)
    ]


def first_failure(status_dir: Path) -> str | None:
    """The failures reported so far, while the job runs; None while every rank that finished succeeded."""
    failures = _describe_failures(_rank_reports(status_dir))
    return "; ".join(failures) if failures else None


def stopped_ranks(status_dir: Path, nproc_per_node: int) -> str | None:
    """The line saying that every local rank stopped on request and recorded it; None if any did not (or failed)."""
    reports = _rank_reports(status_dir)
    if len(reports) < nproc_per_node or any(
        report["exit_code"] != INTERRUPTED_EXIT_CODE or report["error"] for report in reports.values()
    ):
        return None
    names = ", ".join(name.replace("_", " ") for name in reports)
    return f"{names} stopped gracefully (interrupted, exit {INTERRUPTED_EXIT_CODE})"


def failed_ranks(status_dir: Path, nproc_per_node: int) -> list[str]:
    """Describe each local rank that reported a non-zero exit, and how many never reported at all."""
    reports = _rank_reports(status_dir)
    failed = _describe_failures(reports)
    if not reports:
        failed.append(
            f"none of the {nproc_per_node} rank(s) reported an exit status: the cause is torchrun's error above"
        )
    elif len(reports) < nproc_per_node:
        seen = ", ".join(reports)
        failed.append(f"{nproc_per_node - len(reports)} rank(s) never reported an exit status (reported: {seen})")
    return failed


RankCheck = Callable[[Namespace, list[str]], "RunSpec | None"]
"""Validates the arguments forwarded to the ranks (given the launcher's options), exiting 2 on the first bad one, and
returns the ranks' resolved spec (None for ranks that take none)."""


@dataclass(frozen=True)
class Launch:
    """A resolved launch: the launcher's options, the ranks' arguments and spec, the command that starts them and the
    placement of this node's ranks."""

    args: Namespace
    forwarded: list[str]
    command: list[str]
    spec: RunSpec | None
    placement: NodePlacement | None = None
    argv: tuple[str, ...] = ()
    """The launcher's command line, without its program and subcommand."""


def job_shape(args: Namespace) -> JobShape:
    """The ranks the launcher's options start; unknown (None) while torchrun is left to count (``--num_gpus gpu``
    in a dry run, an elastic ``--nnodes MIN:MAX``)."""
    nnodes = args.nnodes or "1"
    nodes = int(nnodes) if nnodes.isdigit() else None
    per_node = args.nproc_per_node if isinstance(args.nproc_per_node, int) else None
    return JobShape(nodes * per_node if nodes and per_node else None, per_node or 1)


def ranks_memory(args: Namespace, environ: Mapping[str, str]) -> MemoryProbe:
    """How the launcher reads the memory its ranks' envs must fit: the host's RAM for CPU ranks; for GPU ranks, the
    least free memory among this node's ranks' GPUs, through NVML (torch would open a CUDA context on a GPU that a
    rank needs). None where NVML cannot tell: each rank's build of the task still refuses what does not fit."""

    def read(device: Device) -> DeviceMemory | None:
        if not device.is_cuda:
            return device_memory(device)
        gpus = local_gpu_ids(environ, args.nproc_per_node)
        try:
            free = free_gpu_memory(gpus)
        except Exception:  # no driver library, a MIG id
            return None
        least = min(range(len(gpus)), key=free.__getitem__)
        return DeviceMemory(free[least], f"GPU {gpus[least]}")

    return read


def plan_placement(args: Namespace, cfg: LauncherCfg, environ: Mapping[str, str]) -> NodePlacement | None:
    """This node's placement of its ranks (:func:`rlscale.launch.placement.plan_node`); None for a launcher that
    places none, or while torchrun is left to count the ranks (a dry run on a host without GPUs)."""
    if not cfg.places_ranks or not isinstance(args.nproc_per_node, int):
        return None
    return plan_node(args.cpu_binding, args.nproc_per_node, args.ranks_on_cpu, environ)


def static_rendezvous_port(args: Namespace, forwarded: Sequence[str]) -> int | None:
    """The port torchrun's static rendezvous listens on here: ``--master_port`` on node 0 (other nodes connect to
    it); None when this node binds no fixed port (one node without ``--master_port`` takes a free one, c10d
    rendezvous, skrl's JAX launcher)."""
    static = args.rdzv_backend in (None, "static") and args.rdzv_endpoint is None
    node_zero = args.node_rank in (None, "0")
    if args.master_port is None or not static or not node_zero or uses_skrl_jax(args, forwarded):
        return None
    return int(args.master_port)


def resolve_launch(
    argv: Sequence[str],
    cfg: LauncherCfg,
    environ: Mapping[str, str],
    check_ranks: RankCheck | None = None,
    torch_gpus: TorchGpuProbe = probe_torch_gpus,
) -> Launch:
    """Parse the launcher's options, check and resolve the ranks' (``check_ranks``) and build the command.

    ``check_ranks`` runs here, so that a bad argument is one line and exit code 2 before any process starts, not the
    same error from every rank under torchrun's failure report. Then a launch of GPU ranks asks torch
    (``torch_gpus``) whether it can run them: GPU ranks never fall back to the CPU. And the port that node 0 of a
    static rendezvous listens on must be free. A one-node skrl JAX launch that names no coordinator gets one on a free
    localhost port. A ``--dry_run`` skips these: it needs no torch, and the job it prints runs later, maybe elsewhere.
    """
    args, forwarded = parse_launcher_args(argv, cfg, environ)
    spec = check_ranks(args, forwarded) if check_ranks is not None else None
    if not args.dry_run and not args.ranks_on_cpu:
        shortfall = gpu_rank_shortfall(args.nproc_per_node, visible_gpu_count(environ)[1], torch_gpus())
        if shortfall is not None:
            build_parser(cfg).error(shortfall)
    port = None if args.dry_run else static_rendezvous_port(args, forwarded)
    reason = None if port is None else port_taken(port)
    if reason is not None:
        build_parser(cfg).error(
            f"--master_port {port} cannot be bound on this host ({reason}): another job's rendezvous holds it? Pick a "
            "free port, or on one node leave --master_port out and torchrun takes a free one."
        )
    if not args.dry_run and uses_skrl_jax(args, forwarded) and args.coordinator_address is None:
        # skrl's JAX launcher defaults to 127.0.0.1:5000: two one-node jobs on a host would meet on it.
        args.coordinator_address = f"127.0.0.1:{free_local_port()}"
    command = build_launch_command(args, forwarded, cfg, environ)
    return Launch(args, forwarded, command, spec, plan_placement(args, cfg, environ), tuple(argv))


def run_launcher(
    argv: Sequence[str],
    cfg: LauncherCfg,
    environ: Mapping[str, str] | None = None,
    *,
    check_ranks: RankCheck | None = None,
    torch_gpus: TorchGpuProbe = probe_torch_gpus,
) -> int:
    """Resolve a launch (:func:`resolve_launch`) and start it (:func:`start_launch`).

    Args:
        argv: Launcher command line without the program/subcommand name.
        cfg: Launcher configuration.
        environ: Environment of the launch; default ``os.environ``.
        check_ranks: Checks and resolves the ranks' arguments.
        torch_gpus: Tells what CUDA devices torch offers GPU ranks.
    """
    environ = os.environ if environ is None else environ
    return start_launch(resolve_launch(argv, cfg, environ, check_ranks, torch_gpus), environ)


def start_launch(launch: Launch, environ: Mapping[str, str] | None = None) -> int:
    """Print the command (and, on stderr, the ranks' placement) for ``--dry_run``; else run it supervised and check
    every local rank's exit status.

    skrl's JAX launcher exits 0 even when a rank crashed, so a zero exit code alone proves nothing.

    Returns:
        0 for ``--dry_run``; else the launcher's exit code, or 1 if it was 0 but a local rank failed (130 if every
        rank stopped on request).
    """
    environ = os.environ if environ is None else environ
    args, command = launch.args, launch.command
    if launch.placement is not None:
        print("\n".join(describe_placement(launch.placement)), file=sys.stderr, flush=True)
    if args.dry_run:
        print(shlex.join(command), flush=True)
        return 0
    spec = launch.spec
    if spec is not None and spec.resume is None:
        note = start_over_note(Path(spec.log_root), spec.identity, TRAIN_MULTIGPU.prog, launch.argv)
        if note is not None:
            print(note, file=sys.stderr, flush=True)
    print(f"[INFO] Launching distributed workers with: {shlex.join(command)}", file=sys.stderr, flush=True)
    from rlscale.launch.supervise import run_supervised

    with tempfile.TemporaryDirectory(prefix="rlscale-status-") as status_dir:
        skrl_jax = uses_skrl_jax(args, launch.forwarded)
        heartbeat_dir = Path(status_dir, "heartbeat")
        heartbeat_dir.mkdir()
        # torchrun ends the job itself when a rank fails, and names it; skrl's JAX launcher waits on the others.
        checks = [partial(first_failure, Path(status_dir))] if skrl_jax else []
        watch = HangWatch(heartbeat_dir, args.nproc_per_node, args.hang_timeout) if args.hang_timeout > 0 else None
        if watch is not None:
            checks.append(watch.check)
        env = job_environment(
            environ,
            args.nproc_per_node,
            skrl_jax,
            status_dir,
            heartbeat_dir=str(heartbeat_dir),
            hang_timeout=args.hang_timeout,
            run_spec=None if launch.spec is None else write_spec(launch.spec, Path(status_dir)),
            placement=launch.placement,
            log_all_ranks=args.log_all_ranks,
            max_restarts=args.max_restarts or 0,
        )
        stops = StopSignals()
        code = run_supervised(
            command, env=env, abort_check=_first_reason(checks), stops=stops, forward_as={REQUEUE_SIGNAL: SIGTERM}
        )
        stopped = stopped_ranks(Path(status_dir), args.nproc_per_node)
        failures = failed_ranks(Path(status_dir), args.nproc_per_node)
    if stopped is not None:
        print(f"[INFO] {stopped}", file=sys.stderr, flush=True)
        if launch.spec is not None:  # a training run
            line = continue_command(TRAIN_MULTIGPU.prog, launch.argv)
            print(f"[rlscale] to continue this run: {line}", file=sys.stderr, flush=True)
        return REQUEUE_EXIT_CODE if asks_requeue(stops.first, environ) else code or INTERRUPTED_EXIT_CODE
    if failures:
        print(f"[ERROR] {'; '.join(failures)}", file=sys.stderr, flush=True)
        return code or 1
    return code or int(watch is not None and watch.stall is not None)


def _first_reason(checks: list[Callable[[], str | None]]) -> Callable[[], str | None] | None:
    """One abort check out of several: the first reason any of them gives."""
    if not checks:
        return None
    return lambda: next((reason for check in checks if (reason := check())), None)


def check_train_ranks(args: Namespace, forwarded: list[str]) -> RunSpec:
    """Resolve the ranks' spec from their ``rlscale train`` arguments: every check before a launch (torch is imported
    for the task, device, checkpoint and ``--agent`` keys); with ``--dry_run`` only those that need no torch."""
    from rlscale.run.args import build_parser as rank_parser
    from rlscale.run.spec import resolve_spec

    rank_argv = [arg for arg in forwarded if arg != "--distributed"]
    parser = rank_parser(TRAIN_MULTIGPU.prog)
    parser.help_command = "rlscale train"  # the ranks' options are rlscale train's
    parser.other_options = build_parser(TRAIN_MULTIGPU).option_strings()  # a mistyped launcher option lands here
    parser.set_defaults(rl_library=args.rl_library)  # the launcher's parse of it, handed over, not written and reread
    return resolve_spec(
        rank_argv, parser, torch_free=args.dry_run, job=job_shape(args), memory=ranks_memory(args, os.environ)
    )


def check_probe_ranks(args: Namespace, forwarded: list[str]) -> None:
    """Check the arguments forwarded to ``nccl_probe``'s ranks with the probe's own (torch-free) parser, and a
    ``probe_hang`` fault asked for in ``$RLSCALE_INJECT_FAULT``."""
    from rlscale.faults import probe_fault_from_environment
    from rlscale.launch.probe import parse_probe_args

    parse_probe_args(forwarded, NCCL_PROBE.prog, other_options=build_parser(NCCL_PROBE).option_strings())
    try:
        probe_fault_from_environment()
    except ValueError as error:
        build_parser(NCCL_PROBE).error(str(error))


def main_train_multigpu(argv: list[str]) -> int:
    """Entry point of ``rlscale train_multigpu`` / ``train-multigpu``."""
    return run_launcher(argv, TRAIN_MULTIGPU, check_ranks=check_train_ranks)


def main_nccl_probe(argv: list[str]) -> int:
    """Entry point of ``rlscale nccl_probe``."""
    return run_launcher(argv, NCCL_PROBE, check_ranks=check_probe_ranks)
