"""``manifest.json``'s schema and its one reader: every committed manifest matches the schema, a bad one is refused
in one line, and the reader gets back what the writer wrote."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from run_manifests import manifest_data

from rlscale.device import Device
from rlscale.manifest import (
    InvalidManifest,
    Manifest,
    Segment,
    continued_run,
    device_description,
    first_violation,
    read_manifest,
)
from rlscale.rl.progress import IterationRecord

ROOT = Path(__file__).resolve().parents[1]


def committed_manifests() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "results/**/manifest.json"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / path for path in listed]


def test_there_are_committed_manifests():
    assert len(committed_manifests()) > 10


@pytest.mark.parametrize("path", committed_manifests(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_committed_manifest_matches_the_schema(path):
    manifest = read_manifest(path)
    assert manifest.args.task and manifest.world_size >= 1


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda data: data.pop("status"), "<root>: 'status' is a required property"),
        (lambda data: data["args"].pop("task"), "args: 'task' is a required property"),
        (lambda data: data.update(world_size="2"), "world_size: '2' is not of type 'integer'"),
        (lambda data: data.update(status="finished"), "status: 'finished' is not one of"),
        (lambda data: data["iterations"].append({"iteration": 0}), "iterations.0: 'collection_s' is a required"),
        (lambda data: data.update(unknown=1), "Additional properties are not allowed ('unknown' was unexpected)"),
        (lambda data: data["args"].update(rl_library=""), "args.rl_library: '' should be non-empty"),
        (lambda data: data.pop("num_envs"), "<root>: 'num_envs' is a required property"),  # a completed run's
        (lambda data: data.update(status="crashed", num_envs=8) or data.pop("param_digest"), "'param_digest' is a"),
    ],
)
def test_a_manifest_off_the_schema_is_refused_in_one_line(tmp_path, change, named):
    data = manifest_data({})
    change(data)
    path = write(tmp_path, data)
    with pytest.raises(InvalidManifest) as refused:
        read_manifest(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: does not match the manifest schema: ") and named in message
    assert len(message.splitlines()) == 1


def test_a_valid_manifest_is_read(tmp_path):
    """The base of the refusals above is itself valid, so each refusal is its change's."""
    assert first_violation(manifest_data({})) is None
    assert read_manifest(write(tmp_path, manifest_data({}))).status == "completed"


def test_a_missing_or_broken_manifest_is_refused_in_one_line(tmp_path):
    missing = tmp_path / "manifest.json"
    with pytest.raises(InvalidManifest, match=r"manifest.json: no such manifest$"):
        read_manifest(missing)
    missing.write_text('{"status": "completed",\n')
    with pytest.raises(InvalidManifest, match=r"manifest.json: not JSON \(") as refused:
        read_manifest(missing)
    assert len(str(refused.value).splitlines()) == 1
    assert continued_run(missing, 3).segments == ()  # a continuation starts afresh over it


ARGS = {
    "command": "rlscale train_multigpu",
    "run_name": "round_trip",
    "task": "Isaac-Cartpole-Direct",
    "rl_library": "skrl",
    "ml_framework": "torch",
    "num_envs": 8,
    "max_iterations": 3,
    "seed": 5,
    "env_overrides": {"episode_length_s": 2.5},
    "lr_scaling": "linear",
    "normalizer_sync": True,
}


def started(path: Path) -> Manifest:
    return Manifest(
        path,
        Segment.starting_now(world_size=2, num_envs_per_rank=8, first_iteration=0),
        args=ARGS,
        agent_cfg={"agent": {"rollouts": 16}},
        seed=5,
        env_seed=5,
        rank=0,
        world_size=2,
        local_world_size=2,
        num_nodes=1,
        run_dir=str(path.parent),
        resumed_from=None,
        speed_levers={"tf32": False},
        tracker={"logger": "wandb", "project": "rlscale", "id": "abc123", "name": None},
        **device_description(Device.parse("cpu")),
    )


def test_the_reader_gets_back_what_the_writer_wrote(tmp_path):
    path = tmp_path / "manifest.json"
    writer = started(path)
    running = read_manifest(path)
    assert (running.status, running.iterations, running.num_envs, running.checkpoint) == ("running", (), None, None)
    assert running.tracker_id == "abc123" and running.segments[0].status == "running"
    records = [
        IterationRecord(0, 0.1, 0.2, math.nan, math.nan, 256, 0.3),
        IterationRecord(1, 0.1, 0.2, 4.5, 12.0, 512, 0.6, {"Metrics/speed": 0.7}),
    ]
    writer.finish(
        "completed",
        last_iteration=1,
        wall_time_s=2.0,
        iterations=[vars(record) for record in records],
        num_envs=8,
        start_iteration=0,
        iterations_completed=2,
        checkpoint=str(tmp_path / "model_1.pt"),
        resumed_param_digest=None,
        param_digest="d1",
        rank_param_digests=["d1", "d1"],
        sync_checked_at_iterations=[2],
        final_mean_return=4.5,
        final_mean_episode_length=12.0,
    )
    read = read_manifest(path)
    assert read == writer.recorded()
    assert (read.status, read.world_size, read.num_envs, read.iterations_completed) == ("completed", 2, 8, 2)
    assert read.args.command == "rlscale train_multigpu" and read.args.env_overrides == {"episode_length_s": 2.5}
    assert (read.args.lr_scaling, read.args.normalizer_sync, read.args.seed) == ("linear", True, 5)
    assert read.agent_cfg == {"agent": {"rollouts": 16}} and read.checkpoint == tmp_path / "model_1.pt"
    assert read.rank_param_digests == ("d1", "d1") and read.final_mean_episode_length == 12.0
    [segment] = read.segments
    assert (segment.status, segment.last_iteration, segment.wall_time_s, segment.iterations) == ("completed", 1, 2.0, 2)
    first, second = read.iterations
    assert math.isnan(first.mean_return) and math.isnan(first.value("Metrics/speed"))
    assert (second.env_steps, second.elapsed_s, second.value("mean_return"), second.value("Metrics/speed")) == (
        512,
        0.6,
        4.5,
        0.7,
    )


def test_the_writer_refuses_what_the_schema_does_not_hold(tmp_path):
    """Nothing off the schema reaches the file: the version before stays."""
    path = tmp_path / "manifest.json"
    writer = started(path)
    before = path.read_text()
    with pytest.raises(InvalidManifest, match=r"^.*manifest.json: the run's record does not match the manifest schema: "
                       r"status: 'done' is not one of"):  # fmt: skip
        writer.update(status="done")
    assert path.read_text() == before
    assert read_manifest(path).status == "running"
