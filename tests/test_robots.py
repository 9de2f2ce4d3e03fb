"""Rlscale-Go1-Flat and Rlscale-G1-Flat: registration, the velocity MDP's terms on hand-made states, the contract
(check_task), training with every library on two CPU ranks, and ``rlscale evaluate``.

MJX compiles slowly on CPU, so the in-process tests share one build per robot (default config, 8 envs, which
check_task's builds reuse) and the training processes share one persistent JAX cache with XLA's cheap optimisation
level (as tests/test_ant.py).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch
from mjx_support import requires_mjx

from rlscale.tasks import UnknownTaskError, list_tasks, resolve_task_id

pytestmark = pytest.mark.robots  # make test-robots: MJX compiling on the CPU takes minutes

NUM_ENVS = 8
ROBOTS = ("Rlscale-Go1-Flat", "Rlscale-G1-Flat")


def rlscale(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlscale", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )


_BUILT: dict[str, object] = {}


def built(task_id: str):
    """One build of a robot per test process (the default config, as check_task builds it)."""
    from rlscale.tasks import make_task

    if task_id not in _BUILT:
        _BUILT[task_id] = make_task(task_id, num_envs=NUM_ENVS, seed=0)
    task = _BUILT[task_id]
    task.reset()
    return task


def one_env(tree, env: int = 0):
    import jax

    return jax.tree_util.tree_map(lambda leaf: leaf[env], tree)


class TestRegistration:
    def test_listed_without_importing_jax_or_mujoco(self):
        code = "import sys; from rlscale.tasks import list_tasks; ids = list_tasks(); "
        code += (
            f"print(all(t in ids for t in {ROBOTS!r}), any(m.split('.')[0] in ('jax', 'mujoco') for m in sys.modules))"
        )
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert result.stdout.split() == ["True", "False"], result.stderr
        assert set(ROBOTS) <= set(list_tasks())

    @pytest.mark.parametrize(
        ("isaac_id", "closest"),
        [
            ("Isaac-Velocity-Flat-Unitree-Go1-v0", "Rlscale-Go1-Flat"),
            ("Isaac-Velocity-Rough-Unitree-Go1-v0", "Rlscale-Go1-Flat"),
            ("Isaac-Velocity-Flat-G1-v0", "Rlscale-G1-Flat"),
            ("Isaac-Velocity-Flat-G1-Play-v0", "Rlscale-G1-Flat"),
        ],
    )
    def test_an_isaac_lab_id_names_its_robot(self, isaac_id, closest):
        with pytest.raises(UnknownTaskError, match=rf"^unknown task '{isaac_id}': .*; closest: {closest} "):
            resolve_task_id(isaac_id)

    @pytest.mark.parametrize(
        ("override", "expected"),
        [
            ("env.commands.lin_vel_x=[1.0,-1.0]", "VelocityCommandCfg.lin_vel_x: min 1.0 > max -1.0"),
            ("env.events.push_interval_s=[15.0,10.0]", "EventsCfg.push_interval_s: min 15.0 > max 10.0"),
            ("env.commands.rel_standing_envs=1.5", "commands.rel_standing_envs must be <= 1, got 1.5"),
            ("env.action_scale=0", "action_scale must be > 0, got 0"),
            ("env.rewards.no_such_term=1.0", "VelocityRewardsCfg has no field 'no_such_term'"),
            ("env.rewards.feet_air_time=high", "expected float, got 'high'"),
        ],
    )
    def test_bad_robot_options_get_one_line_and_exit_2(self, tmp_path, override, expected):
        result = rlscale(
            "train", "--task", "Rlscale-Go1-Flat", "--device", "cpu", "--log_root", str(tmp_path / "logs"), override
        )
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and expected in result.stderr, result.stderr
        assert not (tmp_path / "logs").exists()

    def test_the_models_ship_with_their_licences(self):
        from importlib import resources

        assets = resources.files("rlscale.tasks.locomotion").joinpath("assets")
        names = {item.name for item in assets.iterdir()}
        assert {"go1.xml", "g1.xml", "LICENSE.unitree_go1", "LICENSE.unitree_g1", "README.md"} <= names
        for model in ("go1.xml", "g1.xml"):
            text = assets.joinpath(model).read_text()
            assert "<mesh" not in text and "file=" not in text  # nothing to fetch, nothing beside it to load

    @pytest.mark.parametrize("task_id", ROBOTS)
    def test_rl_games_hands_the_policy_actions_to_the_robot_unscaled(self, task_id):
        """rl_games by default clamps its actions to [-1, 1] and rescales them to the action space, which is
        +-``env.clip_actions``: at 100 every action reached the robot 100 times too large."""
        import torch
        from rl_games.common.a2c_common import rescale_actions

        from rlscale.tasks import load_agent_cfg

        cfg = load_agent_cfg(task_id, "rl_games")["params"]
        actions, bound = torch.tensor([0.3, -0.7, 2.5]), cfg["env"]["clip_actions"]
        if cfg["config"].get("clip_actions", True):  # rl_games' a2c_continuous.preprocess_actions
            sent = rescale_actions(-bound, bound, actions.clamp(-1.0, 1.0))
        else:
            sent = actions.clamp(-bound, bound)  # rlscale's RlGamesVecEnv.step
        assert torch.equal(sent, actions)

    def test_the_g1_agent_configs_explore_and_normalise_alike_in_every_library(self):
        """The G1's initial action noise and input normalisation depart from Isaac Lab's (docs/robots.md): every
        library's config departs alike, so that their runs compare."""
        from rlscale.tasks import load_agent_cfg

        rsl_rl, rl_games, skrl = (load_agent_cfg("Rlscale-G1-Flat", lib) for lib in ("rsl_rl", "rl_games", "skrl"))
        std = rsl_rl["actor"]["distribution_cfg"]["init_std"]
        assert std == 0.5
        sigma = rl_games["params"]["network"]["space"]["continuous"]
        assert sigma["fixed_sigma"] and math.exp(sigma["sigma_init"]["val"]) == pytest.approx(std, rel=1e-3)
        assert math.exp(skrl["models"]["policy"]["initial_log_std"]) == pytest.approx(std, rel=1e-3)
        assert rsl_rl["actor"]["obs_normalization"] and rsl_rl["critic"]["obs_normalization"]
        assert rl_games["params"]["config"]["normalize_input"]
        assert skrl["agent"]["observation_preprocessor"] == "RunningStandardScaler"


