"""What each Snakemake job of the study runs: the logic behind the thin launchers in ``scripts/``.

Every job that starts ranks goes through :func:`run_leased` (one node) or :func:`run_multinode` (``srun``, one task
per node). Both refuse to run when Snakemake granted a different GPU count than the world size needs: Snakemake
silently shrinks ``resources.gpu`` to the ``--resources gpu=M`` limit, and a scaling study that quietly ran on fewer
GPUs would report wrong numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from rlscale.dist import RUN_TIMESTAMP_ENV
from rlscale.launch.command import forwarded_value
from rlscale.launch.orphans import dying_with_this_process
from rlscale.study.lease import LeaseError, acquire

GRANT_EXIT_CODE = 3
"""Exit code of a job whose granted GPUs differ from what its world size needs (argparse errors use 2)."""


class GrantError(RuntimeError):
    """Snakemake granted a job a different GPU count than its world size needs."""


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split a launcher's argv at the first ``--``: its own options before, the ``rlscale`` arguments after."""
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def job_parser(description: str, *, ranks: bool = True) -> argparse.ArgumentParser:
    """Return the parser of a ``scripts/`` launcher, with the options every rank-starting job shares."""
    parser = argparse.ArgumentParser(description=description, allow_abbrev=False)
    if ranks:
        parser.add_argument("--world_size", type=int, required=True, help="total ranks of the job")
        parser.add_argument("--device", choices=("cuda", "cpu"), required=True, help="where the ranks run")
        parser.add_argument("--nodes", type=int, default=1, help="nodes of the job (>1: one srun task per node)")
        parser.add_argument("--rdzv_port", type=int, default=29400, help="base port of a multi-node rendezvous")
    parser.add_argument(
        "--granted_gpus", type=int, help="the rule's resources.gpu as Snakemake granted it (single-node jobs)"
    )
    return parser


def parse_job_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """Parse a launcher's own options (before ``--``) and return them with the ``rlscale`` arguments after it."""
    own, rest = split_argv(argv)
    args = parser.parse_args(own)
    if getattr(args, "nodes", 1) == 1 and args.granted_gpus is None:
        parser.error("--granted_gpus is required for a single-node job: pass the rule's {resources.gpu}")
    return args, rest


def rlscale_command(*args: str) -> list[str]:
    """Return the argv running ``rlscale ARGS`` with this interpreter (the venv's, whatever ``PATH`` holds)."""
    return [sys.executable, "-m", "rlscale", *args]


def check_granted(needed: int, granted: int, world_size: int, rule: str = "this job") -> None:
    """Raise :class:`GrantError` unless Snakemake granted exactly the GPUs the job needs.

    Args:
        needed: GPUs the job needs on this node (world size per node; 0 for CPU ranks).
        granted: The rule's ``resources.gpu`` as Snakemake expanded it.
        world_size: The job's world size, for the message.
        rule: The rule's name, for the message.
    """
    if granted != needed:
        raise GrantError(
            f"{rule} needs {needed} GPU(s) for world size {world_size} but Snakemake granted resources.gpu={granted} "
            "(it silently shrinks a request to the --resources gpu limit). Refusing to run on fewer GPUs; raise the "
            f"limit (--resources gpu={needed}) or drop world size {world_size} from the config."
        )


def _forwarding_signals(proc: subprocess.Popen) -> list[tuple[int, object]]:
    """Forward SIGINT/SIGTERM to ``proc``, whose own session keeps it from also getting the terminal's copy."""

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    return [(sig, signal.signal(sig, forward)) for sig in (signal.SIGINT, signal.SIGTERM)]


def run_child(
    command: Sequence[str], env: Mapping[str, str], pass_fds: Sequence[int] = (), stdout: TextIO | None = None
) -> int:
    """Run ``command`` in a session of its own, forward SIGINT/SIGTERM to it, and return its exit code.

    The child gets the lease's lock fds, so the lease lasts while the child lives even if this process is killed.
    Killed, this process takes the child with it (SIGTERM through the parent-death shim, which the rlscale launcher
    passes on to its ranks), so a SIGKILLed Snakemake leaves no training behind to race its rerun.
    A child killed by signal N returns 128+N, as a shell reports it.
    """
    print(f"[study] running: {shlex.join(command)}", file=sys.stderr, flush=True)
    proc = subprocess.Popen(
        dying_with_this_process(command, env),
        env=dict(env),
        pass_fds=tuple(pass_fds),
        stdout=stdout,
        start_new_session=True,
    )
    previous = _forwarding_signals(proc)
    try:
        code = proc.wait()
    finally:
        for sig, handler in previous:
            signal.signal(sig, handler)  # type: ignore[arg-type]
    return 128 - code if code < 0 else code


