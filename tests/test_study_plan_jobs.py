"""The study as a typed plan: every job a record, and every stage's command built from its record alone.

The plan is the default config's on a SLURM cluster of 2-GPU nodes with world sizes 1, 2 and 4 (4 spans two nodes).
Each job's record goes through JSON, as a rule hands it to ``python -m rlscale.study run``; its stage runs with the
process starts intercepted, and the command it would start is read back with rlscale's own parser and compared with
the config, so a value lost or changed between the config, the record and the command fails here.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from rlscale.run.args import build_parser, parse_command_line
from rlscale.study import stages
from rlscale.study.config import validated_config
from rlscale.study.job import Job
from rlscale.study.paths import JOB_IDS, JobKind
from rlscale.study.plan import StudyPlan
from rlscale.study.stage_policy import STAGE_POLICIES

ROOT = Path(__file__).resolve().parents[1]
OVERLAY = {"cluster": "slurm", "device": "cuda", "gpus_per_node": 2, "world_sizes": [1, 2, 4]}


@pytest.fixture(scope="module")
def study() -> dict:
    config = {**yaml.safe_load((ROOT / "config" / "config.yaml").read_text()), **OVERLAY}
    return validated_config(config, ROOT / "workflow" / "schemas" / "config.schema.yaml", {})


@pytest.fixture(scope="module")
def plan(study) -> StudyPlan:
    return StudyPlan(study)


def first(plan: StudyPlan, kind: JobKind, world_size: int = 1) -> Job:
    """The plan's first job of ``kind`` at ``world_size``, through JSON as a rule hands it on."""
    job = next(job for job in plan.jobs.values() if job.kind == kind and job.world_size == world_size)
    assert Job.from_json(job.to_json()) == job
    return Job.from_json(job.to_json())


class Started(list):
    """The rlscale arguments of each command a stage would start, and what each one's job time record would name
    (``timed``, for the commands started on leased GPUs)."""

    timed: list


@pytest.fixture
def started(monkeypatch) -> Started:
    """The commands a stage would start (its process starts intercepted)."""
    commands = Started()
    commands.timed = []

    def rlscale_args(command):
        command = list(command)
        return command[command.index("rlscale") + 1 :]

    def leased(command, timed=None, **_):
        commands.timed.append(timed)
        return commands.append(command) or 0

    monkeypatch.setattr(stages, "run_leased", lambda command, **kw: leased(rlscale_args(command), **kw))
    monkeypatch.setattr(stages, "run_multinode", lambda command, **_: commands.append(rlscale_args(command)) or 0)
    monkeypatch.setattr(stages, "launch", lambda args, **kw: leased(list(args), **kw))
    monkeypatch.setattr(stages, "collect_manifest", lambda run_root, output: 0)
    monkeypatch.setattr(stages, "find_manifest", lambda run_root: None)
    monkeypatch.setattr(
        stages.subprocess,
        "run",
        lambda command, **_: (
            commands.append(rlscale_args(command)) or SimpleNamespace(returncode=1, stdout="", stderr="")
        ),
    )
    return commands


def train_options(args: list[str]):
    """``args`` read by ``rlscale train``'s parser."""
    return parse_command_line(build_parser(), args)


def test_every_job_is_filed_under_its_rules_id(plan):
    """Each job's id is its kind's template formatted with its cell, and every kind of job is planned."""
    assert {job.kind for job in plan.jobs.values()} == set(JobKind)
    for job_id, job in plan.jobs.items():
        assert job_id == job.id and job.id.count("{") == 0
        assert JOB_IDS[job.kind].split("/")[0] == job.id.split("/")[0]
        assert job.output.startswith(f"results/{plan.config.study}/")
    multi_node = [job for job in plan.jobs.values() if job.world_size == 4 and job.kind == JobKind.TRAIN]
    assert multi_node and all(job.nodes == 2 for job in multi_node)


def test_gpus_follow_the_stage_policy(plan):
    """A single-device stage needs one GPU whatever the world size; the others one per rank on the node."""
    for job in plan.jobs.values():
        expected = 1 if STAGE_POLICIES[job.stage].single_device else job.world_size // job.nodes
        assert job.gpus == expected, job.id


