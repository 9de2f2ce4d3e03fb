"""The study fits its config and its host: a user's config file replaces the default instead of inheriting from it,
``device: auto`` drops the world sizes this host cannot run, world sizes above one node need a cluster, and every
parse prints the plan (``snakemake -n`` included)."""

from __future__ import annotations

import re
import subprocess
import sys
from html import unescape
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from snakemake.utils import update_config

from rlscale.study.config import StudyConfigError, validated_config
from rlscale.study.config_source import check_command_line, explicit_keys, study_config
from rlscale.study.plan_summary import plan_lines
from rlscale.study.profiles import ConfigLayer, profile_config_dropped, read_command_line, shown_path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config" / "config.yaml"
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
SLURM_PROFILE = ROOT / "config" / "profiles" / "slurm"
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
        """A file of the user's alone replaces config/config.yaml: the keys it leaves out are the schema's defaults."""
        user = tmp_path / "mine.yaml"
        config, note, base = study_config({"study": "my_cpu", "device": "cpu"}, [user], CONFIG)
        assert (config, base) == ({"study": "my_cpu", "device": "cpu"}, "the schema's defaults")
        assert f"{user} replaces config.yaml" in note and f"--configfile config/config.yaml {user}" in note

    def test_naming_the_default_first_overlays_it(self, tmp_path):
        merged = {**default_config(), "study": "mine"}
        config, note, base = study_config(merged, [CONFIG, tmp_path / "overlay.yaml"], CONFIG)
        assert (config, base) == (merged, "config/config.yaml") and "overlaid in this order" in note

    def test_no_file_is_the_default(self):
        assert study_config(default_config(), [], CONFIG) == (default_config(), None, "config/config.yaml")

    def test_snakemake_does_not_inherit_the_gpu_budgets(self, tmp_path):
        """`snakemake -n --configfile mine.yaml`: the plan says where the config comes from and shows the user's
        own budgets; the default's Go1 and its parity budget (60 M steps per run) are gone, and Snakemake does not
        say that it extended config/config.yaml with it."""
        (tmp_path / "config").mkdir()
        (tmp_path / "config" / "config.yaml").write_text(CONFIG.read_text())  # where the Snakefile looks for it
        (tmp_path / "mine.yaml").write_text(SHRUNK)
        command = [SNAKEMAKE, "-n", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "--configfile", "mine.yaml"]
        result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-3000:]
        assert re.search(r"study config: \S*mine.yaml replaces config.yaml", output, re.IGNORECASE)
        assert "is extended" not in output and "config/config.yaml" not in output.split("Config file(s):")[1]
        assert "plan: my_cpu on cpu, world sizes [1, 2]: 1 task(s) x 1 library x 2 world size(s)" in output
        assert "plan budgets per run: check_task at 256 envs; validate 20 iterations and train" in output
        assert "plan parity:" not in output and "Rlscale-Go1-Flat" not in output


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
            "config: world_sizes: 16 (from config/config.yaml) spans 2 nodes of gpus_per_node=8, which needs a "
            "cluster: run with --profile config/profiles/slurm (docs/cluster.md), or drop it"
        )
        assert validated({**config, "cluster": "slurm"}, "0,1")["world_sizes"] == [1, 16]


def test_plan_lines_name_cells_runs_and_budgets():
    study = validated(default_config(), "0,1")
    lines = plan_lines(study)
    assert lines[0] == (
        "plan: scaling on cuda, world sizes [1, 2]: 1 task(s) x 3 libraries x 2 world size(s), 1 task/env-count "
        "pair(s): 6 training cell(s), 18 benchmark run(s) (3 seed(s)), 6 train run(s)"
    )
    assert lines[1].startswith(
        "plan budgets per run: check_task at 256 envs; validate 10 iterations and train 30 at the task's largest env"
    )
    assert lines[2] == "plan parity: at most these global env steps per run: Rlscale-Go1-Flat 60,000,000"


