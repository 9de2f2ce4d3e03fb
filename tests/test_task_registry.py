"""The task registry: ids and specs without torch, Isaac Lab's ids, and refusals that name the way out in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rlscale.tasks import UnknownTaskError, get_spec, list_tasks, register_task, resolve_task_id

NO_EQUIVALENT = ["Isaac-Ant-v0", "Isaac-Ant-Direct-v0", "Isaac-Reorient-KukaAllegro"]
NO_EQUIVALENT += ["Isaac-Dexsuite-Kuka-Allegro-Reorient-v0"]


def test_ids_and_specs_need_no_torch():
    """Listing, resolving and looking up tasks imports no torch, so a launcher's --dry_run can check the id."""
    code = (
        "import sys\n"
        "import rlscale.tasks.registry as registry\n"
        "spec = registry.get_spec('Isaac-Cartpole')\n"
        "ids = registry.list_tasks()\n"
        "alias = registry.resolve_task_id('Isaac-Cartpole-Direct-v0')\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "print(spec.task_id, alias, 'Rlscale-Ant' in ids)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["Isaac-Cartpole", "Isaac-Cartpole-Direct", "True"]


class TestIsaacLabIds:
    @pytest.mark.parametrize(
        ("given", "task_id"),
        [
            ("Isaac-Cartpole-v0", "Isaac-Cartpole"),
            ("Isaac-Cartpole-Direct-v0", "Isaac-Cartpole-Direct"),
            ("Isaac-Cartpole", "Isaac-Cartpole"),
        ],
    )
    def test_ids_of_reproduced_tasks_are_aliases(self, given, task_id):
        """Isaac Lab 2.x's versioned ids name the task rlscale reproduces; only the canonical ids are listed."""
        assert resolve_task_id(given) == task_id
        assert get_spec(given).task_id == task_id
        assert given not in list_tasks() or given == task_id

    @pytest.mark.parametrize("task_id", NO_EQUIVALENT)
    def test_ids_without_an_equivalent_name_the_closest_task(self, task_id):
        with pytest.raises(UnknownTaskError) as info:
            resolve_task_id(task_id)
        message = str(info.value)
        assert message.endswith("closest: Rlscale-Ant (`rlscale list_tasks`)") and "\n" not in message
        assert task_id in message
        if "Allegro" in task_id:
            assert "rlscale has no dexterous-manipulation task" in message

    @pytest.mark.parametrize(
        ("typo", "meant"), [("Isaac-Cartpol-Direct", "Isaac-Cartpole-Direct"), ("rlscale-ant", "Rlscale-Ant")]
    )
    def test_a_typo_gets_the_nearest_id(self, typo, meant):
        with pytest.raises(UnknownTaskError, match=f"did you mean '{meant}'\\? known tasks: Isaac-Cartpole, "):
            get_spec(typo)


class TestRegistration:
    def test_an_alias_cannot_take_an_id(self):
        list_tasks()  # the built-in tasks first
        with pytest.raises(ValueError, match="'Isaac-Cartpole' is already registered"):
            register_task("Other-Task", "a.b:C", "a.b:Cfg", {}, package="a", aliases=("Isaac-Cartpole",))
        assert "Other-Task" not in list_tasks()

    def test_entry_points_are_module_attribute(self):
        with pytest.raises(ValueError, match="must be a .module:attribute. string or the task.s class or a factory"):
            register_task("Other-Task", "rlscale.tasks.cartpole.env.ManagerCartpole", "a:b", {}, package="a")

    def test_a_colon_is_kept_for_module_qualified_ids(self):
        with pytest.raises(ValueError, match="':' is reserved for package.module:Task-Id"):
            register_task("pkg:Other-Task", "a.b:C", "a.b:Cfg", {}, package="a")

    def test_built_in_tasks_come_from_rlscale(self):
        assert {get_spec(task_id).source for task_id in ("Isaac-Cartpole", "Isaac-Cartpole-Direct", "Rlscale-Ant")} == {
            "rlscale"
        }

    def test_classes_are_imported_when_asked_for(self):
        from rlscale.tasks.ant.cfg import AntCfg
        from rlscale.tasks.cartpole.env import ManagerCartpole

        assert get_spec("Isaac-Cartpole-v0").task_class is ManagerCartpole
        assert get_spec("Rlscale-Ant").cfg_class is AntCfg


def test_dry_run_checks_the_task_without_torch():
    """`train_multigpu --dry_run` refuses an unknown task in one line, exit 2, as the real launch does: no torch."""
    code = (
        "import contextlib, io, json, sys\n"
        "from rlscale.launch.launcher import main_train_multigpu\n"
        "results = []\n"
        "for task in sys.argv[1:]:\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            code = main_train_multigpu(['--num_gpus', '2', '--task', task, '--dry_run'])\n"
        "        except SystemExit as exit:\n"
        "            code = exit.code\n"
        "    results.append([code, err.getvalue()])\n"
        "print(json.dumps({'results': results, 'torch': 'torch' in sys.modules}))\n"
    )
    tasks = ["Isaac-Reorient-KukaAllegro", "Isaac-cartpole", "Isaac-Cartpole-v0"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"}
    result = subprocess.run([sys.executable, "-c", code, *tasks], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert not report["torch"]
    (allegro_code, allegro), (typo_code, typo), (alias_code, alias) = report["results"]
    assert allegro_code == 2 and allegro.count("\n") == 1
    assert "rlscale has no dexterous-manipulation task; closest: Rlscale-Ant" in allegro
    assert typo_code == 2 and "did you mean 'Isaac-Cartpole'?" in typo
    assert alias_code == 0 and all(line.startswith("[INFO] cpu binding") for line in alias.splitlines())
