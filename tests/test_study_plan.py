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
from rlscale.study.config_source import study_config
from rlscale.study.plan_summary import plan_lines

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config" / "config.yaml"
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
SHRUNK = "study: my_cpu\ndevice: cpu\ntasks: [Isaac-Cartpole-Direct]\nlibraries: [{name: rsl_rl}]\nseeds: [1]\n"
"""A user's own small config: no parity section, no per-task env counts, no cpu_fallback."""


def default_config() -> dict:
    return yaml.safe_load(CONFIG.read_text())


def validated(config: dict, visible: str) -> dict:
    return validated_config(
        config, SCHEMA, {"CUDA_VISIBLE_DEVICES": visible}, nvml_count=lambda: 0, hardware_probe=lambda: None
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
