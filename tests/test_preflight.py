"""What is refused or warned of before a run builds its task or starts a rank: envs beyond the device's memory
(estimated from the task's footprint and the library's rollout buffer), and more CPU ranks than the host's cores.

The bad-input catalogue (tests/test_bad_inputs.py) holds the refusals as a user types them: one line, exit 2, nothing
written.
"""

from __future__ import annotations

import os
from argparse import Namespace

import pytest
from rlscale_command import rlscale

from rlscale.launch import command, launcher
from rlscale.launch.command import TRAIN_MULTIGPU, parse_launcher_args
from rlscale.launch.ranks import cpu_ranks_short_of_cores
from rlscale.rl import LIBRARIES
from rlscale.rl.agent_defaults import agent_cfg
from rlscale.run.memory_fit import DeviceMemory, bytes_per_env, memory_shortfall
from rlscale.run.spec import JobShape, resolve_spec
from rlscale.study.config import fit_cpu_ranks
from rlscale.tasks import get_spec
from rlscale.tasks.footprint import EnvFootprint
from rlscale.tasks.registry import TaskSpec

CARTPOLE = ["--task", "Isaac-Cartpole", "--device", "cpu"]


def per_env(task_id: str, library: str = "rsl_rl") -> int:
    """The estimate of one env of ``task_id`` at its default config, trained by ``library``'s agent config."""
    footprint = get_spec(task_id).footprint_of(get_spec(task_id).cfg_class())
    return bytes_per_env(footprint, LIBRARIES[library].rollout_length(agent_cfg(task_id, library)))


def room_for(envs: int):
    """A memory probe whose device holds ``envs`` Cartpole envs trained by rsl_rl, and not one more."""
    return lambda device: DeviceMemory(envs * per_env("Isaac-Cartpole"), "this host's RAM")


class TestEstimate:
    def test_cartpole(self):
        """4 observations and 1 action: 192 bytes of state and 5 float32 values, then 16 rollout steps of the
        observations, the action with its mean and deviation, and 6 scalars (rsl_rl's config)."""
        assert per_env("Isaac-Cartpole") == 192 + 5 * 4 + 16 * (4 + 3 * 1 + 6) * 4

    def test_go1_reads_without_building_mujoco_warp(self):
        """The Go1's footprint comes from its registration, its rollout from the agent config (24 steps): no physics
        engine is built to estimate it."""
        assert per_env("Rlscale-Go1-Flat") == 36 * 1024 + 60 * 4 + 24 * (48 + 3 * 12 + 6) * 4

    def test_the_rollout_follows_the_library(self):
        """rl_games' Cartpole config rolls out 16 steps as rsl_rl's does; skrl's direct Cartpole 32."""
        assert per_env("Isaac-Cartpole", "rl_games") == per_env("Isaac-Cartpole")
        direct = get_spec("Isaac-Cartpole-Direct").footprint
        assert per_env("Isaac-Cartpole-Direct", "skrl") == bytes_per_env(direct, 32)

    def test_a_task_derives_its_footprint_from_its_config(self):
        """A function of the config is called with the config the run builds."""
        spec = TaskSpec("X", "m:X", "m:Cfg", {}, "m", footprint=lambda cfg: EnvFootprint(cfg.observations, 2))
        assert spec.footprint_of(Namespace(observations=7)) == EnvFootprint(7, 2)
        assert TaskSpec("Y", "m:Y", "m:Cfg", {}, "m").footprint_of(Namespace()) is None

    def test_shortfall_names_the_estimate_the_limit_and_the_most_that_fit(self):
        memory = DeviceMemory(10_000, "GPU 1")
        assert memory_shortfall("T", 5, 1_000, 2, "rsl_rl", memory) is None  # exactly 10,000 bytes
        line = memory_shortfall("T", 6, 1_000, 2, "rsl_rl", memory)
        assert line == (
            "--num_envs 6: T needs at least 11.7 KiB (1000 B per env x 2 ranks: the task and rsl_rl's rollout buffer), "
            "but GPU 1 has 9.8 KiB available; at most 5 envs per rank could fit"
        )


