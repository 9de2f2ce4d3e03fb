"""Users' own tasks: plug-ins by entry point or ``package.module:Task-Id``, rlscale's default agent configs, and the
example package (examples/pendulum_task) trained through rlscale like a built-in task."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from example_task import ensure_example_installed
from rlscale_command import rlscale
from wandb_records import offline_environment, offline_runs

from rlscale.rl.agent_defaults import MAX_UNITS, MIN_UNITS, agent_cfg, default_agent_cfg, hidden_units
from rlscale.tasks import get_spec, list_tasks, register_task, registry

ROOT = Path(__file__).resolve().parents[1]
PENDULUM = "Pendulum-Swingup"
PENDULUM_ENV = "pendulum_task.env"
UNBUFFERED = {"PYTHONUNBUFFERED": "1"}
"""Over the child's environment, so that a rank which torchrun stops still leaves what it printed."""


@pytest.fixture(scope="module", autouse=True)
def example_installed() -> None:
    ensure_example_installed()


def fake_distribution(folder: Path, name: str, init: str, agents: dict[str, str] | None = None) -> Path:
    """An installed distribution ``name`` on ``folder`` (a sys.path entry) whose ``rlscale.tasks`` entry point names
    the module ``name`` (``-`` as ``_``) with ``init`` as its ``__init__.py`` and ``agents`` as its agents/ files."""
    module = name.replace("-", "_")
    info = folder / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[rlscale.tasks]\nmine = {module}\n")
    (folder / module / "agents").mkdir(parents=True)
    (folder / module / "__init__.py").write_text(init)
    for file_name, text in (agents or {}).items():
        (folder / module / "agents" / file_name).write_text(text)
    return folder


def registration(task_id: str, agent_files: str = "{}") -> str:
    """A plug-in module's source registering ``task_id`` as the example pendulum."""
    return (
        "from rlscale.tasks import register_task\n"
        f"register_task({task_id!r}, '{PENDULUM_ENV}:PendulumSwingup', '{PENDULUM_ENV}:PendulumCfg', {agent_files}, "
        "package=__name__)\n"
    )


class TestEntryPoints:
    def test_list_tasks_names_each_tasks_package(self):
        result = rlscale("list_tasks", env=UNBUFFERED)
        assert result.returncode == 0, result.stderr
        rows = dict(line.split() for line in result.stdout.splitlines())
        assert rows[PENDULUM] == "rlscale-pendulum-task"
        assert rows["Isaac-Cartpole"] == rows["Rlscale-Ant"] == "rlscale"

    def test_plugins_are_listed_without_torch(self):
        code = "import sys; from rlscale.tasks import list_tasks; ids = list_tasks(); print('torch' in sys.modules)"
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert result.stdout.split() == ["False"], result.stderr

    @pytest.mark.parametrize(
        ("init", "agents", "problem"),
        [
            ("import no_such_module\n", {}, "ModuleNotFoundError: No module named 'no_such_module'"),
            (
                registration("Isaac-Cartpole"),
                {},
                "ValueError: task id 'Isaac-Cartpole' is already registered (by rlscale)",
            ),
            (
                registration("Broken-Yaml", "{'rsl_rl': 'rsl_rl_ppo.yaml'}"),
                {"rsl_rl_ppo.yaml": "algorithm: {gamma: 0.99\n"},
                "ValueError: task 'Broken-Yaml': agent config agents/rsl_rl_ppo.yaml: ParserError: while parsing",
            ),
        ],
        ids=["import-error", "duplicate-id", "bad-agent-yaml"],
    )
    def test_a_broken_plugin_stops_the_launcher_in_one_line(self, tmp_path, init, agents, problem):
        """Whatever task is asked for, the launcher refuses in one line naming the plug-in, before any rank starts."""
        site = fake_distribution(tmp_path / "site", "broken-plugin", init, agents)
        log_root = tmp_path / "logs"
        result = rlscale(
            "train_multigpu", "--num_gpus", "2", "--device", "cpu", "--task", "Isaac-Cartpole",
            "--max_iterations", "1", "--log_root", str(log_root), pythonpath=site, env=UNBUFFERED,
        )  # fmt: skip
        assert result.returncode == 2, result.stdout + result.stderr
        error = result.stderr.strip().splitlines()[-1]
        assert "task plug-in broken-plugin (entry point mine): " + problem in error
        assert not log_root.exists() and "rank" not in result.stdout.lower()

    def test_a_plugin_that_fails_registers_nothing(self, tmp_path):
        """What a broken plug-in registered before failing is taken back, so that fixing it needs no restart."""
        init = registration("Half-Registered") + "\nraise RuntimeError('after registering')\n"
        site = fake_distribution(tmp_path / "site", "half-plugin", init)
        code = (
            "from rlscale.tasks import TaskPluginError, list_tasks, registry\n"
            "try:\n    list_tasks()\nexcept TaskPluginError as error:\n    print(error)\n"
            "print('Half-Registered' in registry._REGISTRY)\n"
        )
        env = {**os.environ, "PYTHONPATH": str(site)}
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
        assert result.stdout.splitlines() == [
            "task plug-in half-plugin (entry point mine): RuntimeError: after registering; to run without it, set "
            "RLSCALE_DISABLE_PLUGINS=half-plugin or `pip uninstall half-plugin`",
            "False",
        ], result.stderr


