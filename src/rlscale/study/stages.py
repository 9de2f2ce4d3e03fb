"""The study's stages, one function per Snakemake rule that starts ``rlscale``: validate, plan, probe, train,
parity, benchmark and evaluate.

``python -m rlscale.study run JOB`` (:mod:`rlscale.study.__main__`) reads the rule's :class:`~rlscale.study.job.Job`
record and calls its stage's function (:data:`STAGES`); the stages build the ``rlscale`` commands from the record's
typed values; :mod:`.job_runner` places the ranks.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from rlscale.launch.ranks import NodeSplit
from rlscale.manifest import MANIFEST_NAME, InvalidManifest, read_manifest
from rlscale.study.evaluation import env_steps_at, run_checkpoints
from rlscale.study.job import Job
from rlscale.study.job_runner import GRANT_EXIT_CODE, launch, rlscale_command, run_leased, run_multinode
from rlscale.study.paths import probe_sweep_of
from rlscale.study.stage_policy import Stage
from rlscale.study.verdict import parity_metric, validation_verdict

JOB_RECORD = "job.json"
"""The record and grant of the train job that owns a ``log_root``, kept in it."""


def find_manifest(run_root: Path) -> Path | None:
    """Return the newest rank-0 ``manifest.json`` under ``run_root`` (other ranks write theirs in ``rank_<r>/``)."""
    found = [path for path in Path(run_root).rglob(MANIFEST_NAME) if not path.parent.name.startswith("rank_")]
    return max(found, key=lambda path: path.stat().st_mtime, default=None)


def run_root_of(job: Job) -> Path:
    """The run directory of a validate, train or parity job (its ``log_root``), where its manifest is found.

    Raises:
        ValueError: If the record has none.
    """
    if job.run.log_root is None:
        raise ValueError(f"{job.id}: the job's record has no log_root, so the run's manifest could not be found")
    return Path(job.run.log_root)


def collect_manifest(run_root: Path, output: Path) -> int:
    """Copy the training run's rank-0 manifest to ``output``; 1 if the run left none."""
    manifest = find_manifest(run_root)
    if manifest is None:
        print(f"[study] ERROR: no {MANIFEST_NAME} under {run_root}", file=sys.stderr)
        return 1
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(manifest, output)
    return 0


def check_task(job: Job, granted: int) -> int:
    """Check the task against the ``VecTask`` contract (``rlscale check_task`` on the job's device at its env count)
    and keep its report in the job's output, written only when the task conforms; the report goes to stderr (the
    rule's log) too.

    Returns:
        ``rlscale check_task``'s exit code (0: the task conforms).
    """
    output = Path(job.output)
    command = rlscale_command(
        "check_task", str(job.run.task), *("--device", job.device, "--num_envs", str(job.run.num_envs))
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w+", dir=output.parent, suffix=".part", delete=False) as report:
        timed = job.timed("check_task")
        code = run_leased(
            command, stage=job.stage, gpus=job.gpus, granted=granted, world_size=1, stdout=report, timed=timed
        )
        report.seek(0)
        sys.stderr.write(report.read())
    if code == 0:
        Path(report.name).replace(output)
        return 0
    Path(report.name).unlink(missing_ok=True)
    if code != GRANT_EXIT_CODE:
        print("[study] ERROR: validation failed: the task breaks the VecTask contract (report above)", file=sys.stderr)
    return code


def validate(job: Job, granted: int) -> int:
    """Run a short single-device ``rlscale train``, judge it, and write the verdict to the job's output.

    The verdict is printed to stderr (the rule's log) in every case; the output is written only when the run passes,
    so a task that does not train stops the study and Snakemake keeps no stale verdict.

    Returns:
        0 if the run passes :data:`~rlscale.study.verdict.VALIDATION_CRITERION`, else non-zero.
    """
    run_root, iterations = run_root_of(job), int(job.run.max_iterations or 0)
    code = run_leased(
        rlscale_command("train", *job.rlscale_args()),
        gpus=job.gpus,
        granted=granted,
        world_size=1,
        stage=job.stage,
        before=lambda: shutil.rmtree(run_root, ignore_errors=True),  # A stale manifest must not pass for this run's.
        timed=job.timed("train"),
    )
    if code == GRANT_EXIT_CODE:
        return code
    path = find_manifest(run_root)
    metric = parity_metric(str(job.run.task), os.environ)
    try:
        manifest = read_manifest(path) if path else None
    except InvalidManifest as error:
        print(f"[study] ERROR: validation failed: {error}", file=sys.stderr)
        return code or 1
    verdict = validation_verdict(manifest, iterations, code, metric)
    print(json.dumps(verdict, indent=2), file=sys.stderr)
    if not verdict["ok"]:
        print(f"[study] ERROR: validation failed: {'; '.join(verdict['reasons'])}", file=sys.stderr)
        return code or 1
    Path(job.output).parent.mkdir(parents=True, exist_ok=True)
    Path(job.output).write_text(json.dumps(verdict, indent=2) + "\n")
    return 0


def plan_launch_options(split: NodeSplit) -> list[str]:
    """The topology options a train job passes its launcher; on several nodes the values known only inside the
    allocation are placeholders (FIRST_NODE, RDZV_PORT = rdzv_port + SLURM_JOB_ID % 1000, SLURM_JOB_ID)."""
    if split.nodes > 1:
        return [
            *("--nnodes", str(split.nodes), "--num_gpus", str(split.ranks_per_node), "--rdzv_backend", "c10d"),
            *("--rdzv_endpoint", "FIRST_NODE:RDZV_PORT", "--rdzv_id", "SLURM_JOB_ID"),
        ]
    return ["--num_gpus", str(split.world_size)]


def plan(job: Job, output: Path) -> int:
    """Save the command ``rlscale train_multigpu --dry_run`` resolves for a train job to ``output``.

    The plan runs on the submit host, which may have no GPU: it resolves the command as on the job's node, with its
    GPUs visible (``CUDA_VISIBLE_DEVICES=0,...``); the launcher checks the real ones when the job runs.
    """
    env = dict(os.environ)
    visible = job.split.gpus_per_node(job.device)
    if visible > 0:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, range(visible)))
    command = rlscale_command("train_multigpu", "--dry_run", *plan_launch_options(job.split), *job.rlscale_args())
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    sys.stderr.write(result.stderr)
    if result.returncode == 0:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(result.stdout)
    return result.returncode


