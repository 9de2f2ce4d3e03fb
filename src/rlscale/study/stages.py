"""The study's stages, one function per Snakemake rule that starts ``rlscale``: validate, plan, probe, train,
parity, benchmark and evaluate.

The ``scripts/`` launchers parse their options and read the cell (:mod:`.job_args`), then call these with them; the
stages build the ``rlscale`` commands from the cell's values; :mod:`.job_runner` places the ranks.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from rlscale.launch.ranks import NodeSplit
from rlscale.manifest import MANIFEST_NAME, InvalidManifest, read_manifest
from rlscale.study.evaluation import env_steps_at, run_checkpoints
from rlscale.study.job_args import JobCell
from rlscale.study.job_runner import GRANT_EXIT_CODE, launch, rlscale_command, run_leased, run_multinode
from rlscale.study.stage_policy import Stage
from rlscale.study.verdict import parity_metric, validation_verdict

JOB_RECORD = "job.json"
"""The arguments of the train job that owns a ``--log_root``, kept in it."""


def find_manifest(run_root: Path) -> Path | None:
    """Return the newest rank-0 ``manifest.json`` under ``run_root`` (other ranks write theirs in ``rank_<r>/``)."""
    found = [path for path in Path(run_root).rglob(MANIFEST_NAME) if not path.parent.name.startswith("rank_")]
    return max(found, key=lambda path: path.stat().st_mtime, default=None)


def collect_manifest(run_root: Path, output: Path) -> int:
    """Copy the training run's rank-0 manifest to ``output``; 1 if the run left none."""
    manifest = find_manifest(run_root)
    if manifest is None:
        print(f"[study] ERROR: no {MANIFEST_NAME} under {run_root}", file=sys.stderr)
        return 1
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(manifest, output)
    return 0


def check_task(task: str, *, device: str, num_envs: int, gpus: int, granted: int, output: Path) -> int:
    """Check the task against the ``VecTask`` contract (``rlscale check_task`` on ``device`` at ``num_envs``) and keep
    its report in ``output``, written only when the task conforms; the report goes to stderr (the rule's log) too.

    Returns:
        ``rlscale check_task``'s exit code (0: the task conforms).
    """
    command = rlscale_command("check_task", task, "--device", device, "--num_envs", str(num_envs))
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w+", dir=Path(output).parent, suffix=".part", delete=False) as report:
        code = run_leased(command, stage=Stage.CHECK_TASK, gpus=gpus, granted=granted, world_size=1, stdout=report)
        report.seek(0)
        sys.stderr.write(report.read())
    if code == 0:
        Path(report.name).replace(output)
        return 0
    Path(report.name).unlink(missing_ok=True)
    if code != GRANT_EXIT_CODE:
        print("[study] ERROR: validation failed: the task breaks the VecTask contract (report above)", file=sys.stderr)
    return code


def validate(cell: JobCell, *, iterations: int, gpus: int, granted: int, run_root: Path, output: Path) -> int:
    """Run a short single-device ``rlscale train``, judge it, and write the verdict to ``output``.

    The verdict is printed to stderr (the rule's log) in every case; ``output`` is written only when the run passes,
    so a task that does not train stops the study and Snakemake keeps no stale verdict.

    Returns:
        0 if the run passes :data:`~rlscale.study.verdict.VALIDATION_CRITERION`, else non-zero.
    """
    command = rlscale_command("train", *cell.argv(), "--max_iterations", str(iterations), "--log_root", str(run_root))
    code = run_leased(
        command,
        gpus=gpus,
        granted=granted,
        world_size=1,
        stage=Stage.VALIDATE,
        before=lambda: shutil.rmtree(run_root, ignore_errors=True),  # A stale manifest must not pass for this run's.
    )
    if code == GRANT_EXIT_CODE:
        return code
    path = find_manifest(run_root)
    metric = parity_metric(str(cell.task), os.environ)
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
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(verdict, indent=2) + "\n")
    return 0


def plan(cell: JobCell, output: Path, visible_gpus: int = 0) -> int:
    """Save the command ``rlscale train_multigpu --dry_run`` resolves for a train cell to ``output`` (its arguments
    start with the job's topology options).

    The plan runs on the submit host, which may have no GPU: ``visible_gpus`` > 0 resolves the command as on a node
    with that many GPUs (``CUDA_VISIBLE_DEVICES=0,...``); the launcher checks the real ones when the job runs.
    """
    env = dict(os.environ)
    if visible_gpus > 0:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, range(visible_gpus)))
    result = subprocess.run(
        rlscale_command("train_multigpu", "--dry_run", *cell.argv()), capture_output=True, text=True, env=env
    )
    sys.stderr.write(result.stderr)
    if result.returncode == 0:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(result.stdout)
    return result.returncode


