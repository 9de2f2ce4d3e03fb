"""The run's spec, resolved once: its JSON round trip, the launcher handing it to its ranks, and a rank running it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rlscale.launch.command import TRAIN_MULTIGPU
from rlscale.launch.launcher import check_train_ranks, run_launcher
from rlscale.run import train
from rlscale.run.spec import RUN_SPEC_ENV, JobShape, RunSpec, resolve_spec, spec_from_environment, write_spec

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
    spec = resolve_spec(["--task", "Isaac-Cartpole"], torch_free=True, job=JobShape(None, None))
    assert (spec.agent_cfg, spec.device, spec.world_size, spec.distributed) == (None, None, None, True)