class TestWhatTheUserWroteWins:
    """A user's own values (their file, an overlay, --config) are never replaced; the fallback fills the rest."""

    MINE = {"world_sizes": [1, 2], "num_envs_per_rank": [16], "seeds": [7], "iterations": {"train": 3}}
    WRITTEN = {
        "world_sizes": "mine.yaml",
        "num_envs_per_rank": "mine.yaml",
        "seeds": "mine.yaml",
        "iterations.train": "mine.yaml",
        "parity.target.Isaac-Cartpole-Direct.at_least": "mine.yaml",
    }

    def test_cpu_fallback_fills_only_what_the_user_left_out(self):
        config = {**default_config(), **self.MINE, "iterations": {**default_config()["iterations"], "train": 3}}
        config["parity"]["target"]["Isaac-Cartpole-Direct"] = {"metric": "mean_episode_length", "at_least": 250}
        study = validated(config, "", self.WRITTEN)
        assert (study["device"], study["world_sizes"], study["num_envs_per_rank"], study["seeds"]) == (
            "cpu",
            [1, 2],
            [16],
            [7],
        )
        # iterations.train is the user's; validate and benchmark are the fallback's.
        assert study["iterations"] == {"validate": 5, "train": 3, "benchmark": 8}
        # Per-task entries: the user's target stays, the fallback's budget fills in; the project's Go1 entries
        # (config/config.yaml) are not carried to CPU ranks.
        target = {"metric": "mean_episode_length", "at_least": 250}
        assert study["parity"]["target"] == {"Isaac-Cartpole-Direct": target}
        assert study["parity"]["max_env_steps"] == {"Isaac-Cartpole-Direct": 120000}
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
        profile = ConfigLayer("config/profiles/slurm/profile.yaml", {"device": "cuda", "study": "y"})
        written = explicit_keys([CONFIG, overlay], [profile, ConfigLayer("--config", {"study": "x"})], CONFIG)
        assert written == {
            "seeds": str(overlay),
            "iterations.train": str(overlay),
            "device": "config/profiles/slurm/profile.yaml",
            "study": "--config",
        }


class TestOneLineRefusals:
    def test_a_command_line_list_of_numbers_goes_in_a_file(self):
        with pytest.raises(ValueError) as error:
            check_command_line([ConfigLayer("--config", {"world_sizes": ["1", "2"]})])
        assert str(error.value) == (
            "--config world_sizes=[1, 2]: Snakemake's --config reads the values in a list or mapping as strings; "
            "write `world_sizes: [1, 2]` in an overlay file and pass --configfile config/config.yaml overlay.yaml"
        )
        # strings stay strings: accepted
        check_command_line([ConfigLayer("--config", {"tasks": ["Isaac-Cartpole-Direct"], "study": "x"})])

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
            f"config: parity.target.Isaac-Cartpole-Direct (from config/config.yaml): {problem}; give one: at_least for "
            "a metric to raise, at_most for one to lower"
        )

    def test_an_agent_override_without_its_prefix(self):
        config = {**default_config(), "agent_overrides": {"rsl_rl": ["algorithm.learning_rate=1e-4"]}}
        with pytest.raises(StudyConfigError) as error:
            validated(config, "0,1")
        assert str(error.value) == (
            "config: agent_overrides.rsl_rl[0] (from config/config.yaml): 'algorithm.learning_rate=1e-4' is neither an "
            "override nor a flag; write agent.KEY=VALUE, --flag or --flag=VALUE"
        )


class TestProfilesAndResources:
    """A profile's settings are a layer of their own: a --config on the command line keeps them (Snakemake alone
    would drop the profile's whole config: list), and resource values are checked before any job."""

    def test_a_command_line_config_keeps_the_profiles(self, tmp_path):
        argv = ["/venv/bin/snakemake", "-n", "--profile", str(SLURM_PROFILE), "--config", "study=foo"]
        command_line = read_command_line(argv, ROOT)
        profile, given = command_line.layers
        assert profile.values == {"device": "cuda", "cluster": "slurm"} and given.values == {"study": "foo"}
        dropped = profile_config_dropped(command_line.layers, given.values)  # what Snakemake's --config kept
        assert {key: layer.entries[key] for key, layer in dropped.items()} == {
            "device": "device=cuda",
            "cluster": "cluster=slurm",
        }
        assert ("--set-resources", "set-resources", "train:cpus_per_gpu=8") not in command_line.resources
        assert (shown_path(SLURM_PROFILE / "profile.yaml"), "set-resources", "train:cpus_per_gpu=8") in (
            command_line.resources
        )
        assert read_command_line(["/usr/bin/python", "-m", "pytest"], ROOT).layers == []

    def test_the_dry_run_plans_the_profiles_cuda_study(self, tmp_path):
        """`--profile config/profiles/slurm --config study=foo` plans foo on the cluster's GPUs, says which profile
        settings it kept and names the profile as the device's source."""
        result = dry_run(tmp_path, "--profile", str(SLURM_PROFILE), "--config", "study=foo")
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-3000:]
        profile = SLURM_PROFILE / "profile.yaml"
        assert (
            f"config: --config sets only its own keys; kept from the profiles: device=cuda ({profile}), "
            f"cluster=slurm ({profile})" in output.splitlines()
        )
        assert f"device: cuda, as {profile} sets" in output and "plan: foo on cuda, world sizes [1, 2]:" in output
        assert f"cluster slurm ({profile})" in output