def test_lowest_point_of_each_primitive_by_hand():
    pytest.importorskip("mujoco.mjx")
    import mujoco
    import numpy as np

    from rlscale.tasks.locomotion.env import lowest_point

    tilt = math.radians(30)  # about the world x axis: the geom's local z leans by 30 degrees
    rotation = np.array([[1, 0, 0], [0, math.cos(tilt), -math.sin(tilt)], [0, math.sin(tilt), math.cos(tilt)]])
    center = np.array([0.0, 0.0, 1.0])
    geom = mujoco.mjtGeom
    cases = {
        geom.mjGEOM_SPHERE: ([0.2, 0, 0], 1.0 - 0.2),
        geom.mjGEOM_CAPSULE: ([0.1, 0.3, 0], 1.0 - 0.3 * math.cos(tilt) - 0.1),
        geom.mjGEOM_CYLINDER: ([0.1, 0.3, 0], 1.0 - 0.3 * math.cos(tilt) - 0.1 * math.sin(tilt)),
        geom.mjGEOM_BOX: ([0.5, 0.2, 0.1], 1.0 - 0.2 * math.sin(tilt) - 0.1 * math.cos(tilt)),
    }
    for geom_type, (size, expected) in cases.items():
        got = float(lowest_point(geom_type, np.array(size), center, rotation))
        assert got == pytest.approx(expected, abs=1e-6), mujoco.mjtGeom(geom_type).name


