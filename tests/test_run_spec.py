"""The run's spec, resolved once: its JSON round trip, the launcher handing it to its ranks, and a rank running it."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from rlscale.device import CPU
from rlscale.launch.command import TRAIN_MULTIGPU, parse_launcher_args
from rlscale.launch.launcher import check_train_ranks, run_launcher
from rlscale.run import train
from rlscale.run.spec import RUN_SPEC_ENV, JobShape, RunSpec, resolve_spec, spec_from_environment, write_spec
from rlscale.tasks import get_spec

CPU_RANKS = {"CUDA_VISIBLE_DEVICES": ""}


@pytest.fixture
def spec(tmp_path) -> RunSpec:
    argv = ["--task", "Isaac-Cartpole-v0", "--device", "cpu", "--log_root", str(tmp_path), "--lr_scaling", "sqrt"]
    return resolve_spec(
        [*argv, "--sync_normalizer", "--tf32", "agent.algorithm.gamma=0.9", "env.cart_pos_range=[-0.5, 0.5]"]
    )


def test_json_round_trip_keeps_every_field(spec):
    assert RunSpec.from_json(spec.to_json()) == spec
    assert spec.agent_cfg["algorithm"]["gamma"] == 0.9 and spec.task == "Isaac-Cartpole"


def test_manifest_records_the_options_and_typed_env_overrides(spec):
    args = spec.manifest_args()
    assert (args["lr_scaling"], args["normalizer_sync"], args["task_alias"]) == ("sqrt", True, "Isaac-Cartpole-v0")
    assert args["tf32"] is True
    assert args["env_overrides"] == {"cart_pos_range": (-0.5, 0.5)}
    assert "agent_cfg" not in args


def test_a_rank_refuses_a_spec_for_another_world_size(spec, tmp_path, monkeypatch):
    path = write_spec(dataclasses.replace(spec, world_size=3), tmp_path)
    monkeypatch.setenv(RUN_SPEC_ENV, str(path))
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="resolved 3 rank"):
        spec_from_environment()
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert spec_from_environment() == dataclasses.replace(spec, world_size=3)


def test_a_rank_with_a_spec_runs_it_whatever_its_argv(spec, tmp_path, monkeypatch):
    monkeypatch.setenv(RUN_SPEC_ENV, str(write_spec(spec, tmp_path)))
    ran = []

    class Stop(Exception):
        pass

    def execute(given):
        ran.append(given)
        raise Stop

    monkeypatch.setattr(train, "execute", execute)
    with pytest.raises(Stop):
        train.main(["--task", "not-a-task"])  # parsed, this would exit 2
    assert ran == [spec]


def test_the_launcher_resolves_its_ranks_spec_and_names_its_file(tmp_path, monkeypatch):
    seen = {}

    def supervised(command, env, **kwargs):
        seen["spec"] = json.loads(Path(env[RUN_SPEC_ENV]).read_text())
        return 0

    monkeypatch.setattr("rlscale.launch.supervise.run_supervised", supervised)
    argv = ["--num_gpus", "2", "--task", "Isaac-Cartpole", "--device", "cpu", "--log_root", str(tmp_path)]
    run_launcher(argv, TRAIN_MULTIGPU, CPU_RANKS, check_ranks=check_train_ranks)
    assert (seen["spec"]["world_size"], seen["spec"]["distributed"]) == (2, True)
    assert "nodes" not in seen["spec"]
    assert seen["spec"]["device"] == "cpu" and seen["spec"]["agent_cfg"] is not None


def test_a_dry_run_resolves_without_torch_and_an_elastic_job_has_no_fixed_world_size():
    spec = resolve_spec(["--task", "Isaac-Cartpole"], torch_free=True, job=JobShape(None))
    assert (spec.agent_cfg, spec.device, spec.world_size, spec.distributed) == (None, None, None, True)


def test_the_spec_names_the_command_it_is_for(spec, tmp_path):
    """Its parser's prog: the manifest records it, and --resume auto continues only runs of its own kind."""
    from rlscale.benchmark.arguments import parse_in_process, resolve_in_process
    from rlscale.benchmark.workflows import WORKFLOWS

    argv = ["--task", "Isaac-Cartpole", "--device", "cpu", "--log_root", str(tmp_path)]
    launched = check_train_ranks(*parse_launcher_args(["--num_gpus", "2", *argv], TRAIN_MULTIGPU, CPU_RANKS))
    benchmark = resolve_in_process(WORKFLOWS["training"], *parse_in_process(WORKFLOWS["training"], argv, False))
    assert [spec.command, launched.command, benchmark.command] == [
        "rlscale train",
        "rlscale train_multigpu",
        "rlscale benchmark training",
    ]
    assert spec.manifest_args()["command"] == "rlscale train"
    assert launched.identity.kind == spec.identity.kind != benchmark.identity.kind


def test_the_spec_holds_a_device_and_the_resolved_env_count(spec):
    assert spec.device == CPU and json.loads(spec.to_json())["device"] == "cpu"
    assert spec.manifest_args()["device"] == "cpu"
    assert spec.num_envs == get_spec("Isaac-Cartpole").cfg_class().num_envs  # no --num_envs: the task config's


def test_a_torch_free_spec_keeps_a_device_it_cannot_parse_unchecked():
    """A dry run checks no device (the launcher still prints its command); the ranks would refuse it."""
    spec = resolve_spec(["--task", "Isaac-Cartpole", "--device", "gpu"], torch_free=True, job=JobShape(None))
    assert spec.device is None


def test_resolving_leaves_the_rank_environment_alone(monkeypatch, capsys):
    """No GPU isolation while resolving: rank 1 of 2, refused for CUDA on this host, keeps its variables."""
    ranks = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "CUDA_VISIBLE_DEVICES": "4,6"}
    for name, value in ranks.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(SystemExit):
        resolve_spec(["--task", "Isaac-Cartpole", "--device", "cuda", "--distributed"])
    assert "no CUDA device is available" in capsys.readouterr().err
    assert {name: os.environ[name] for name in ranks} == ranks
