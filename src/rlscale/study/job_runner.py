"""Run a study job's ``rlscale`` command where its ranks belong: on GPUs leased on this host, or as one node of a
multi-node SLURM job.

Every job that starts ranks goes through :func:`run_leased` (one node) or :func:`run_multinode` (``srun``, one task
per node). Both refuse to run when Snakemake granted a different GPU count than the world size needs: Snakemake
silently shrinks ``resources.gpu`` to the ``--resources gpu=M`` limit, and a scaling study that quietly ran on fewer
GPUs would report wrong numbers. On one host the jobs that share their GPUs ask Snakemake for none (the lease shares
them), so ``--resources gpu=M`` counts only the GPUs held alone; under SLURM every job asks for its own.

A single-node job also holds the host (:func:`rlscale.launch.lease.acquire_host`), alone or shared, and shares its
GPUs or holds them alone, as its stage's row of :data:`rlscale.study.stage_policy.STAGE_POLICIES` says. Every leased
command's waits and run time go to the study's job time records (:mod:`rlscale.study.job_times`).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import TextIO

from rlscale.dist import RUN_TIMESTAMP_ENV
from rlscale.launch.lease import LeaseError, acquire, acquire_host
from rlscale.launch.ranks import NodeSplit
from rlscale.launch.supervise import FORCED_SHUTDOWN_S, GRACEFUL_SHUTDOWN_S, STRAGGLER_GRACE_S, run_supervised
from rlscale.run.stop_signals import REQUEUE_EXIT_CODE
from rlscale.study.job_times import TimedCommand, record_job
from rlscale.study.stage_policy import STAGE_POLICIES, Stage

GRANT_EXIT_CODE = 3
"""Exit code of a job whose granted GPUs differ from what its world size needs (argparse errors use 2)."""

LAUNCHER_SHUTDOWN_S = GRACEFUL_SHUTDOWN_S + FORCED_SHUTDOWN_S + STRAGGLER_GRACE_S + 5.0
"""After a forwarded signal, how long the rlscale launcher may take to stop before the job escalates: the launcher
supervises its own ranks with these grace periods, so only a wedged launcher outlives them (+5 s: its polling)."""


class GrantError(RuntimeError):
    """Snakemake granted a job a different GPU count than its world size needs."""


def restore_restart_count(environ: MutableMapping[str, str]) -> None:
    """Put back ``SLURM_RESTART_COUNT``, which the executor plugin's job step drops with the other ``SLURM_*``
    variables, from ``scontrol``: a requeued job's ranks record that they began with a requeue
    (:func:`rlscale.resume.why_segment_began`)."""
    job_id = environ.get("SLURM_JOB_ID")
    if not job_id or "SLURM_RESTART_COUNT" in environ:
        return
    shown = subprocess.run(["scontrol", "show", "job", "--oneliner", job_id], capture_output=True, text=True)
    if (found := re.search(r"\bRestarts=(\d+)", shown.stdout)) is not None:
        environ["SLURM_RESTART_COUNT"] = found.group(1)


def requeue_if_asked(code: int, environ: Mapping[str, str]) -> int:
    """Pass ``code`` on, first asking SLURM to requeue the job when its command stopped on SLURM's warning signal
    with its checkpoint written (:data:`~rlscale.run.stop_signals.REQUEUE_EXIT_CODE`). The requeued job runs the
    same command: a train job continues with ``--resume auto``; any other starts over, as its rerun does."""
    job_id = environ.get("SLURM_JOB_ID")
    # The first node's, once its ranks (global rank 0, which writes the run's records, among them) have left.
    if code == REQUEUE_EXIT_CODE and job_id and environ.get("SLURM_NODEID", "0") == "0":
        print(f"[rlscale] requeueing SLURM job {job_id}: it continues from its checkpoint", file=sys.stderr, flush=True)
        subprocess.run(["scontrol", "requeue", job_id], check=False)
    return code


def rlscale_command(*args: str) -> list[str]:
    """Return the argv running ``rlscale ARGS`` with this interpreter (the venv's, whatever ``PATH`` holds)."""
    return [sys.executable, "-m", "rlscale", *args]


def check_granted(needed: int, granted: int, world_size: int, stage: Stage, under_slurm: bool = False) -> None:
    """Raise :class:`GrantError` unless Snakemake granted exactly the GPUs the job needs, or what its stage asks for.

    A job that shares its GPUs outside SLURM asks Snakemake for none (:meth:`StagePolicy.requested_gpus
    <rlscale.study.stage_policy.StagePolicy.requested_gpus>`): its grant of 0 is right, since the lease gives it GPUs
    to share.

    Args:
        needed: GPUs the job needs on this node (world size per node; 0 for CPU ranks).
        granted: The rule's ``resources.gpu`` as Snakemake expanded it.
        world_size: The job's world size, for the message.
        stage: The job's stage, for the message and what it asks Snakemake for.
        under_slurm: Whether the job runs inside a SLURM allocation, which grants every job its own GPUs.
    """
    if granted not in (needed, STAGE_POLICIES[stage].requested_gpus(needed, under_slurm=under_slurm)):
        raise GrantError(
            f"{stage} needs {needed} GPU(s) for world size {world_size} but Snakemake granted resources.gpu={granted} "
            "(it silently shrinks a request to the --resources gpu limit). Refusing to run on fewer GPUs; raise the "
            f"limit (--resources gpu={needed}) or drop world size {world_size} from the config."
        )


def run_command(
    command: Sequence[str], env: Mapping[str, str], pass_fds: Sequence[int] = (), stdout: TextIO | None = None
) -> int:
    """Run a job's command under :func:`rlscale.launch.supervise.run_supervised` and return its exit code.

    The command gets the lease's lock fds, so the lease lasts while it lives even if this process is killed; killed,
    this process still takes the command down (the supervisor's parent-death shim), so a SIGKILLed Snakemake leaves
    no training behind to race its rerun. SIGINT/SIGTERM are forwarded; escalation waits
    :data:`LAUNCHER_SHUTDOWN_S`, since the rlscale launcher stops its own ranks first. A command killed by signal N
    returns 128+N, as a shell reports it.
    """
    print(f"[study] running: {shlex.join(command)}", file=sys.stderr, flush=True)
    return run_supervised(command, env, graceful_s=LAUNCHER_SHUTDOWN_S, stdout=stdout, pass_fds=pass_fds)


def run_leased(
    command: Sequence[str],
    *,
    stage: Stage,
    gpus: int,
    granted: int,
    world_size: int,
    stdout: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
    before: Callable[[], None] | None = None,
    timed: TimedCommand | None = None,
) -> int:
    """Hold the host, lease ``gpus`` GPU ids on it, then run ``command`` on them.

    The host is held alone or shared, and the GPUs shared or held alone, as ``stage``'s policy says
    (:data:`~rlscale.study.stage_policy.STAGE_POLICIES`); the host always before the GPUs, the order that keeps two
    jobs from each holding what the other waits for. ``CUDA_VISIBLE_DEVICES`` is set to the leased ids. Inside a SLURM
    job the allocation already owns its GPUs, so none is leased. No port is passed: on one node torchrun's rendezvous
    takes a free one from the kernel (:mod:`rlscale.launch.torchrun`), so two jobs (of this study or another) never
    meet on one.

    Args:
        command: Command to run (``rlscale ...``).
        stage: The job's stage: its policy, and its name in messages and job time records.
        gpus: GPUs the job needs (world size on this node; 0 for CPU ranks).
        granted: The rule's ``resources.gpu`` as Snakemake expanded it; must equal ``gpus`` (see
            :func:`check_granted`).
        world_size: The job's world size, for messages.
        stdout: Where the command's stdout goes; the inherited stdout when ``None``.
        environ: Base environment; defaults to ``os.environ``.
        before: Called once the lease is held, before ``command`` starts (e.g. to clear the run directory).
        timed: The command and cell its job time record names (:mod:`rlscale.study.job_times`).

    Returns:
        The command's exit code; :data:`GRANT_EXIT_CODE` if the grant is wrong, 1 if no lease can be had, 130 if
        interrupted (SIGINT) while waiting for it.
    """
    environ = dict(os.environ if environ is None else environ)
    started = time.time()
    try:
        under_slurm = bool(environ.get("SLURM_JOB_ID"))
        check_granted(gpus, granted, world_size, stage, under_slurm)
        policy = STAGE_POLICIES[stage]
        host = acquire_host(policy.holds_host_alone, environ=environ, label=stage)
        try:
            lease = acquire(0 if under_slurm else gpus, shared=policy.shares_gpus, environ=environ)
        except LeaseError:
            host.release()
            raise
    except GrantError as error:
        print(f"[study] ERROR: {error}", file=sys.stderr, flush=True)
        return GRANT_EXIT_CODE
    except LeaseError as error:
        print(f"[study] ERROR: {error}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:  # Snakemake stopped with Ctrl-C interrupts its queued jobs too: one line, no traceback
        print(f"[study] {stage} interrupted while waiting for its lease: nothing ran", file=sys.stderr, flush=True)
        return 128 + signal.SIGINT
    gpu_lease = ("shared" if lease.shared else "alone") if lease.gpu_ids else "none"
    with host, lease:
        ids = f"{','.join(lease.gpu_ids)} ({gpu_lease})" if lease.gpu_ids else ""
        ids = ids or ("SLURM allocation" if under_slurm and gpus else "none (CPU ranks)")
        hold = "alone" if host.exclusive else "shared"
        print(f"[study] leased GPU(s) {ids}, host {hold}", file=sys.stderr, flush=True)
        if before is not None:
            before()
        running = time.monotonic()
        code = run_command(command, lease.environment(environ), [*host.fds, *lease.fds], stdout)
        record_job(
            rule=stage.value,
            timed=timed,
            started_unix=started,
            host_wait_s=host.waited_s,
            gpu_wait_s=lease.waited_s,
            run_s=time.monotonic() - running,
            exit_code=code,
            gpu_ids=lease.gpu_ids,
            gpu_lease=gpu_lease,
            environ=environ,
        )
        return code


def first_node(environ: Mapping[str, str]) -> str:
    """Return the first hostname of the SLURM allocation (``scontrol show hostnames``), never a local fallback.

    Falling back to ``localhost`` would make every node rendezvous with itself and wait forever.
    """
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        raise RuntimeError("SLURM_JOB_NODELIST is unset: the multi-node rules run only inside a SLURM allocation.")
    result = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    return result.stdout.split()[0]


def multinode_args(split: NodeSplit, rdzv_port: int, environ: Mapping[str, str]) -> list[str]:
    """Return the launcher options of a c10d rendezvous on the allocation's first node, keyed by the SLURM job id.

    The port is ``rdzv_port + SLURM_JOB_ID % 1000``: every node computes the same one, and two multi-node jobs that
    share a first node rarely collide.
    """
    job_id = environ["SLURM_JOB_ID"]
    port = rdzv_port + int(job_id) % 1000 if job_id.isdigit() else rdzv_port
    return [
        *("--nnodes", str(split.nodes), "--num_gpus", str(split.ranks_per_node)),
        *("--rdzv_backend", "c10d", "--rdzv_endpoint", f"{first_node(environ)}:{port}", "--rdzv_id", job_id),
    ]


def run_multinode(
    command: Sequence[str],
    *,
    split: NodeSplit,
    rdzv_port: int,
    environ: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    before: Callable[[], None] | None = None,
) -> int:
    """Run one node's launcher of a multi-node job; ``srun`` starts this once per node of the allocation.

    ``before`` runs on the first node only (``SLURM_NODEID`` 0), once the allocation is checked.

    Returns:
        The launcher's exit code, or :data:`GRANT_EXIT_CODE` when the allocation has a different node count.
    """
    environ = dict(os.environ if environ is None else environ)
    allocated = environ.get("SLURM_NNODES") or environ.get("SLURM_JOB_NUM_NODES")
    if allocated is None or int(allocated) != split.nodes:
        print(
            f"[study] ERROR: this job needs {split.nodes} nodes × {split.ranks_per_node} GPUs but the allocation has "
            f"{allocated or 'no'} node(s) (SLURM_NNODES); refusing to run a different world size.",
            file=sys.stderr,
            flush=True,
        )
        return GRANT_EXIT_CODE
    if before is not None and environ.get("SLURM_NODEID", "0") == "0":
        before()  # The other nodes' ranks write only after the rendezvous, which waits for this node.
    # Each node's launcher names the run directory after its own clock; the job id makes every node agree.
    environ.setdefault(RUN_TIMESTAMP_ENV, f"slurm-job{environ.get('SLURM_JOB_ID', '')}")
    return run_command([*command, *multinode_args(split, rdzv_port, environ)], environ, stdout=stdout)


def launch(
    rlscale_args: Sequence[str],
    *,
    split: NodeSplit,
    device: str,
    granted: int | None,
    stage: Stage,
    rdzv_port: int,
    before: Callable[[], None] | None = None,
    timed: TimedCommand | None = None,
) -> int:
    """Run a multi-GPU ``rlscale`` command (``train_multigpu``, ``benchmark <workflow>_multigpu``) at a world size.

    On one node it leases the split's GPUs (none for CPU ranks) and passes ``--num_gpus``; on several it is one
    ``srun`` task per node with a c10d rendezvous (:func:`run_multinode`).
    """
    if split.nodes > 1:
        return run_multinode(rlscale_command(*rlscale_args), split=split, rdzv_port=rdzv_port, before=before)
    command = rlscale_command(*rlscale_args, "--num_gpus", str(split.world_size))
    gpus = split.gpus_per_node(device)
    world_size = split.world_size
    return run_leased(
        command, stage=stage, gpus=gpus, granted=granted, world_size=world_size, before=before, timed=timed
    )