class TestSpec:
    def test_envs_beyond_the_device_are_refused(self, capsys):
        """Resolving the spec refuses them in one line, with the device's memory as the probe reads it."""
        ram = room_for(1000)
        with pytest.raises(SystemExit) as exit_:
            resolve_spec([*CARTPOLE, "--num_envs", "1001"], memory=ram)
        assert exit_.value.code == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("rlscale train: error: --num_envs 1001: Isaac-Cartpole needs at least 1020.6 KiB")
        assert line.endswith("but this host's RAM has 1019.5 KiB available; at most 1000 envs could fit")
        assert resolve_spec([*CARTPOLE, "--num_envs", "1000"], memory=ram).num_envs == 1000

    def test_cpu_ranks_of_a_node_share_its_ram(self, capsys):
        ram = room_for(1000)
        resolve_spec([*CARTPOLE, "--num_envs", "500"], job=JobShape(4, 2), memory=ram)
        with pytest.raises(SystemExit):
            resolve_spec([*CARTPOLE, "--num_envs", "501"], job=JobShape(4, 2), memory=ram)
        assert "x 2 ranks" in capsys.readouterr().err

    def test_unreadable_memory_or_an_unstated_footprint_is_not_estimated(self):
        resolve_spec([*CARTPOLE, "--num_envs", "10"], memory=lambda device: None)


class TestLauncherMemory:
    def test_gpu_ranks_read_the_least_free_gpu_through_nvml(self, monkeypatch):
        """Each GPU rank has its own GPU: the one with the least free memory bounds them all."""
        monkeypatch.setattr(launcher, "free_gpu_memory", lambda gpus: {"0": [5, 3], "2": [7, 9]}[gpus[0]])
        read = launcher.ranks_memory(Namespace(nproc_per_node=2), {"CUDA_VISIBLE_DEVICES": "2,3"})
        assert read(launcher.Device("cuda", 0)) == DeviceMemory(7, "GPU 2")
        read = launcher.ranks_memory(Namespace(nproc_per_node=2), {})
        assert read(launcher.Device("cuda", 0)) == DeviceMemory(3, "GPU 1")

    def test_without_nvml_the_ranks_builds_judge(self, monkeypatch):
        def no_nvml(gpus):
            raise OSError("libnvidia-ml.so.1: cannot open shared object file")

        monkeypatch.setattr(launcher, "free_gpu_memory", no_nvml)
        assert launcher.ranks_memory(Namespace(nproc_per_node=2), {})(launcher.Device("cuda", 0)) is None

    def test_job_shape_counts_this_nodes_ranks(self):
        args = Namespace(nnodes="2", nproc_per_node=4)
        assert launcher.job_shape(args) == JobShape(8, 4)


class TestCpuRanksAndCores:
    def test_more_cpu_ranks_than_cores_warn_as_the_study_refuses(self, monkeypatch, capsys):
        """The launcher warns in the study's words (one home for the rule); the ranks still start, as tests of many
        ranks on a small host need."""
        monkeypatch.setattr(command, "available_cpus", lambda: 2)
        args, _ = parse_launcher_args(["--num_gpus", "3", *CARTPOLE], TRAIN_MULTIGPU, {})
        assert args.nproc_per_node == 3
        rule = cpu_ranks_short_of_cores(3, 2)
        assert capsys.readouterr().err == (
            f"[WARN] --num_gpus/--nproc_per_node 3: {rule}; the ranks share cores, so each runs slower and their "
            "timings mislead (pass at most 2)\n"
        )
        study = {"device": "cpu", "world_sizes": [1, 3], "explicit": {"world_sizes": "mine.yaml"}}
        with pytest.raises(ValueError, match=rule):
            fit_cpu_ranks(study, 2)

    @pytest.mark.parametrize("argv", [["--num_gpus", "2"], ["--num_gpus", "3", "--dry_run"], ["--num_gpus", "cpu"]])
    def test_as_many_ranks_as_cores_or_a_dry_run_say_nothing(self, monkeypatch, capsys, argv):
        monkeypatch.setattr(command, "available_cpus", lambda: 2)
        monkeypatch.setattr("rlscale.launch.ranks.available_cpus", lambda: 2)
        parse_launcher_args([*argv, *CARTPOLE], TRAIN_MULTIGPU, {})
        assert capsys.readouterr().err == ""

    def test_as_a_user_runs_it(self, tmp_path):
        """Eight CPU ranks on this host: the warning, then the env count refused before torchrun starts."""
        result = rlscale(
            "train_multigpu", "--nproc_per_node", "8", *CARTPOLE, "--num_envs", "100000000000",
            "--log_root", str(tmp_path), timeout=120,
        )  # fmt: skip
        lines = result.stderr.splitlines()
        assert result.returncode == 2 and result.stdout == "", result.stderr
        assert lines[-1].startswith("rlscale train_multigpu: error: --num_envs 100000000000: Isaac-Cartpole needs")
        assert "x 8 ranks" in lines[-1] and "Launching" not in result.stderr
        if cpu_ranks_short_of_cores(8, len(os.sched_getaffinity(0))):
            assert lines[0].startswith("[WARN] --num_gpus/--nproc_per_node 8: CPU ranks need a core each")
        assert list(tmp_path.iterdir()) == []