def probe(*, split: NodeSplit, device: str, granted: int | None, output: Path, rdzv_port: int = 29400) -> int:
    """Run ``rlscale nccl_probe`` at the split's world size on leased GPUs (or CPU ranks); its report goes to
    ``output``."""
    device_args = ["--device", "cpu"] if device == "cpu" else []
    if split.nodes > 1 and os.environ.get("SLURM_NODEID", "0") != "0":
        # Global rank 0, on the first node, prints the report; other nodes must not truncate the shared file.
        return run_multinode(rlscale_command("nccl_probe", *device_args), split=split, rdzv_port=rdzv_port)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    with open(output, "w") as report:
        if split.nodes > 1:
            command = rlscale_command("nccl_probe", *device_args)
            return run_multinode(command, split=split, rdzv_port=rdzv_port, stdout=report)
        command = rlscale_command("nccl_probe", "--num_gpus", str(split.world_size), *device_args)
        gpus = split.gpus_per_node(device)
        return run_leased(
            command, stage=Stage.PROBE, gpus=gpus, granted=granted, world_size=split.world_size, stdout=report
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


def launch_record(split: NodeSplit, device: str, granted: int | None, rdzv_port: int) -> dict:
    """The launch options of a train job as its :data:`JOB_RECORD` keeps them."""
    return {
        "world_size": split.world_size,
        "device": device,
        "granted": granted,
        "nodes": split.nodes,
        "rdzv_port": rdzv_port,
    }


def train(cell: JobCell, *, output: Path, split: NodeSplit, granted: int | None, rdzv_port: int = 29400) -> int:
    """Run ``rlscale train_multigpu`` (see :func:`~rlscale.study.job_runner.launch`) in the cell's ``--log_root``,
    then copy its manifest.

    Once the job may run, the log root is kept for a rerun of the same job (which passes ``--resume auto``) and
    cleared otherwise (:func:`keep_for_same_job`); on several nodes only the first does this and copies the manifest,
    which global rank 0 writes on the shared file system.

    Raises:
        ValueError: If the cell has no ``--log_root``: the manifest could not be found.
    """
    run_root = cell.log_root
    if run_root is None:
        raise ValueError("train needs --log_root among the rlscale arguments, to find the run's manifest.")
    job = {"rlscale_args": list(cell.rlscale_args), **launch_record(split, cell.device, granted, rdzv_port)}
    code = launch(
        ["train_multigpu", *cell.argv()],
        split=split,
        device=cell.device,
        granted=granted,
        stage=Stage.TRAIN,
        rdzv_port=rdzv_port,
        before=lambda: keep_for_same_job(run_root, job),
    )
    if code != 0 or os.environ.get("SLURM_NODEID", "0") != "0":
        return code
    return collect_manifest(run_root, output)


def parity(cell: JobCell, *, output: Path, split: NodeSplit, granted: int | None, rdzv_port: int = 29400) -> int:
    """Run one parity run, ``rlscale train_multigpu`` from scratch in the cell's ``--log_root``, then copy its manifest
    (every iteration's record) to ``output``.

    A rerun after a kill starts over and never resumes: the run's wall time to the target must be one uninterrupted
    run's. On several nodes only the first clears the log root and copies the manifest.

    Raises:
        ValueError: If the cell has no ``--log_root``: the manifest could not be found.
    """
    run_root = cell.log_root
    if run_root is None:
        raise ValueError("parity needs --log_root among the rlscale arguments, to find the run's manifest.")
    first_node = os.environ.get("SLURM_NODEID", "0") == "0"
    code = launch(
        ["train_multigpu", *cell.argv()],
        split=split,
        device=cell.device,
        granted=granted,
        stage=Stage.PARITY,
        rdzv_port=rdzv_port,
        before=(lambda: shutil.rmtree(run_root, ignore_errors=True)) if first_node else None,
    )
    if code != 0 or not first_node:
        return code
    return collect_manifest(run_root, output)


def benchmark(workflow: str, cell: JobCell, *, split: NodeSplit, granted: int | None, rdzv_port: int = 29400) -> int:
    """Run ``rlscale benchmark <workflow>_multigpu`` (see :func:`~rlscale.study.job_runner.launch`); global rank 0
    writes the bundles (``--output_path``, ``{seed}`` filled in for each of ``--seeds``).

    A training cell's seeds run in one process, except with ``--peer`` (:meth:`JobCell.per_seed_argv`). The runs
    stop at the first that fails.
    """
    for run_args in cell.per_seed_argv():
        code = launch(
            ["benchmark", f"{workflow}_multigpu", *run_args],
            split=split,
            device=cell.device,
            granted=granted,
            stage=Stage.BENCHMARK,
            rdzv_port=rdzv_port,
        )
        if code != 0:
            return code
    return 0


def evaluate(cell: JobCell, *, record: Path, every_checkpoint: bool, granted: int, output: Path) -> int:
    """Run ``rlscale evaluate`` on the checkpoints of the run whose manifest is ``record`` (its final one, or with
    ``every_checkpoint`` each it saved), in one process on one leased GPU (or CPU core), and write their results to
    ``output``, each with the iterations it had finished and the global env steps then.

    The cell's arguments are ``rlscale evaluate``'s own (``--num_envs``, ``--seed``); ``output`` is written only when
    every checkpoint was evaluated.
    """
    try:
        manifest = read_manifest(Path(record))
    except InvalidManifest as error:
        print(f"[study] ERROR: {error}", file=sys.stderr)
        return 1
    try:
        checkpoints = run_checkpoints(manifest, every_checkpoint)
    except ValueError as error:
        print(f"[study] ERROR: {record}: {error}", file=sys.stderr)
        return 1
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=Path(output).parent) as folder:
        command = rlscale_command(
            "evaluate",
            *("--checkpoint", *(str(path) for _, path in checkpoints)),
            *("--output", str(Path(folder, "{checkpoint}.json"))),
            *cell.argv(),
        )
        gpus = NodeSplit(1).gpus_per_node(cell.device)
        code = run_leased(command, stage=Stage.EVALUATE, gpus=gpus, granted=granted, world_size=1)
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
    Path(output).write_text(json.dumps({"record": str(record), "checkpoints": results}, indent=2) + "\n")
    return 0