BROKEN_IMPORT = "import no_such_module\n"
DISABLE = "RLSCALE_DISABLE_PLUGINS"


class TestBrokenPluginEveryCommand:
    """A broken plug-in stops every command that looks tasks up, with one line, exit 2 and the way to disable it."""

    @pytest.mark.parametrize(
        "command",
        [
            ("list_tasks",),
            ("train", "--task", "Isaac-Cartpole", "--device", "cpu", "--max_iterations", "1"),
            ("train_multigpu", "--task", "Isaac-Cartpole", "--device", "cpu", "--num_gpus", "2", "--dry_run"),
            ("benchmark", "training", "--task", "Isaac-Cartpole", "--device", "cpu"),
            ("check_task", "Isaac-Cartpole"),
        ],
        ids=lambda command: command[0] if command[0] != "benchmark" else "benchmark",
    )
    def test_one_line_exit_2_naming_the_way_out(self, tmp_path, command):
        site = fake_distribution(tmp_path / "site", "broken-plugin", BROKEN_IMPORT)
        work = tmp_path / "work"
        work.mkdir()
        result = rlscale(*command, pythonpath=site, cwd=work)
        assert (result.returncode, result.stdout) == (2, ""), result.stderr
        (line,) = result.stderr.splitlines()
        assert "task plug-in broken-plugin (entry point mine): ModuleNotFoundError" in line
        assert f"{DISABLE}=broken-plugin" in line and "`pip uninstall broken-plugin`" in line
        assert list(work.iterdir()) == []

    def test_the_variable_disables_it(self, tmp_path):
        site = fake_distribution(tmp_path / "site", "broken-plugin", BROKEN_IMPORT)
        result = rlscale(
            "list_tasks", pythonpath=site, env={**UNBUFFERED, DISABLE: "Broken_Plugin"}
        )  # pip's name rules
        assert result.returncode == 0, result.stderr
        assert "Isaac-Cartpole" in result.stdout and PENDULUM in result.stdout

    def test_a_misspelt_distribution_is_refused(self, tmp_path):
        site = fake_distribution(tmp_path / "site", "broken-plugin", BROKEN_IMPORT)
        result = rlscale("list_tasks", pythonpath=site, env={**UNBUFFERED, DISABLE: "broken-plugni"})
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert "RLSCALE_DISABLE_PLUGINS='broken-plugni'" in result.stderr
        assert "installed: broken-plugin, rlscale-pendulum-task" in result.stderr


class TestRegisterTaskForms:
    def test_classes_themselves_as_gymnasium_allows(self, own_registry):
        """A plug-in may pass its classes (or a factory) instead of module:attribute strings."""
        from pendulum_task.env import PendulumCfg, PendulumSwingup

        def make_pendulum(cfg):
            return PendulumSwingup(cfg)

        register_task("Class-Pendulum", PendulumSwingup, PendulumCfg, {}, package="pendulum_task")
        register_task("Factory-Pendulum", make_pendulum, f"{PENDULUM_ENV}:PendulumCfg", {}, package="pendulum_task")
        spec = get_spec("Class-Pendulum")
        assert (spec.task_class, spec.cfg_class, spec.source) == (PendulumSwingup, PendulumCfg, "rlscale-pendulum-task")
        assert get_spec("Factory-Pendulum").task_class is make_pendulum
        task = registry.make_task("Class-Pendulum", num_envs=4)
        assert isinstance(task, PendulumSwingup) and task.num_envs == 4

    @pytest.mark.parametrize(
        ("task_id", "entry_point", "cfg_entry_point", "message"),
        [
            ("Bad-1", 42, f"{PENDULUM_ENV}:PendulumCfg",
             "task 'Bad-1': entry_point must be a 'module:attribute' string or the task's class or a factory, got 42 "
             "(int)"),
            ("Bad-2", "pendulum_task.env.PendulumSwingup", f"{PENDULUM_ENV}:PendulumCfg",
             "entry_point must be a 'module:attribute' string or the task's class or a factory, got "
             "'pendulum_task.env.PendulumSwingup' (str)"),
            ("Bad-3", f"{PENDULUM_ENV}:PendulumSwingup", dict,
             None),  # a class is a class: accepted (the control)
            ("Bad-4", f"{PENDULUM_ENV}:PendulumSwingup", lambda: None,
             "cfg_entry_point must be a 'module:attribute' string or its config class, got <function"),
            (None, f"{PENDULUM_ENV}:PendulumSwingup", f"{PENDULUM_ENV}:PendulumCfg",
             "task id None (NoneType) must be a non-empty string"),
        ],
        ids=["number", "dotted-path", "any-class", "function-as-config", "no-id"],
    )  # fmt: skip
    def test_anything_else_is_refused_saying_what_it_expects(
        self, own_registry, task_id, entry_point, cfg_entry_point, message
    ):
        if message is None:
            register_task(task_id, entry_point, cfg_entry_point, {}, package="pendulum_task")
            return
        with pytest.raises(ValueError) as error:
            register_task(task_id, entry_point, cfg_entry_point, {}, package="pendulum_task")
        assert message in str(error.value) and "\n" not in str(error.value)