PROBE_SIZES = ("4KiB", "64KiB", "1MiB", "16MiB", "64MiB")
"""Message sizes of the study's probe sweep: from a small policy's gradient all-reduce to bandwidth-bound ones."""


def probe(job: Job, granted: int | None) -> int:
    """Run ``rlscale nccl_probe`` at the job's world size on leased GPUs (or CPU ranks), sweeping
    :data:`PROBE_SIZES`: its report goes to the job's output, the sweep beside it (global rank 0 writes it)."""
    split, output = job.split, Path(job.output)
    device_args = [
        *(["--device", "cpu"] if job.device == "cpu" else []),
        *("--sizes", *PROBE_SIZES, "--output", str(probe_sweep_of(output))),
    ]
    if split.nodes > 1 and os.environ.get("SLURM_NODEID", "0") != "0":
        # Global rank 0, on the first node, prints the report; other nodes must not truncate the shared file.
        return run_multinode(rlscale_command("nccl_probe", *device_args), split=split, rdzv_port=job.rdzv_port)
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "w") as report:
        if split.nodes > 1:
            command = rlscale_command("nccl_probe", *device_args)
            return run_multinode(command, split=split, rdzv_port=job.rdzv_port, stdout=report)
        command = rlscale_command("nccl_probe", "--num_gpus", str(split.world_size), *device_args)
        return run_leased(
            command,
            stage=job.stage,
            gpus=job.gpus,
            granted=granted,
            world_size=split.world_size,
            stdout=report,
            timed=job.timed("nccl_probe"),
        )


