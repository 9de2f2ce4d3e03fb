"""Isaac Lab's command-line habits in `rlscale train`: Hydra-style agent./env. overrides, --headless, --agent NAME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Annotated

import pytest
from annotated_types import Ge

from rlscale.cli import main as rlscale_main
from rlscale.run.spec import resolve_spec
from rlscale.run.start import run_directory
from rlscale.tasks import load_agent_cfg, make_task
from rlscale.tasks.overrides import field_value, with_overrides


@dataclass(frozen=True)
class Inner:
    mass: float = 1.0
    length: float = 2.0


@dataclass(kw_only=True)
class Cfg:
    steps: int = 1
    rate: float = 0.5
    enabled: bool = False
    name: str = "a"
    cache: str | None = None
    limit: float | None = None
    size: Annotated[int, Ge(1)] | None = None
    pair: tuple[float, float] = (0.0, 1.0)
    dims: tuple[int, ...] = (32, 32)
    inner: Inner = field(default_factory=Inner)


class TestFieldValue:
    @pytest.mark.parametrize(
        ("key", "text", "expected"),
        [
            ("rate", "3", 3.0),
            ("rate", "5e-4", 5e-4),
            ("steps", "7", 7),
            ("enabled", "true", True),
            ("name", "1e3", "1e3"),
            ("cache", "null", None),
            ("cache", "/tmp/cache", "/tmp/cache"),
            ("limit", "2", 2.0),
            ("size", "null", None),
            ("size", "3", 3),
            ("pair", "[-1, 2.5]", (-1.0, 2.5)),
            ("dims", "[64, 64, 64]", (64, 64, 64)),
            ("inner.mass", "2", 2.0),
        ],
    )
    def test_values_take_the_field_type(self, key, text, expected):
        """An int is fine for a float field (and becomes a float); a string field takes the text as written."""
        value = field_value(Cfg, key, text)
        assert value == expected and type(value) is type(expected)

    @pytest.mark.parametrize(
        ("key", "text", "message"),
        [
            ("rate", "abc", "expected float, got 'abc'"),
            ("steps", "2.5", "expected int, got '2.5'"),
            ("steps", "true", "expected int"),
            ("enabled", "1", "expected bool"),
            ("limit", "abc", "expected float | None"),
            ("size", "0", "size must be >= 1, got 0"),
            ("pair", "[1, 2, 3]", "expected tuple[float, float]"),
            ("dims", "[1.5]", "expected tuple[int, ...]"),
            ("rat", "1", "Cfg has no field 'rat'; did you mean 'rate'? fields: steps, rate,"),
            ("inner", "1", "'inner' is a nested config; set its fields one by one, e.g. inner.mass=VALUE"),
            ("rate.x", "1", "'rate' is a float, not a nested config"),
            ("inner.mas", "1", "Inner has no field 'mas'; did you mean 'mass'?"),
        ],
    )
    def test_unknown_fields_and_wrong_types_are_refused(self, key, text, message):
        with pytest.raises(ValueError, match="^" + message.replace("?", r"\?").replace("[", r"\[").replace("|", r"\|")):
            field_value(Cfg, key, text)

    def test_a_nested_field_leaves_its_siblings(self):
        cfg = with_overrides(Cfg(), {"inner.mass": 3.0, "steps": 4})
        assert cfg.inner == Inner(mass=3.0, length=2.0) and cfg.steps == 4 and cfg.rate == 0.5

    def test_overrides_reach_the_built_task(self):
        task = make_task("Isaac-Cartpole", num_envs=2, episode_length_s=1.0, **{"physics.pole_mass": 0.2})
        assert task.cfg.episode_length_s == 1.0 and task.max_episode_length == 60
        assert task.cfg.physics.pole_mass == 0.2 and task.cfg.physics.cart_mass == 1.0


class TestParseArgs:
    def test_positional_overrides_between_options(self):
        """Hydra's overrides may come anywhere on the line, as Isaac Lab's users write them."""
        spec = resolve_spec(
            ["agent.algorithm.gamma=0.98", "--task", "Isaac-Cartpole", "agent.algorithm.learning_rate=5e-4",
             "--device", "cpu", "env.episode_length_s=10", "--headless", "env.cart_pos_range=[-0.5, 0.5]"]
        )  # fmt: skip
        agent_cfg = spec.agent_cfg
        assert agent_cfg["algorithm"]["learning_rate"] == 5e-4 and agent_cfg["algorithm"]["gamma"] == 0.98
        assert spec.typed_env_overrides() == {"episode_length_s": 10.0, "cart_pos_range": (-0.5, 0.5)}
        assert spec.headless

    def test_an_isaac_lab_alias_runs_as_the_canonical_task(self, tmp_path):
        spec = resolve_spec(["--task", "Isaac-Cartpole-v0", "--device", "cpu", "--log_root", str(tmp_path)])
        assert (spec.task, spec.task_alias) == ("Isaac-Cartpole", "Isaac-Cartpole-v0")
        assert run_directory(spec).parent == tmp_path / "rsl_rl" / "Isaac-Cartpole"

    @pytest.mark.parametrize(
        ("library", "entry_point"),
        [("rsl_rl", "rsl_rl_cfg_entry_point"), ("rl_games", "rl_games_cfg_entry_point"),
         ("skrl", "skrl_cfg_entry_point"), ("skrl", "skrl_ppo_cfg_entry_point")],
    )  # fmt: skip
    def test_isaac_lab_agent_entry_points_name_the_default_config(self, library, entry_point):
        argv = ["--task", "Isaac-Cartpole", "--device", "cpu", "--rl_library", library, "--agent", entry_point]
        assert resolve_spec(argv).agent_cfg == load_agent_cfg("Isaac-Cartpole", library)

    @pytest.mark.parametrize(
        ("extra", "message"),
        [
            (["foo=1"], "'foo=1': a positional argument is an override, agent.KEY=VALUE or env.FIELD=VALUE"),
            (["env.num_envs=8"], "env.num_envs=8: pass --num_envs 8 instead"),
            (["env.scene.num_envs=8"], "pass --num_envs 8 instead"),
            (["env.seed=3"], "pass --seed 3 instead"),
            (["env.sim.device=cuda:0"], "pass --device cuda:0 instead"),
            (["env.episode_lenght_s=3"], "env.episode_lenght_s=3: Isaac-Cartpole's config: CartpoleCfg has no field"),
            (["env.decimation=2.5"], "env.decimation=2.5: Isaac-Cartpole's config: expected int, got '2.5'"),
            (["env.physics.pole_mas=1"], "did you mean 'pole_mass'?"),
            (["agent.algorithm.lr=1"], "agent.algorithm.lr=1: the agent config has no key 'algorithm.lr'"),
            (["agent.gamma"], "agent.gamma: expected agent.KEY=VALUE"),
            (["--rl_library", "skrl", "--agent", "rsl_rl_cfg_entry_point"],
             "names rsl_rl's agent config, but --rl_library is skrl; pass --rl_library rsl_rl, or --agent "
             "skrl_cfg_entry_point"),
            (["--agent", "skrl_amp_cfg_entry_point"], "expected KEY=VALUE or an Isaac Lab agent entry point: "),
        ],
    )  # fmt: skip
    def test_refused_in_one_line(self, capsys, extra, message):
        with pytest.raises(SystemExit) as info:
            resolve_spec(["--task", "Isaac-Cartpole", "--device", "cpu", *extra])
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.count("\n") == 1 and message in err, err


class TestBenchmark:
    """The benchmarks take rlscale train's arguments, overrides included, and refuse them where they cannot apply."""

    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["runtime", "env.episode_length_s=1"], "env.episode_length_s=1: overrides do not apply to the runtime"),
            (["training", "--peer", "agent.algorithm.gamma=0.9"], "--peer cannot mirror agent.algorithm.gamma=0.9"),
        ],
    )
    def test_refused_where_they_cannot_apply(self, capsys, tmp_path, monkeypatch, argv, message):
        monkeypatch.chdir(tmp_path)
        with pytest.raises(SystemExit) as info:
            rlscale_main(["benchmark", *argv, "--task", "Isaac-Cartpole", "--device", "cpu"])
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.count("\n") == 1 and message in err, err
        assert list(tmp_path.iterdir()) == []

    def test_training_multigpu_forwards_them(self, capsys, monkeypatch):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
        argv = ["training_multigpu", "--num_gpus", "2", "--task", "Isaac-Cartpole", "--device", "cpu", "--dry_run"]
        assert rlscale_main(["benchmark", *argv, "env.episode_length_s=1"]) == 0
        assert "env.episode_length_s=1 --distributed" in capsys.readouterr().out