class TestQualifiedIds:
    def test_module_colon_id_imports_the_module_and_stays_qualified(self, tmp_path):
        (tmp_path / "my_tasks.py").write_text(registration("My-Pendulum"))
        code = (
            "from rlscale.tasks import get_spec, list_tasks, resolve_task_id\n"
            "before = 'My-Pendulum' in list_tasks()\n"
            "spec = get_spec('my_tasks:My-Pendulum')\n"
            "print(before, resolve_task_id('my_tasks:My-Pendulum'), spec.task_id, spec.source)\n"
        )
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
        assert result.stdout.split() == ["False", "my_tasks:My-Pendulum", "My-Pendulum", "my_tasks"], result.stderr

    @pytest.mark.parametrize(
        ("task", "message"),
        [
            ("no_such_pkg.tasks:X", "task plug-in module no_such_pkg.tasks: ModuleNotFoundError"),
            ("pendulum_task:Pendulum", "importing pendulum_task registered no task 'Pendulum'"),
        ],
    )
    def test_a_bad_qualified_id_is_one_line(self, tmp_path, task, message):
        result = rlscale(
            "train_multigpu", "--num_gpus", "2", "--device", "cpu", "--task", task, "--dry_run", env=UNBUFFERED
        )
        assert result.returncode == 2 and message in result.stderr and result.stderr.count("\n") == 1, result.stderr

    def test_the_launcher_accepts_a_qualified_id(self):
        result = rlscale("train_multigpu", "--num_gpus", "2", "--device", "cpu", "--task", f"pendulum_task:{PENDULUM}",
                         "--dry_run", env=UNBUFFERED)  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert f"--task pendulum_task:{PENDULUM}" in result.stdout


class TestAgentDefaults:
    def test_a_tasks_own_yaml_wins(self):
        assert agent_cfg(PENDULUM, "rsl_rl")["algorithm"]["gamma"] == 0.95  # the example's own, not the default 0.99

    def test_a_library_without_yaml_gets_sized_defaults(self):
        cfg = agent_cfg(PENDULUM, "rl_games")
        assert cfg["params"]["network"]["mlp"]["units"] == hidden_units(3, 1) == [MIN_UNITS, MIN_UNITS]
        assert cfg["params"]["config"]["name"] == "pendulum_swingup"
        skrl = agent_cfg(PENDULUM, "skrl")
        assert skrl["models"]["policy"]["network"][0]["layers"] == skrl["models"]["value"]["network"][0]["layers"]

    def test_width_grows_with_the_task_and_is_bounded(self):
        widths = [hidden_units(obs, actions)[0] for obs, actions in [(3, 1), (20, 4), (34, 8), (300, 40)]]
        assert widths == sorted(widths) and widths[0] == MIN_UNITS and widths[-1] == MAX_UNITS
        assert hidden_units(20, 4) == [128, 128]  # 4 x 24 = 96 -> 128

    def test_the_critic_reads_its_own_group(self):
        cfg = default_agent_cfg("rsl_rl", "Some-Task", {"policy": 10, "critic": 30}, 2)
        assert cfg["obs_groups"] == {"actor": ["policy"], "critic": ["critic"]}
        plain = default_agent_cfg("rsl_rl", "Some-Task", {"policy": 10}, 2)
        assert plain["obs_groups"]["critic"] == ["policy"]

    def test_agent_configs_for_an_unknown_library_are_refused(self, monkeypatch):
        list_tasks()  # registers the built-in and installed tasks into the table the test then works on a copy of
        monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
        register_task(
            "Typo-Library-Task", f"{PENDULUM_ENV}:PendulumSwingup", f"{PENDULUM_ENV}:PendulumCfg",
            {"rsl-rl": "rsl_rl_ppo.yaml"}, package="pendulum_task",
        )  # fmt: skip
        with pytest.raises(ValueError, match=r"'Typo-Library-Task' \(rlscale-pendulum-task\): agent configs for "):
            agent_cfg("Typo-Library-Task", "skrl")
        assert get_spec("Typo-Library-Task").source == "rlscale-pendulum-task"


