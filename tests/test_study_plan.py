"""The study fits its config and its host: a user's config file replaces the default instead of inheriting from it,
``device: auto`` drops the world sizes this host cannot run, world sizes above one node need a cluster, and every
parse prints the plan (``snakemake -n`` included)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlscale.study.config import StudyConfigError, validated_config
from rlscale.study.config_source import check_command_line, explicit_keys, study_config
from rlscale.study.plan_summary import plan_lines

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config" / "config.yaml"
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
SHRUNK = "study: my_cpu\ndevice: cpu\ntasks: [Isaac-Cartpole-Direct]\nlibraries: [{name: rsl_rl}]\nseeds: [1]\n"
"""A user's own small config: no parity section, no per-task env counts, no cpu_fallback."""


def default_config() -> dict:
    return yaml.safe_load(CONFIG.read_text())


def validated(config: dict, visible: str, explicit: dict | None = None, cores: int = 2) -> dict:
    return validated_config(
        config,
        SCHEMA,
        {"CUDA_VISIBLE_DEVICES": visible},
        nvml_count=lambda: 0,
        hardware_probe=lambda: None,
        explicit=explicit,
        cpu_count=lambda: cores,
    )


class TestConfigSource:
    def test_a_users_file_replaces_the_default(self, tmp_path):
        """Only the user's keys (and --config values) count: nothing of config/config.yaml is inherited."""
        user = tmp_path / "mine.yaml"
        inherited = {**default_config(), "study": "my_cpu"}
        config, note = study_config(inherited, [user], {"study": "my_cpu", "device": "cpu"}, CONFIG)
        assert config == {"study": "my_cpu", "device": "cpu"}
        assert f"{user} replaces config.yaml" in note and f"--configfile config/config.yaml {user}" in note

    def test_naming_the_default_first_overlays_it(self, tmp_path):
        merged = {**default_config(), "study": "mine"}
        config, note = study_config(merged, [CONFIG, tmp_path / "overlay.yaml"], {"study": "mine"}, CONFIG)
        assert config == merged and "overlaid in this order" in note

    def test_no_file_is_the_default(self):
        assert study_config(default_config(), [], {}, CONFIG) == (default_config(), None)

    def test_snakemake_does_not_inherit_the_gpu_budgets(self, tmp_path):
        """`snakemake -n --configfile mine.yaml`: the plan says where the config comes from and shows the user's
        own budgets; the default's parity budgets (8 M steps per run) and Ant sizes are gone."""
        (tmp_path / "mine.yaml").write_text(SHRUNK)
        command = [SNAKEMAKE, "-n", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "--configfile", "mine.yaml"]
        result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-3000:]
        assert re.search(r"study config: \S*mine.yaml replaces config.yaml", output, re.IGNORECASE)
        assert "plan: my_cpu on cpu, world sizes [1, 2]: 1 task(s) x 1 library x 2 world size(s)" in output
        assert "plan budgets per run: validate 20 iterations at 256 envs" in output
        assert "plan parity:" not in output and "Rlscale-Ant" not in output


class TestHostFit:
    def test_auto_drops_world_sizes_beyond_the_gpus(self):
        """device: auto on one GPU keeps world size 1 and says in one line that 2 was dropped."""
        study = validated(default_config(), "0")
        assert (study["device"], study["world_sizes"]) == ("cuda", [1])
        assert study["device_reason"].endswith("world_sizes [2] dropped: they need more GPUs than the 1 visible")

    def test_auto_keeps_what_fits(self):
        study = validated(default_config(), "0,1")
        assert study["world_sizes"] == [1, 2] and "dropped" not in study["device_reason"]

    def test_nothing_fits(self):
        with pytest.raises(StudyConfigError, match=r"world_sizes: \[2, 4\] all need more than the 1 GPU"):
            validated({**default_config(), "world_sizes": [2, 4]}, "0")

    def test_several_nodes_need_a_cluster(self):
        config = {**default_config(), "device": "cuda", "world_sizes": [1, 16]}
        with pytest.raises(StudyConfigError) as error:
            validated(config, "0,1")
        assert str(error.value) == (
            "config: world_sizes: 16 spans 2 nodes of gpus_per_node=8, which needs a cluster: run with --profile "
            "config/profiles/slurm (docs/cluster.md), or drop it"
        )
        assert validated({**config, "cluster": "slurm"}, "0,1")["world_sizes"] == [1, 16]


def test_plan_lines_name_cells_runs_and_budgets():
    study = validated(default_config(), "0,1")
    lines = plan_lines(study)
    assert lines[0] == (
        "plan: cartpole_scaling on cuda, world sizes [1, 2]: 3 task(s) x 3 libraries x 2 world size(s), "
        "6 task/env-count "
        "pair(s): 36 training cell(s), 108 benchmark run(s) (3 seed(s)), 18 train run(s)"
    )
    assert lines[1].startswith("plan budgets per run: validate 20 iterations at 256 envs; train 50 iterations")
    assert (
        lines[2] == "plan parity: at most these global env steps per run: Isaac-Cartpole-Direct 8,000,000, "
        "Rlscale-Ant 20,000,000, Rlscale-Go1-Flat 80,000,000"
    )