def keep_for_same_job(run_root: Path, job: Mapping) -> None:
    """Keep ``run_root`` if an earlier run of this same job left it, else empty it and record ``job`` there.

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


def train(job: Job, granted: int | None) -> int:
    """Run ``rlscale train_multigpu`` (see :func:`~rlscale.study.job_runner.launch`) in the job's ``log_root``, then
    copy its manifest to the job's output.

    Once the job may run, the log root is kept for a rerun of the same job (which passes ``--resume auto``) and
    cleared otherwise (:func:`keep_for_same_job`); on several nodes only the first does this and copies the manifest,
    which global rank 0 writes on the shared file system.
    """
    run_root = run_root_of(job)
    code = launch(
        ["train_multigpu", *job.rlscale_args()],
        split=job.split,
        device=job.device,
        granted=granted,
        stage=job.stage,
        rdzv_port=job.rdzv_port,
        before=lambda: keep_for_same_job(run_root, {"job": json.loads(job.to_json()), "granted": granted}),
        timed=job.timed("train_multigpu"),
    )
    if code != 0 or os.environ.get("SLURM_NODEID", "0") != "0":
        return code
    return collect_manifest(run_root, Path(job.output))


def parity(job: Job, granted: int | None) -> int:
    """Run one parity run, ``rlscale train_multigpu`` from scratch in the job's ``log_root``, then copy its manifest
    (every iteration's record) to the job's output.

    A rerun after a kill starts over and never resumes: the run's wall time to the target must be one uninterrupted
    run's. On several nodes only the first clears the log root and copies the manifest.
    """
    run_root = run_root_of(job)
    first_node = os.environ.get("SLURM_NODEID", "0") == "0"
    code = launch(
        ["train_multigpu", *job.rlscale_args()],
        split=job.split,
        device=job.device,
        granted=granted,
        stage=job.stage,
        rdzv_port=job.rdzv_port,
        before=(lambda: shutil.rmtree(run_root, ignore_errors=True)) if first_node else None,
        timed=job.timed("train_multigpu"),
    )
    if code != 0 or not first_node:
        return code
    return collect_manifest(run_root, Path(job.output))


def benchmark(job: Job, granted: int | None) -> int:
    """Run ``rlscale benchmark <workflow>_multigpu`` (see :func:`~rlscale.study.job_runner.launch`); global rank 0
    writes the bundles (``--output_path``, ``{seed}`` filled in for each of ``--seeds``).

    A training cell's seeds run in one process, except with ``--peer`` (:meth:`RunArgs.per_seed
    <rlscale.study.job.RunArgs.per_seed>`). The runs stop at the first that fails.
    """
    for run in job.run.per_seed():
        code = launch(
            ["benchmark", f"{job.workflow}_multigpu", *job.rlscale_args(run)],
            split=job.split,
            device=job.device,
            granted=granted,
            stage=job.stage,
            rdzv_port=job.rdzv_port,
            timed=job.timed(f"benchmark {job.workflow}_multigpu", run),
        )
        if code != 0:
            return code
    return 0


def evaluate(job: Job, granted: int) -> int:
    """Run ``rlscale evaluate`` on the checkpoints of the run whose manifest is the job's ``record`` (its final one,
    or with ``every_checkpoint`` each it saved), in one process on one leased GPU (or CPU core), and write their
    results to the job's output, each with the iterations it had finished and the global env steps then.

    The output is written only when every checkpoint was evaluated.
    """
    record, output = Path(str(job.record)), Path(job.output)
    try:
        manifest = read_manifest(record)
    except InvalidManifest as error:
        print(f"[study] ERROR: {error}", file=sys.stderr)
        return 1
    try:
        checkpoints = run_checkpoints(manifest, job.every_checkpoint)
    except ValueError as error:
        print(f"[study] ERROR: {record}: {error}", file=sys.stderr)
        return 1
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output.parent) as folder:
        command = rlscale_command(
            "evaluate",
            *("--checkpoint", *(str(path) for _, path in checkpoints)),
            *("--output", str(Path(folder, "{checkpoint}.json"))),
            *job.rlscale_args(),
        )
        timed = job.timed("evaluate")
        code = run_leased(command, stage=job.stage, gpus=job.gpus, granted=granted, world_size=1, timed=timed)
        if code != 0:
            return code
        results = [
            {
                **json.loads(Path(folder, f"{path.stem}.json").read_text()),
                "iterations": iterations,
                "env_steps": env_steps_at(manifest, iterations),
            }
            for iterations, path in checkpoints
        ]
    output.write_text(json.dumps({"record": str(record), "checkpoints": results}, indent=2) + "\n")
    return 0


STAGES: Mapping[Stage, Callable[[Job, int | None], int]] = MappingProxyType(
    {
        Stage.CHECK_TASK: check_task,
        Stage.VALIDATE: validate,
        Stage.PROBE: probe,
        Stage.TRAIN: train,
        Stage.PARITY: parity,
        Stage.BENCHMARK: benchmark,
        Stage.EVALUATE: evaluate,
    }
)
"""The function that runs each stage's jobs, given the job and the GPUs Snakemake granted it."""