def manifest_of(log_root: Path) -> dict:
    (path,) = [path for path in log_root.rglob("manifest.json") if not path.parent.name.startswith("rank_")]
    return json.loads(path.read_text())


@pytest.mark.slow
class TestTrainingThePendulum:
    def test_rsl_rl_swings_it_up(self, tmp_path):
        """The example's own rsl_rl config beats a mean return of -400 within 50 iterations (about 15 s on a core);
        gymnasium counts about -200 as solved, a random policy gets about -1200."""
        result = rlscale(
            "train", "--task", PENDULUM, "--device", "cpu", "--num_envs", "256", "--max_iterations", "50",
            "--log_root", str(tmp_path), env=UNBUFFERED, timeout=600,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        returns = [iteration["mean_return"] for iteration in manifest_of(tmp_path)["iterations"]]
        assert min(returns) < -800  # it did start from a poor policy
        assert statistics.median(returns[-10:]) > -400

    @pytest.mark.parametrize("library", ["rl_games", "skrl"])
    def test_the_generic_defaults_train_it(self, tmp_path, library):
        """rl_games and skrl train it with rlscale's defaults; 7 iterations of 32 steps end the 200-step episodes."""
        result = rlscale(
            "train", "--task", PENDULUM, "--rl_library", library, "--device", "cpu", "--num_envs", "32",
            "--max_iterations", "7", "--log_root", str(tmp_path), env=UNBUFFERED,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        manifest = manifest_of(tmp_path)
        assert manifest["status"] == "completed" and len(manifest["iterations"]) == 7
        assert -2000 < manifest["iterations"][-1]["mean_return"] < 0

    def test_two_gloo_ranks_stay_in_sync(self, tmp_path):
        result = rlscale(
            "train_multigpu", "--num_gpus", "2", "--task", PENDULUM, "--device", "cpu", "--num_envs", "32",
            "--max_iterations", "3", "--log_root", str(tmp_path), env=UNBUFFERED,
        )  # fmt: skip
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        digests = manifest_of(tmp_path)["rank_param_digests"]
        assert len(digests) == 2 and len(set(digests)) == 1


@pytest.mark.slow
@pytest.mark.study
def test_a_tiny_study_includes_the_pendulum(tmp_path):
    """The CI study (CPU, rsl_rl, one world size here) of the pendulum alone: validated (check_task included), trained
    and benchmarked, with its scaling row, and with W&B on (offline): one run per training run, grouped by the study,
    its job type the stage. The base config's per-task parity entries name tasks not studied here."""
    overlay = tmp_path / "pendulum.yaml"
    # The CI study's sizes, without its Cartpole parity (the study of Cartpole is tests/test_study_workflow.py's).
    tiny = yaml.safe_load((ROOT / ".test" / "config" / "config.yaml").read_text())
    del tiny["parity"]
    tiny.update(study="ci_plugin", tasks=[PENDULUM], world_sizes=[1], peer_baseline=False, logger="wandb")
    overlay.write_text(yaml.safe_dump(tiny))
    command = [
        str(Path(sys.executable).with_name("snakemake")), "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
        "--workflow-profile", str(ROOT / "workflow" / "profiles" / "default"), "--cores", "2",
        "--configfile", str(ROOT / "config" / "config.yaml"), str(overlay),
    ]  # fmt: skip
    env = {
        **os.environ,
        "RLSCALE_LEASE_DIR": str(tmp_path / "lease"),
        "OMP_NUM_THREADS": "1",
        **offline_environment(tmp_path),
    }
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    study = tmp_path / "results" / "ci_plugin"
    assert json.loads((study / "validate" / PENDULUM / "rsl_rl.json").read_text())["ok"]
    check = (tmp_path / "logs" / "ci_plugin" / "validate" / PENDULUM / "check_task.log").read_text()
    assert f"check_task {PENDULUM} on cpu, 32 envs" in check and "\nconforms\n" in check
    assert (study / "validate" / PENDULUM / "check_task.txt").read_text() in check
    assert (study / "train" / PENDULUM / "rsl_rl" / "ws1" / "manifest.json").exists()
    assert PENDULUM in (study / "scaling.csv").read_text()
    train_run, benchmark_run = sorted(offline_runs(tmp_path), key=lambda run: run.job_type, reverse=True)
    assert (train_run.group, train_run.job_type) == ("ci_plugin", "train")
    assert (benchmark_run.group, benchmark_run.job_type) == ("ci_plugin", "benchmark")
    manifest = json.loads((study / "train" / PENDULUM / "rsl_rl" / "ws1" / "manifest.json").read_text())
    assert manifest["tracker"]["id"] == train_run.run_id and train_run.config["task"] == PENDULUM