def dry_run(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """``snakemake -n`` of this workflow in ``workdir`` on the default config, with ``args`` before it."""
    command = [SNAKEMAKE, "-n", "-s", str(ROOT / "Snakefile"), "-d", str(workdir), *args, "--configfile", str(CONFIG)]
    return subprocess.run(command, capture_output=True, text=True, cwd=workdir, timeout=300)


def test_report_caption_shows_the_plan():
    """report.html's entry of summary.md shows the plan lines (the aggregate job's params) in its caption, rendered as
    Snakemake's report renders captions."""
    from docutils.core import publish_parts
    from jinja2 import Environment

    plan = plan_lines(validated(default_config(), "0,1", {"world_sizes": "mine.yaml"}))
    caption = (ROOT / "workflow" / "report" / "summary.rst").read_text()
    rendered = (
        Environment(trim_blocks=True, lstrip_blocks=True)
        .from_string(caption)
        .render(snakemake=SimpleNamespace(params=SimpleNamespace(plan=plan)))
    )
    text = unescape(re.sub(r"<[^>]+>", "", publish_parts(rendered, writer_name="html")["body"]))
    assert all(f"\n{line}\n" in text for line in plan), text
    assert "world_sizes [1, 2] (mine.yaml)" in text
    aggregate = (ROOT / "workflow" / "rules" / "aggregate.smk").read_text()
    summary = 'summary=report(\n            "results/{study}/summary.md",\n            caption="../report/summary.rst",'
    assert summary in aggregate


MISTAKES = [
    # (id, the user's overlay on config/config.yaml, CUDA_VISIBLE_DEVICES, the one line)
    ("task-id-case", "tasks: [isaac-cartpole-direct]\nnum_envs_per_task: null\n", "0,1",
     "config: tasks (from mine.yaml): unknown task 'isaac-cartpole-direct'; did you mean 'Isaac-Cartpole-Direct'? "
     "known tasks: Isaac-Cartpole, Isaac-Cartpole-Direct, Pendulum-Swingup, Rlscale-Ant, Rlscale-G1-Flat, "
     "Rlscale-Go1-Flat"),
    ("library-hyphen", "libraries: [{name: rsl-rl}]\n", "0,1",
     "config: libraries[0].name (from mine.yaml): 'rsl-rl' is not one of ['rsl_rl', 'rl_games', 'skrl']; use one of "
     "rsl_rl, rl_games, skrl"),
    ("library-names-only", "libraries: [rsl_rl, skrl]\n", "0,1",
     "config: libraries[1] (from mine.yaml): 'skrl' is not of type 'object'; write each library as a mapping, e.g. "
     "{name: skrl}"),
    ("no-world-sizes", "world_sizes: []\n", "0,1",
     "config: world_sizes (from mine.yaml): [] should be non-empty; list at least 1 value(s)"),
    ("seed-twice", "seeds: [1, 1]\n", "0,1",
     "config: seeds (from mine.yaml): [1, 1] has non-unique elements; list each value once"),
    ("negative-iterations", "iterations: {train: -5}\n", "0,1",
     "config: iterations.train (from mine.yaml): -5 is less than the minimum of 1; use a value >= 1"),
    ("envs-of-a-task-not-studied", "num_envs_per_task: {Isaac-Cartpole: [64]}\n", "0,1",
     "config: num_envs_per_task.Isaac-Cartpole (from mine.yaml): Isaac-Cartpole is not in tasks "
     "(Rlscale-Go1-Flat); add it to tasks or remove its entry (an overlay file "
     "clears every entry with `num_envs_per_task: null`)."),
    ("parity-target-not-studied",
     "tasks: [Isaac-Cartpole-Direct]\nnum_envs_per_task: null\nparity:\n  max_env_steps: {Isaac-Cartpole: 1000000}\n"
     "  target: {Isaac-Cartpole: {metric: mean_episode_length, at_least: 290}}\n", "0,1",
     "config: parity.target.Isaac-Cartpole (from mine.yaml): Isaac-Cartpole is not among the tasks studied "
     "(Isaac-Cartpole-Direct, from mine.yaml); add it to tasks or remove the entry"),
    ("world-size-typo", "world_size: [1, 2]\n", "0,1",
     "config: world_size (from mine.yaml): unknown key; did you mean world_sizes?"),
    ("parity-tasks-key", "parity: {tasks: [Isaac-Cartpole-Direct]}\n", "0,1",
     "config: parity.tasks (from mine.yaml): unknown key; valid keys of parity: seeds, max_env_steps, target, "
     "num_envs_per_rank, libraries, tolerance, checkpoints, lr_scaling, normalizer_sync"),
    ("device-gpu", "device: gpu\n", "0,1",
     "config: device (from mine.yaml): 'gpu' is not one of ['auto', 'cuda', 'cpu']; use one of auto, cuda, cpu"),
    ("rdzv-port", "rdzv_port: 99999\n", "0,1",
     "config: rdzv_port (from mine.yaml): 99999 is greater than the maximum of 64535; use a value <= 64535"),
    ("cluster-case", "cluster: SLURM\n", "0,1",
     "config: cluster (from mine.yaml): 'SLURM' is not one of ['local', 'slurm']; use one of local, slurm"),
    ("checkpoint-interval", "checkpoint_interval: 100\n", "0,1",
     "config: checkpoint_interval=100 (from mine.yaml) is above iterations.train=30: a train run would save no "
     "checkpoint before its end, so a rerun after a crash would start over; use at most 30"),
    ("budget-8e6", "parity:\n  max_env_steps: {Isaac-Cartpole-Direct: 8e6}\n", "0,1",
     "config: parity.max_env_steps.Isaac-Cartpole-Direct (from mine.yaml): '8e6' is not of type 'number'; YAML reads "
     "8e6 as text; write 8000000"),
    ("checkpoints-in-percent", "parity: {checkpoints: [25, 50, 75, 100]}\n", "0,1",
     "config: parity.checkpoints[3] (from mine.yaml): 100 is greater than the maximum of 1; use a value <= 1"),
    ("overrides-of-a-library-not-studied",
     "libraries: [{name: rsl_rl}]\nagent_overrides: {skrl: [agent.agent.discount_factor=0.98]}\n", "0,1",
     "config: agent_overrides.skrl (from mine.yaml): skrl is not among the libraries studied (rsl_rl, from mine.yaml); "
     "add it to libraries or remove the entry"),
    ("no-world-size-1", "world_sizes: [2]\n", "0,1",
     "config: world_sizes (from mine.yaml): [2] has no 1, the size that efficiency and parity compare every world "
     "size with; add 1"),
    ("cuda-without-gpu", "device: cuda\n", "",
     "config: device: cuda (from mine.yaml) but no GPU is visible here (CUDA_VISIBLE_DEVICES=''); set device: auto or "
     "cpu, or run on a cluster with --profile config/profiles/slurm"),
    ("envs-as-a-number", "num_envs_per_rank: 4096\n", "0,1",
     "config: num_envs_per_rank (from mine.yaml): 4096 is not of type 'array'; write a YAML list in a config file, "
     "e.g. [1, 2] (`--config key=[1,2]` passes a string)"),
    ("quoted-boolean", "peer_baseline: 'false'\n", "0,1",
     "config: peer_baseline (from mine.yaml): 'false' is not of type 'boolean'; write true or false"),
]  # fmt: skip


@pytest.mark.parametrize(("overlay", "visible", "line"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_study_config_mistakes(overlay, visible, line, tmp_path, monkeypatch):
    """Each mistake of docs/troubleshooting.md's "Study configs and profiles" (an overlay mine.yaml on
    config/config.yaml) is the one line shown there, naming the key, where it was written and the fix."""
    monkeypatch.chdir(tmp_path)
    Path("mine.yaml").write_text(overlay)
    config = default_config()
    update_config(config, yaml.safe_load(overlay))  # as Snakemake merges --configfile config/config.yaml mine.yaml
    with pytest.raises(StudyConfigError) as error:
        validated(config, visible, explicit_keys([Path("mine.yaml")], [], CONFIG))
    assert str(error.value) == line


COMMAND_LINE_MISTAKES = [
    # (id, snakemake arguments, a profile of the user's (profile.yaml) or None, the one line)
    ("set-resources-word", ["--profile", "SLURM", "--set-resources", "train:cpus_per_gpu=eight"], None,
     "config: --set-resources train:cpus_per_gpu=eight: cpus_per_gpu takes a number; write e.g. train:cpus_per_gpu=8"),
    ("profile-memory-unit", ["--profile", "mine"], "default-resources: [mem_mb=64G]\n",
     "config: mine/profile.yaml default-resources: mem_mb=64G: mem_mb takes a number of MB (or mem=64G); write e.g. "
     "mem_mb=64000"),
    ("config-mapping", ["--config", "iterations={train: 5}"], None,
     "config: --config iterations={train: 5}: Snakemake's --config reads the values in a list or mapping as strings; "
     "write `iterations: {train: 5}` in an overlay file and pass --configfile config/config.yaml overlay.yaml"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "profile", "line"), [m[1:] for m in COMMAND_LINE_MISTAKES], ids=[m[0] for m in COMMAND_LINE_MISTAKES]
)
def test_command_line_and_profile_mistakes(args, profile, line, tmp_path):
    """The mistakes of that table that need Snakemake itself: `snakemake -n` stops before any job, in one line (its
    WorkflowError frame around it), and writes nothing."""
    if profile is not None:
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine" / "profile.yaml").write_text(profile)
    result = dry_run(tmp_path, *[str(SLURM_PROFILE) if arg == "SLURM" else arg for arg in args])
    lines = (result.stdout + result.stderr).splitlines()
    assert result.returncode != 0 and [text for text in lines if text.startswith("config:")] == [line], lines[-8:]
    assert sorted(path.name for path in tmp_path.iterdir()) == (["mine"] if profile else [])


def test_a_warning_signal_that_would_come_at_once_is_refused(tmp_path):
    """A train job whose time limit does not outlast its warning signal would stop and requeue itself as it starts:
    the dry run stops on the train jobs' resolved resources, in one line naming the shortest runtime that works. A
    --set-resources on the command line says which of the profiles' entries it dropped."""
    overrides = ["--set-resources", "train:runtime=6", "train:cpus_per_gpu=4"]
    result = dry_run(tmp_path, "--profile", str(SLURM_PROFILE), *overrides)
    lines = [text.strip() for text in (result.stdout + result.stderr).splitlines()]
    # The command line's --set-resources replaces the profile's whole list, its warning signal with it: said first.
    dropped = next(text for text in lines if text.startswith("config: the command line's resource options"))
    assert "train:slurm_extra='--signal=USR1@300'" in dropped and "parity:cpus_per_gpu=8" in dropped
    assert "train:cpus_per_gpu=8" not in dropped
    result = dry_run(tmp_path, "--profile", str(SLURM_PROFILE), *overrides, "train:slurm_extra='--signal=USR1@300'")
    lines = [text.strip() for text in (result.stdout + result.stderr).splitlines()]
    assert result.returncode != 0 and [text for text in lines if text.startswith("config: train")] == [
        "config: train: runtime=6 minutes is not longer than its warning signal (--signal=USR1@300, sent up to 360 s "
        "before the time limit), so every job would stop and requeue itself as it starts; set --set-resources "
        "train:runtime=7 or more, or a shorter @seconds in its slurm_extra"
    ], lines[-8:]
    assert not (tmp_path / "logs").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("runtime", "slurm_extra", "refused"),
    [(120, "--signal=USR1@300", False), (6, "--signal=USR1@300", True), (7, "--signal=B:USR1@300", False),
     (2, "--signal=USR1", True), (3, "--signal USR1", False), (1, "", False), (None, "--signal=USR1@300", False),
     (1, "--qos=long", False)],
)  # fmt: skip
def test_time_limit_against_the_warning_signal(runtime, slurm_extra, refused):
    """A lead of @seconds (60 without), sent up to 60 s early, must end before the time limit; no --signal, or no
    runtime (SLURM's default limit), is never refused."""
    from rlscale.study.warning_signal import check_time_limit

    if refused:
        with pytest.raises(ValueError, match=r"every job would stop and requeue itself as it starts"):
            check_time_limit("train", runtime, slurm_extra)
    else:
        check_time_limit("train", runtime, slurm_extra)