def run_leased(
    command: Sequence[str],
    *,
    gpus: int,
    granted: int,
    world_size: int,
    port_option: str | None = "--master_port",
    stdout: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
    rule: str = "this job",
    before: Callable[[], None] | None = None,
) -> int:
    """Lease ``gpus`` GPU ids (and a port) on this host, then run ``command`` on them.

    ``CUDA_VISIBLE_DEVICES`` is set to the leased ids and ``port_option PORT`` is appended to ``command``. Inside a
    SLURM job the allocation already owns its GPUs, so only the port is leased.

    Args:
        command: Command to run (``rlscale ...``).
        gpus: GPUs the job needs (world size on this node; 0 for CPU ranks, which lease only a port).
        granted: The rule's ``resources.gpu`` as Snakemake expanded it; must equal ``gpus``.
        world_size: The job's world size, for messages.
        port_option: Option that passes the leased port to ``command``; ``None`` leases no port.
        stdout: Where the command's stdout goes; the inherited stdout when ``None``.
        environ: Base environment; defaults to ``os.environ``.
        rule: The rule's name, for messages.
        before: Called once the lease is held, before ``command`` starts (e.g. to clear the run directory).

    Returns:
        The command's exit code; :data:`GRANT_EXIT_CODE` if the grant is wrong, 1 if no lease can be had.
    """
    environ = dict(os.environ if environ is None else environ)
    try:
        check_granted(gpus, granted, world_size, rule)
        under_slurm = bool(environ.get("SLURM_JOB_ID"))
        lease = acquire(0 if under_slurm else gpus, port=port_option is not None, environ=environ)
    except GrantError as error:
        print(f"[study] ERROR: {error}", file=sys.stderr, flush=True)
        return GRANT_EXIT_CODE
    except LeaseError as error:
        print(f"[study] ERROR: {error}", file=sys.stderr, flush=True)
        return 1
    with lease:
        ids = ",".join(lease.gpu_ids) or ("SLURM allocation" if under_slurm and gpus else "none (CPU ranks)")
        print(f"[study] leased GPU(s) {ids}, port {lease.port}", file=sys.stderr, flush=True)
        port_args = [port_option, str(lease.port)] if port_option else []
        if before is not None:
            before()
        return run_child([*command, *port_args], lease.environment(environ), lease.fds, stdout)


def first_node(environ: Mapping[str, str]) -> str:
    """Return the first hostname of the SLURM allocation (``scontrol show hostnames``), never a local fallback.

    Falling back to ``localhost`` would make every node rendezvous with itself and wait forever.
    """
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        raise RuntimeError("SLURM_JOB_NODELIST is unset: the multi-node rules run only inside a SLURM allocation.")
    result = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    return result.stdout.split()[0]


def multinode_args(nodes: int, gpus_per_node: int, rdzv_port: int, environ: Mapping[str, str]) -> list[str]:
    """Return the launcher options of a c10d rendezvous on the allocation's first node, keyed by the SLURM job id.

    The port is ``rdzv_port + SLURM_JOB_ID % 1000``: every node computes the same one, and two multi-node jobs that
    share a first node rarely collide.
    """
    job_id = environ["SLURM_JOB_ID"]
    port = rdzv_port + int(job_id) % 1000 if job_id.isdigit() else rdzv_port
    return [
        *("--nnodes", str(nodes), "--num_gpus", str(gpus_per_node)),
        *("--rdzv_backend", "c10d", "--rdzv_endpoint", f"{first_node(environ)}:{port}", "--rdzv_id", job_id),
    ]