def test_train_and_validate_commands_carry_the_config(plan, study, started):
    task, train_seed = study["tasks"][0], study["seeds"][0]
    train = first(plan, JobKind.TRAIN, world_size=2)
    assert stages.train(train, granted=0) == 0
    command, args = started.pop(), None
    assert command[0] == "train_multigpu"
    args = train_options(command[1:])
    assert (args.task, args.num_envs, args.max_iterations) == (task, 16384, study["iterations"]["train"])
    assert (args.seed, args.run_name, args.checkpoint_interval) == (train_seed, "ws2", study["checkpoint_interval"])
    assert (args.device, str(args.resume), args.rl_library) == ("cuda", "auto", train.run.library.name)
    assert args.log_root == f"results/{study['study']}/train/{task}/{args.rl_library}/ws2/run"

    validate = first(plan, JobKind.VALIDATE)
    stages.validate(validate, granted=0)
    command = started.pop()
    assert command[0] == "train"
    args = train_options(command[1:])
    assert (args.num_envs, args.max_iterations, args.run_name) == (16384, study["iterations"]["validate"], "validate")


def test_parity_command_carries_its_cell(plan, started):
    job = first(plan, JobKind.PARITY, world_size=2)
    cell = next(cell for cell in plan.parity_cells if cell["path"] == job.output)
    assert stages.parity(job, granted=2) == 0
    args = train_options(started.pop()[1:])
    assert (args.num_envs, args.max_iterations, args.seed) == (
        cell["num_envs_per_rank"],
        cell["iterations"],
        cell["seed"],
    )
    assert (args.lr_scaling, args.normalizer_sync) == (cell["lr_scaling"], cell["normalizer_sync"])


def test_benchmark_commands(plan, study, started):
    training = first(plan, JobKind.TRAINING_BENCHMARK, world_size=4)
    assert stages.benchmark(training, granted=None) == 0
    command = started.pop()
    assert command[:2] == ["benchmark", "training_multigpu"]
    seeds = command.index("--seeds")
    assert command[seeds + 1 : seeds + 1 + len(study["seeds"])] == [str(seed) for seed in study["seeds"]]
    assert command[command.index("--output_path") + 1].endswith("/ws4/envs16384/seed{seed}.json")
    timed = started.timed.pop()  # the job time record: the command and the cell, from the record
    assert timed.command == "benchmark training_multigpu"
    assert timed.cell == {
        "task": study["tasks"][0],
        "library": training.run.library.name,
        "world_size": "4",
        "num_envs": "16384",
        "seeds": " ".join(map(str, study["seeds"])),
    }
    runtime = next(job for job in plan.jobs.values() if job.workflow == "runtime")
    assert stages.benchmark(Job.from_json(runtime.to_json()), granted=None) == 0
    command = started.pop()
    assert command[:2] == ["benchmark", "runtime_multigpu"] and "--rl_library" not in command
    assert command[command.index("--num_steps") + 1] == str(study["runtime_steps"]["measured"])


def test_check_task_probe_and_plan_commands(plan, study, started, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check = first(plan, JobKind.CHECK_TASK)
    stages.check_task(check, granted=0)
    assert started.pop() == ["check_task", study["tasks"][0], "--device", "cuda", "--num_envs", "256"]
    assert started.timed.pop().cell == {"task": study["tasks"][0], "world_size": "1", "num_envs": "256"}
    probe = first(plan, JobKind.PROBE, world_size=2)
    stages.probe(probe, granted=2)
    sweep = ["--sizes", *stages.PROBE_SIZES, "--output", str(Path(probe.output).with_suffix(".json"))]
    assert started.pop() == ["nccl_probe", "--num_gpus", "2", *sweep]
    stages.plan(first(plan, JobKind.TRAIN, world_size=4), tmp_path / "plan.txt")
    command = started.pop()
    assert command[:4] == ["train_multigpu", "--dry_run", "--nnodes", "2"]
    assert command[command.index("--rdzv_endpoint") + 1] == "FIRST_NODE:RDZV_PORT"


def test_a_config_change_changes_the_record(study):
    """Snakemake reruns a job whose params changed: the record is the rule's params, so a changed value changes it."""
    before = StudyPlan(study).jobs
    changed = {**study, "iterations": {**study["iterations"], "train": study["iterations"]["train"] + 1}}
    after = StudyPlan(changed).jobs
    differs = {job_id for job_id in before if before[job_id].to_json() != after[job_id].to_json()}
    assert differs == {job_id for job_id, job in before.items() if job.kind == JobKind.TRAIN}