@requires_mjx
class TestGo1Mdp:
    """The MDP hooks are pure per-env functions: each is called here on one env's state, with values set by hand."""

    def test_sizes_and_timing_follow_isaac_lab(self):
        task = built("Rlscale-Go1-Flat")
        assert (task.num_actions, task.observation_dims["policy"]) == (12, 48)
        assert task.step_dt == pytest.approx(0.02) and task.max_episode_length == 1000
        assert task.reward_terms[:3] == ("track_lin_vel_xy_exp", "track_ang_vel_z_exp", "lin_vel_z_l2")
        assert "Metrics/base_velocity/error_vel_xy" in task.step(torch.zeros(NUM_ENVS, 12))[4]["log"]

    def test_it_stands_on_four_feet_with_zero_actions(self):
        task = built("Rlscale-Go1-Flat")
        falls = 0
        for _ in range(60):
            _, _, terminated, _, _ = task.step(torch.zeros(NUM_ENVS, task.num_actions))
            falls += int(terminated.sum())
        assert falls == 0
        assert bool(torch.from_dlpack(task._state["task"]["foot_contact"]).all())
        assert ((task.qpos[:, 2] > 0.2) & (task.qpos[:, 2] < 0.4)).all()

    def test_the_base_on_the_floor_ends_the_episode(self):
        task = built("Rlscale-Go1-Flat")
        qpos = task.qpos.clone()
        qpos[:4, 2:7] = torch.tensor([0.03, 0.0, 1.0, 0.0, 0.0])  # upside down, the trunk through the floor
        task.write_state(qpos, torch.zeros(NUM_ENVS, task.mj_model.nv))
        _, _, terminated, truncated, extras = task.step(torch.zeros(NUM_ENVS, task.num_actions))
        assert terminated.tolist() == [True] * 4 + [False] * (NUM_ENVS - 4) and not truncated.any()
        assert float(extras["log"]["Episode_Termination/base_contact"]) == 4

    def test_feet_air_time_rewards_air_beyond_the_threshold_at_touchdown(self):
        import jax.numpy as jnp

        task = built("Rlscale-Go1-Flat")
        state = one_env(task._state["task"])
        data = one_env(task._state["data"])
        touchdown = {
            **state,
            "last_air_time": jnp.array([0.7, 0.9, 0.2, 0.0]),
            "first_contact": jnp.array([True, False, True, False]),
        }
        moving = {**touchdown, "command": jnp.array([0.5, 0.0, 0.0])}
        standing = {**touchdown, "command": jnp.array([0.05, 0.05, 1.0])}  # |v_xy| < 0.1: no reward
        reward = task._reward_feet_air_time
        assert float(reward(data, moving, None, None, None)) == pytest.approx((0.7 - 0.5) + (0.2 - 0.5))
        assert float(reward(data, standing, None, None, None)) == 0.0

    def test_commands_resample_when_their_time_is_up_and_heading_steers_yaw(self):
        import jax
        import jax.numpy as jnp

        task = built("Rlscale-Go1-Flat")
        cfg = task.cfg.commands
        state = one_env(task._state["task"])
        data = one_env(task._state["data"])
        heading = float(task._heading(data))
        due = {
            **state,
            "command_time_left": jnp.float32(0.01),
            "heading_env": jnp.bool_(False),
            "standing_env": jnp.bool_(False),
        }
        changed = [
            task._before_observe(data, due, jax.random.PRNGKey(seed))[1] for seed in range(8)
        ]  # each resample draws its own heading-env and standing-env flags: keep the sampled values only
        assert all(float(s["command_time_left"]) == pytest.approx(cfg.resampling_time_s[0]) for s in changed)
        samples = {tuple(float(v) for v in s["command"][:2]) for s in changed}
        assert len(samples) == 8 and all(abs(v) <= 1.0 for pair in samples for v in pair)
        steering = {
            **state,
            "heading_env": jnp.bool_(True),
            "standing_env": jnp.bool_(False),
            "heading_target": jnp.float32(heading + 0.4),
            "command_time_left": jnp.float32(5.0),
        }
        _, steered = task._before_observe(data, steering, jax.random.PRNGKey(0))
        assert float(steered["command"][2]) == pytest.approx(cfg.heading_control_stiffness * 0.4, abs=1e-5)
        assert float(steered["command_time_left"]) == pytest.approx(5.0 - task.step_dt)

    def test_a_push_adds_a_bounded_base_velocity_when_due(self):
        import jax
        import jax.numpy as jnp

        task = built("Rlscale-Go1-Flat")
        state, data = one_env(task._state["task"]), one_env(task._state["data"])
        pushed, after = task._before_observe(data, {**state, "push_time_left": jnp.float32(0.0)}, jax.random.PRNGKey(3))
        kick = pushed.qvel[:2] - data.qvel[:2]
        assert float(jnp.abs(kick).max()) <= task.cfg.events.push_velocity_xy and float(jnp.abs(kick).sum()) > 0
        low, high = task.cfg.events.push_interval_s
        assert low <= float(after["push_time_left"]) <= high
        calm, _ = task._before_observe(data, {**state, "push_time_left": jnp.float32(3.0)}, jax.random.PRNGKey(3))
        assert bool((calm.qvel == data.qvel).all())

    def test_fixed_commands_and_the_tracking_error_of_a_robot_standing_still(self):
        task = built("Rlscale-Go1-Flat")
        commands = torch.tensor([[1.0, 0.0, 0.0], [0.0, -0.5, 0.5]]).repeat(NUM_ENVS // 2, 1)
        task.set_commands(commands)
        for _ in range(30):
            task.step(torch.zeros(NUM_ENVS, task.num_actions))
        assert torch.equal(torch.from_dlpack(task._state["task"]["command"]), commands)
        errors = task.episode_tracking_errors
        assert errors[0::2, 0] == pytest.approx(torch.ones(NUM_ENVS // 2), abs=0.15)  # |(1, 0) - ~0|
        assert errors[1::2, 0] == pytest.approx(torch.full((NUM_ENVS // 2,), 0.5), abs=0.15)
        assert errors[1::2, 1] == pytest.approx(torch.full((NUM_ENVS // 2,), 0.5), abs=0.15)


@requires_mjx
class TestG1Mdp:
    def test_sizes_and_its_biped_terms(self):
        task = built("Rlscale-G1-Flat")
        assert (task.num_actions, task.observation_dims["policy"]) == (29, 99)
        assert {"termination_penalty", "feet_slide", "joint_deviation_arms"} <= set(task.reward_terms)
        arms = task._joint_mask("joint_deviation_arms")
        assert int(arms.sum()) == 14  # shoulder pitch, roll, yaw, elbow, wrist roll, pitch, yaw; both arms

    def test_biped_air_time_rewards_the_shorter_single_stance_phase_up_to_the_threshold(self):
        import jax.numpy as jnp

        task = built("Rlscale-G1-Flat")
        state, data = one_env(task._state["task"]), one_env(task._state["data"])
        moving = {**state, "command": jnp.array([0.8, 0.0, 0.0])}
        single = {
            **moving,
            "foot_contact": jnp.array([True, False]),
            "contact_time": jnp.array([0.3, 0.0]),
            "air_time": jnp.array([0.0, 0.25]),
        }
        long_single = {**single, "contact_time": jnp.array([0.9, 0.0]), "air_time": jnp.array([0.0, 0.7])}
        double = {**single, "foot_contact": jnp.array([True, True]), "contact_time": jnp.array([0.3, 0.2])}
        reward = task._reward_feet_air_time
        assert float(reward(data, single, None, None, None)) == pytest.approx(0.25)
        assert float(reward(data, long_single, None, None, None)) == pytest.approx(0.4)  # the threshold
        assert float(reward(data, double, None, None, None)) == 0.0

    def test_without_a_policy_it_falls_and_base_contact_ends_the_episode(self):
        """Playground's soft ankles (kp 20) cannot hold the G1 at zero action: the policy must balance it."""
        task = built("Rlscale-G1-Flat")
        ended = torch.zeros(NUM_ENVS, dtype=torch.bool)
        for _ in range(150):  # 3 s
            _, _, terminated, truncated, extras = task.step(torch.zeros(NUM_ENVS, task.num_actions))
            assert not truncated.any()
            ended |= terminated
        assert ended.all() and float(extras["log"]["Episode_Termination/base_contact"]) > 0


@requires_mjx
@pytest.mark.parametrize("task_id", ROBOTS)
def test_each_robot_keeps_the_vectask_contract_on_cpu(task_id):
    from rlscale.tasks.conformance import check_task

    built(task_id)  # check_task's builds (seed 0 and 1, same config) reuse this process's compiled step
    report = check_task(task_id, "cpu", num_envs=NUM_ENVS)
    assert report.conforms, report.violations


@requires_mjx
@pytest.mark.slow
@pytest.mark.parametrize("library", ["rsl_rl", "rl_games", "skrl"])
@pytest.mark.parametrize("task_id", ROBOTS)
def test_every_library_trains_each_robot_on_two_cpu_ranks(tmp_path, jax_env, task_id, library):
    result = rlscale(
        "train_multigpu", "--task", task_id, "--rl_library", library, "--num_gpus", "2", "--device", "cpu",
        "--num_envs", str(NUM_ENVS), "--max_iterations", "1", "--log_root", str(tmp_path), env=jax_env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    by_rank = {data["rank"]: data for data in (json.loads(p.read_text()) for p in tmp_path.rglob("manifest.json"))}
    assert sorted(by_rank) == [0, 1] and all(data["status"] == "completed" for data in by_rank.values())
    assert len(set(by_rank[0]["rank_param_digests"])) == 1


CHECKPOINTS = {"rsl_rl": "model_*.pt", "rl_games": "nn/*.pth", "skrl": "checkpoints/agent_*.pt"}
"""Where each library's checkpoints lie in a run directory."""


@requires_mjx
@pytest.mark.slow
@pytest.mark.parametrize("library", list(CHECKPOINTS))
def test_evaluate_reports_tracking_error_and_falls_per_command(tmp_path, jax_env, library):
    runs = tmp_path / "runs"
    trained = rlscale(
        "train", "--task", "Rlscale-Go1-Flat", "--rl_library", library, "--num_envs", str(NUM_ENVS),
        "--max_iterations", "2", "--checkpoint_interval", "1", "--device", "cpu", "--log_root", str(runs), env=jax_env,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    (manifest,) = runs.rglob("manifest.json")
    checkpoints = sorted(manifest.parent.glob(CHECKPOINTS[library]))
    assert len(checkpoints) >= 2, checkpoints
    result = rlscale(
        "evaluate", "--checkpoint", *map(str, checkpoints), "--num_envs", "4", "--command", "1.0,0.0,0.0",
        "--command", "0.0,0.0,0.0", "--output", str(tmp_path / "{checkpoint}.json"), env=jax_env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    for checkpoint in checkpoints:  # one process, one file per checkpoint
        evaluation = json.loads((tmp_path / f"{checkpoint.stem}.json").read_text())
        assert evaluation["checkpoint"] == str(checkpoint)
        assert [entry["command"] for entry in evaluation["per_command"]] == [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
        assert [entry["envs"] for entry in evaluation["per_command"]] == [2, 2]
        summary = evaluation["summary"]
        assert summary["envs"] == 4 and 0.0 <= summary["fall_rate"] <= 1.0 and summary["lin_vel_error_mps"] >= 0.0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--checkpoint", "no/such/model.pt"], "--checkpoint no/such/model.pt: no such file"),
        (["--checkpoint", "{file}", "--command", "1,0"], "argument --command: invalid parse_command value: '1,0'"),
        (["--checkpoint", "{file}"], "no manifest.json beside it"),
        (["--checkpoint", "{file}", "--seed", "-1"], "--seed -1: must be >= 0"),
        (["--checkpoint", "{file}", "--device", "gpu"], "--device 'gpu' is not cpu, cuda or cuda:N"),
        (["--checkpoint", "{file}", "--output", "/proc/evaluation.json"], "--output /proc/evaluation.json: "),
        (["--checkpoint", "{file}", "{other}", "--output", "e.json"], "--output e.json: with several checkpoints"),
        (["--checkpoint", "{file}", "{elsewhere}"], "the checkpoints must be of one run directory, not 2"),
    ],
)
def test_evaluate_refuses_bad_input_in_one_line(tmp_path, args, expected):
    checkpoint, other, elsewhere = tmp_path / "model_1.pt", tmp_path / "model_2.pt", tmp_path / "run2" / "model_1.pt"
    elsewhere.parent.mkdir()
    for path in (checkpoint, other, elsewhere):
        path.write_bytes(b"")
    if "no manifest" not in expected:
        manifest = {"args": {"task": "Rlscale-Go1-Flat", "rl_library": "rsl_rl"}}
        for folder in (tmp_path, elsewhere.parent):
            (folder / "manifest.json").write_text(json.dumps(manifest))
    paths = {"file": checkpoint, "other": other, "elsewhere": elsewhere}
    result = rlscale("evaluate", *[arg.format(**paths) for arg in args], timeout=120)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert expected in result.stderr