class TestWhatTheUserWroteWins:
    """A user's own values (their file, an overlay, --config) are never replaced; the fallback fills the rest."""

    MINE = {"world_sizes": [1, 2], "num_envs_per_rank": [16], "seeds": [7], "iterations": {"train": 3}}
    WRITTEN = {
        "world_sizes": "mine.yaml",
        "num_envs_per_rank": "mine.yaml",
        "seeds": "mine.yaml",
        "iterations.train": "mine.yaml",
        "parity.target.Rlscale-Go1-Flat.metric": "mine.yaml",
    }

    def test_cpu_fallback_fills_only_what_the_user_left_out(self):
        config = {**default_config(), **self.MINE, "iterations": {**default_config()["iterations"], "train": 3}}
        study = validated(config, "", self.WRITTEN)
        assert (study["device"], study["world_sizes"], study["num_envs_per_rank"], study["seeds"]) == (
            "cpu",
            [1, 2],
            [16],
            [7],
        )
        # iterations.train is the user's; validate and benchmark are the fallback's.
        assert study["iterations"] == {"validate": 5, "train": 3, "benchmark": 8}
        # The user's parity targets stay (the fallback's Cartpole-only targets would drop Go1's).
        assert set(study["parity"]["target"]) == {"Isaac-Cartpole-Direct", "Rlscale-Ant", "Rlscale-Go1-Flat"}
        assert study["tasks"] == ["Isaac-Cartpole-Direct"]  # not written: the fallback's
        assert ("world_sizes", "mine.yaml") in study["fallback_kept"] and "tasks" in study["fallback_filled"]

    def test_plan_names_the_source_of_each_value(self):
        study = validated({**default_config(), **self.MINE}, "", self.WRITTEN)
        values = [line for line in plan_lines(study) if line.startswith("plan values (source): ")]
        assert len(values) == 1
        assert (
            "world_sizes [1, 2] (mine.yaml)" in values[0]
            and "tasks [Isaac-Cartpole-Direct] (cpu_fallback)" in values[0]
        )
        assert "libraries [rsl_rl, rl_games, skrl] (default)" in values[0]
        assert any(line.startswith("plan cpu_fallback left your values: ") for line in plan_lines(study))

    def test_a_written_world_size_above_the_gpus_is_refused_not_dropped(self):
        with pytest.raises(StudyConfigError) as error:
            validated(default_config(), "0", {"world_sizes": "mine.yaml"})
        assert str(error.value).startswith(
            "config: world_sizes: [2] (from mine.yaml) need more GPUs than the 1 visible"
        )

    def test_cpu_ranks_beyond_the_cores(self):
        """Written CPU world sizes above the host's cores are refused; the fallback's are dropped, saying so."""
        config = {**default_config(), "device": "cpu", "world_sizes": [1, 16]}
        with pytest.raises(StudyConfigError) as error:
            validated(config, "", {"world_sizes": "--config"}, cores=2)
        assert str(error.value) == (
            "config: world_sizes: [16] (from --config) CPU ranks need a core each, and this host has 2; list sizes up "
            "to 2, or run with device: cuda on GPUs"
        )
        study = validated(default_config(), "", cores=1)
        assert (
            study["world_sizes"] == [1]
            and "world_sizes [2] dropped: CPU ranks need a core each" in (study["device_reason"])
        )

    def test_explicit_keys_leave_the_default_file_out(self, tmp_path):
        overlay = tmp_path / "overlay.yaml"
        overlay.write_text("seeds: [4]\niterations: {train: 2}\n")
        written = explicit_keys([CONFIG, overlay], {"study": "x"}, CONFIG)
        assert written == {"seeds": str(overlay), "iterations.train": str(overlay), "study": "--config"}


class TestOneLineRefusals:
    def test_a_command_line_list_of_numbers_goes_in_a_file(self):
        with pytest.raises(ValueError) as error:
            check_command_line({"world_sizes": ["1", "2"]})
        assert str(error.value) == (
            "--config world_sizes=[1, 2]: Snakemake's --config reads a list as strings; write `world_sizes: [1, 2]` in "
            "an overlay file and pass --configfile config/config.yaml overlay.yaml"
        )
        check_command_line({"tasks": ["Isaac-Cartpole-Direct"], "study": "x"})  # strings stay strings: accepted

    @pytest.mark.parametrize(
        ("target", "problem"),
        [
            ({"metric": "mean_return", "at_least": 1, "at_most": 2}, "gives both at_least and at_most"),
            ({"metric": "mean_return"}, "gives neither at_least nor at_most"),
        ],
    )
    def test_a_target_gives_one_bound(self, target, problem):
        config = default_config()
        config["parity"]["target"]["Isaac-Cartpole-Direct"] = target
        with pytest.raises(StudyConfigError) as error:
            validated(config, "0,1")
        assert str(error.value) == (
            f"config: parity.target.Isaac-Cartpole-Direct: {problem}; give one: at_least for a metric to raise, "
            "at_most for one to lower"
        )

    def test_an_agent_override_without_its_prefix(self):
        config = {**default_config(), "agent_overrides": {"rsl_rl": ["algorithm.learning_rate=1e-4"]}}
        with pytest.raises(StudyConfigError) as error:
            validated(config, "0,1")
        assert str(error.value) == (
            "config: agent_overrides.rsl_rl[0]: 'algorithm.learning_rate=1e-4' is neither an override nor a flag; "
            "write agent.KEY=VALUE, --flag or --flag=VALUE"
        )