def run_multinode(
    command: Sequence[str],
    *,
    nodes: int,
    gpus_per_node: int,
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
    if allocated is None or int(allocated) != nodes:
        print(
            f"[study] ERROR: this job needs {nodes} nodes × {gpus_per_node} GPUs but the allocation has "
            f"{allocated or 'no'} node(s) (SLURM_NNODES); refusing to run a different world size.",
            file=sys.stderr,
            flush=True,
        )
        return GRANT_EXIT_CODE
    if before is not None and environ.get("SLURM_NODEID", "0") == "0":
        before()  # The other nodes' ranks write only after the rendezvous, which waits for this node.
    # Each node's launcher names the run directory after its own clock; the job id makes every node agree.
    environ.setdefault(RUN_TIMESTAMP_ENV, f"slurm-job{environ.get('SLURM_JOB_ID', '')}")
    return run_child([*command, *multinode_args(nodes, gpus_per_node, rdzv_port, environ)], environ, stdout=stdout)


def find_manifest(run_root: Path) -> Path | None:
    """Return the newest rank-0 ``manifest.json`` under ``run_root`` (other ranks write theirs in ``rank_<r>/``)."""
    found = [path for path in Path(run_root).rglob("manifest.json") if not path.parent.name.startswith("rank_")]
    return max(found, key=lambda path: path.stat().st_mtime, default=None)


def collect_manifest(run_root: Path, output: Path) -> int:
    """Copy the training run's rank-0 manifest to ``output``; 1 if the run left none."""
    manifest = find_manifest(run_root)
    if manifest is None:
        print(f"[study] ERROR: no manifest.json under {run_root}", file=sys.stderr)
        return 1
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(manifest, output)
    return 0


VALIDATION_CRITERION = (
    "the run exits 0; its manifest says status 'completed' after exactly the requested iterations; every "
    "iteration's mean return is finite or NaN (NaN: no episode ended in it), never infinite; and at least one is "
    "finite, so episodes do end and returns are computed. This proves the task trains end to end with the library; "
    "it does not judge how well it learns."
)
"""The cheap, honest criterion the ``validate`` rule applies before any long job."""


def validation_verdict(manifest: Mapping | None, iterations: int, exit_code: int) -> dict:
    """Apply :data:`VALIDATION_CRITERION` to a finished ``rlscale train`` run.

    Args:
        manifest: The run's rank-0 manifest, or ``None`` if it left none.
        iterations: Iterations the run was asked for.
        exit_code: Its exit code.

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


def validate(
    train_args: Sequence[str], *, iterations: int, gpus: int, granted: int, run_root: Path, output: Path
) -> int:
    """Run a short single-device ``rlscale train``, judge it, and write the verdict to ``output``.

    The verdict is printed to stderr (the rule's log) in every case; ``output`` is written only when it passes, so a
    failing task stops the study and Snakemake keeps no stale verdict.

    Returns:
        0 if the run passes :data:`VALIDATION_CRITERION`, else non-zero.
    """
    command = rlscale_command("train", *train_args, "--max_iterations", str(iterations), "--log_root", str(run_root))
    code = run_leased(
        command,
        gpus=gpus,
        granted=granted,
        world_size=1,
        port_option=None,
        rule="validate",
        before=lambda: shutil.rmtree(run_root, ignore_errors=True),  # A stale manifest must not pass for this run's.
    )
    if code == GRANT_EXIT_CODE:
        return code
    path = find_manifest(run_root)
    verdict = validation_verdict(json.loads(path.read_text()) if path else None, iterations, code)
    print(json.dumps(verdict, indent=2), file=sys.stderr)
    if not verdict["ok"]:
        print(f"[study] ERROR: validation failed: {'; '.join(verdict['reasons'])}", file=sys.stderr)
        return code or 1
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(verdict, indent=2) + "\n")
    return 0


def probe(
    *, world_size: int, device: str, granted: int | None, output: Path, nodes: int = 1, rdzv_port: int = 29400
) -> int:
    """Run ``rlscale nccl_probe`` at ``world_size`` on leased GPUs (or CPU ranks); its report goes to ``output``."""
    device_args = ["--device", "cpu"] if device == "cpu" else []
    if nodes > 1 and os.environ.get("SLURM_NODEID", "0") != "0":
        # Global rank 0, on the first node, prints the report; other nodes must not truncate the shared file.
        command = rlscale_command("nccl_probe", *device_args)
        return run_multinode(command, nodes=nodes, gpus_per_node=world_size // nodes, rdzv_port=rdzv_port)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    with open(output, "w") as report:
        if nodes > 1:
            command = rlscale_command("nccl_probe", *device_args)
            return run_multinode(
                command, nodes=nodes, gpus_per_node=world_size // nodes, rdzv_port=rdzv_port, stdout=report
            )
        command = rlscale_command("nccl_probe", "--num_gpus", str(world_size), *device_args)
        gpus = 0 if device == "cpu" else world_size
        return run_leased(command, gpus=gpus, granted=granted, world_size=world_size, stdout=report, rule="probe")


def launch(
    rlscale_args: Sequence[str],
    *,
    world_size: int,
    device: str,
    granted: int | None,
    rule: str,
    nodes: int = 1,
    rdzv_port: int = 29400,
    before: Callable[[], None] | None = None,
) -> int:
    """Run a multi-GPU ``rlscale`` command (``train_multigpu``, ``benchmark <workflow>_multigpu``) at a world size.

    On one node it leases ``world_size`` GPUs (none for CPU ranks) and a port and passes ``--num_gpus``; on several
    it is one ``srun`` task per node with a c10d rendezvous (:func:`run_multinode`).
    """
    if nodes > 1:
        command = rlscale_command(*rlscale_args)
        return run_multinode(
            command, nodes=nodes, gpus_per_node=world_size // nodes, rdzv_port=rdzv_port, before=before
        )
    command = rlscale_command(*rlscale_args, "--num_gpus", str(world_size))
    gpus = 0 if device == "cpu" else world_size
    return run_leased(command, gpus=gpus, granted=granted, world_size=world_size, rule=rule, before=before)


JOB_RECORD = "job.json"
"""The arguments of the train job that owns a ``--log_root``, kept in it."""


def keep_for_same_job(run_root: Path, job: Mapping) -> None:
    """Keep ``run_root`` if an earlier attempt at this same job left it, else empty it and record ``job`` there.

    The kept run directory is what ``--resume auto`` continues after a killed attempt. Any other job's (another
    config: iterations, envs, seed...) is cleared: its checkpoints must not be continued, and its manifest must not
    pass for this run's.
    """
    record = Path(run_root, JOB_RECORD)
    with contextlib.suppress(OSError, ValueError):
        if json.loads(record.read_text()) == job:
            return
    shutil.rmtree(run_root, ignore_errors=True)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(job, indent=2) + "\n")


def train(rlscale_args: Sequence[str], *, output: Path, **launch_kwargs) -> int:
    """Run ``rlscale train_multigpu`` (see :func:`launch`) in ``--log_root``, then copy its manifest.

    Once the job may run, the log root is kept for a rerun of the same job (which passes ``--resume auto``) and
    cleared otherwise (:func:`keep_for_same_job`); on several nodes only the first does this and copies the manifest,
    which global rank 0 writes on the shared file system.

    Raises:
        ValueError: If ``rlscale_args`` has no ``--log_root``: the manifest could not be found.
    """
    run_root = forwarded_value(rlscale_args, "--log_root")
    if run_root is None:
        raise ValueError("train needs --log_root among the rlscale arguments, to find the run's manifest.")
    job = {"rlscale_args": list(rlscale_args), **launch_kwargs}
    code = launch(
        ["train_multigpu", *rlscale_args],
        rule="train",
        before=lambda: keep_for_same_job(Path(run_root), job),
        **launch_kwargs,
    )
    if code != 0 or os.environ.get("SLURM_NODEID", "0") != "0":
        return code
    return collect_manifest(Path(run_root), output)


def plan(launcher_args: Sequence[str], output: Path, visible_gpus: int = 0) -> int:
    """Save the command ``rlscale train_multigpu --dry_run`` resolves for ``launcher_args`` to ``output``.

    The plan runs on the submit host, which may have no GPU: ``visible_gpus`` > 0 resolves the command as on a node
    with that many GPUs (``CUDA_VISIBLE_DEVICES=0,...``); the launcher checks the real ones when the job runs.
    """
    env = dict(os.environ)
    if visible_gpus > 0:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, range(visible_gpus)))
    result = subprocess.run(
        rlscale_command("train_multigpu", "--dry_run", *launcher_args), capture_output=True, text=True, env=env
    )
    sys.stderr.write(result.stderr)
    if result.returncode == 0:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(result.stdout)
    return result.returncode