def test_dry_run_checks_the_form_without_torch():
    """The launcher's dry run refuses malformed overrides by name and forwards good ones verbatim, torch-free."""
    code = (
        "import contextlib, io, json, sys\n"
        "from rlscale.launch.launcher import main_train_multigpu\n"
        "results = []\n"
        "for extra in json.loads(sys.argv[1]):\n"
        "    out, err = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):\n"
        "        try:\n"
        "            code = main_train_multigpu(['--num_gpus', '2', '--task', 'Isaac-Cartpole', '--dry_run', *extra])\n"
        "        except SystemExit as exit:\n"
        "            code = exit.code\n"
        "    results.append([code, out.getvalue() + err.getvalue()])\n"
        "print(json.dumps({'results': results, 'torch': 'torch' in sys.modules}))\n"
    )
    cases = [
        ["env.episode_length_s=2", "--headless", "agent.algorithm.gamma=0.9"],
        ["physics=newton"],
        ["env.num_envs=8"],
        ["--rl_library", "skrl", "--agent", "rsl_rl_cfg_entry_point"],
    ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"}
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(cases)], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert not report["torch"]
    (good_code, good), *refused = report["results"]
    assert good_code == 0 and "env.episode_length_s=2 --headless agent.algorithm.gamma=0.9 --distributed" in good
    needs = ("agent.KEY=VALUE or env.FIELD=VALUE", "--num_envs", "--rl_library rsl_rl")
    for (code, err), need in zip(refused, needs, strict=True):
        assert code == 2 and err.count("\n") == 1 and need in err, err
