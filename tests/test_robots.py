"""Rlscale-Go1-Flat and Rlscale-G1-Flat: registration, the velocity MDP's terms on hand-made states, the torch MDP
against the JAX one and MuJoCo Warp against MuJoCo, the contract (check_task), an undersized buffer, training with
every library on two CPU ranks, and ``rlscale evaluate``.

The in-process tests share one build per robot (default config, 8 envs). MuJoCo Warp runs on its CPU device here;
its kernels compile once per host (a minute on 2 cores) and load from Warp's cache after that.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from physics_support import requires_mjx, requires_warp
from rlscale_command import rlscale
from run_manifests import manifest_data

from rlscale.tasks import UnknownTaskError, list_tasks, resolve_task_id

pytestmark = pytest.mark.robots  # make test-robots: the robots' training processes take minutes on the CPU

NUM_ENVS = 8
TIMEOUT_S = 600
"""Of each rlscale child: a robot trained, evaluated or filmed on CPU takes minutes."""
ROBOTS = ("Rlscale-Go1-Flat", "Rlscale-G1-Flat")


_BUILT: dict[str, object] = {}


def built(task_id: str):
    """One build of a robot per test process (the default config, as check_task builds it)."""
    from rlscale.tasks import make_task

    if task_id not in _BUILT:
        _BUILT[task_id] = make_task(task_id, num_envs=NUM_ENVS, seed=0)
    task = _BUILT[task_id]
    task.reset()
    return task


class TestRegistration:
    def test_listed_without_importing_an_engine(self):
        code = "import sys; from rlscale.tasks import list_tasks; ids = list_tasks(); "
        code += (
            f"print(all(t in ids for t in {ROBOTS!r}), "
            "any(m.split('.')[0] in ('jax', 'mujoco', 'warp', 'mujoco_warp') for m in sys.modules))"
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
            "train",
            "--task",
            "Rlscale-Go1-Flat",
            "--device",
            "cpu",
            "--log_root",
            str(tmp_path / "logs"),
            override,
            timeout=TIMEOUT_S,
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
    pytest.importorskip("mujoco_warp")
    import mujoco

    from rlscale.tasks.locomotion.env import lowest_point

    tilt = math.radians(30)  # about the world x axis: the geom's local z leans by 30 degrees
    rotation = torch.tensor([[[1, 0, 0], [0, math.cos(tilt), -math.sin(tilt)], [0, math.sin(tilt), math.cos(tilt)]]])
    center = torch.tensor([[0.0, 0.0, 1.0]])
    geom = mujoco.mjtGeom
    cases = {
        geom.mjGEOM_SPHERE: ([0.2, 0, 0], 1.0 - 0.2),
        geom.mjGEOM_CAPSULE: ([0.1, 0.3, 0], 1.0 - 0.3 * math.cos(tilt) - 0.1),
        geom.mjGEOM_CYLINDER: ([0.1, 0.3, 0], 1.0 - 0.3 * math.cos(tilt) - 0.1 * math.sin(tilt)),
        geom.mjGEOM_BOX: ([0.5, 0.2, 0.1], 1.0 - 0.2 * math.sin(tilt) - 0.1 * math.cos(tilt)),
    }
    for geom_type, (size, expected) in cases.items():
        got = float(lowest_point(geom_type, torch.tensor(size), center, rotation)[0])
        assert got == pytest.approx(expected, abs=1e-6), mujoco.mjtGeom(geom_type).name


def with_state(task, **values) -> dict:
    """The task's state with ``values`` (one env's, given as lists) set in every env."""
    state = {name: value.clone() for name, value in task.task_state.items()}
    for name, value in values.items():
        state[name] = torch.as_tensor(value, dtype=state[name].dtype).expand_as(state[name]).clone()
    return state


@requires_warp
class TestGo1Mdp:
    """The MDP hooks are batched functions of the physics and the task state: each is called here on states set by
    hand, the same in every env."""

    def test_sizes_and_timing_follow_isaac_lab(self):
        task = built("Rlscale-Go1-Flat")
        assert (task.num_actions, task.observation_dims["policy"]) == (12, 48)
        assert task.step_dt == pytest.approx(0.02) and task.max_episode_length == 1000
        assert task.reward_terms[:3] == ("track_lin_vel_xy_exp", "track_ang_vel_z_exp", "lin_vel_z_l2")
        assert "Metrics/base_velocity/error_vel_xy" in task.step(torch.zeros(NUM_ENVS, 12))[4]["log"]

    def test_its_solver_runs_three_iterations_where_its_model_says_one_unless_set(self):
        import mujoco

        from rlscale.tasks import make_task

        task = make_task("Rlscale-Go1-Flat", num_envs=2, seed=0)
        assert mujoco.MjModel.from_xml_string(task.mjcf).opt.iterations == 1
        assert task.mj_model.opt.iterations == task.model.opt.iterations == 3
        assert make_task("Rlscale-Go1-Flat", num_envs=2, seed=0, solver_iterations=1).model.opt.iterations == 1

    def test_it_stands_on_four_feet_with_zero_actions(self):
        task = built("Rlscale-Go1-Flat")
        falls = 0
        for _ in range(60):
            _, _, terminated, _, _ = task.step(torch.zeros(NUM_ENVS, task.num_actions))
            falls += int(terminated.sum())
        assert falls == 0
        assert bool(task.task_state["foot_contact"].all())
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
        task = built("Rlscale-Go1-Flat")
        touchdown = {"last_air_time": [0.7, 0.9, 0.2, 0.0], "first_contact": [True, False, True, False]}
        moving = with_state(task, **touchdown, command=[0.5, 0.0, 0.0])
        standing = with_state(task, **touchdown, command=[0.05, 0.05, 1.0])  # |v_xy| < 0.1: no reward
        reward = task._reward_feet_air_time
        assert reward(task.physics, moving, None, None, None) == pytest.approx(
            torch.full((NUM_ENVS,), (0.7 - 0.5) + (0.2 - 0.5))
        )
        assert not reward(task.physics, standing, None, None, None).any()

    def test_commands_resample_when_their_time_is_up_and_heading_steers_yaw(self):
        task = built("Rlscale-Go1-Flat")
        cfg = task.cfg.commands
        heading = task._heading(task.physics)
        due = with_state(task, command_time_left=0.01, heading_env=False, standing_env=False)
        changed = task._before_observe(task.physics, due)
        # each resample draws its own heading-env and standing-env flags: compare the sampled values only
        assert changed["command_time_left"] == pytest.approx(torch.full((NUM_ENVS,), cfg.resampling_time_s[0]))
        samples = {tuple(pair) for pair in changed["command"][:, :2].tolist()}
        assert len(samples) == NUM_ENVS and all(abs(v) <= 1.0 for pair in samples for v in pair)
        steering = with_state(task, heading_env=True, standing_env=False, command_time_left=5.0)
        steering["heading_target"] = heading + 0.4
        steered = task._before_observe(task.physics, steering)
        assert steered["command"][:, 2] == pytest.approx(
            torch.full((NUM_ENVS,), cfg.heading_control_stiffness * 0.4), abs=1e-5
        )
        assert steered["command_time_left"] == pytest.approx(torch.full((NUM_ENVS,), 5.0 - task.step_dt))

    def test_a_push_adds_a_bounded_base_velocity_when_due(self):
        task = built("Rlscale-Go1-Flat")
        before = task.physics.qvel.clone()
        after = task._before_observe(task.physics, with_state(task, push_time_left=0.0))
        kick = task.physics.qvel[:, :2] - before[:, :2]
        assert float(kick.abs().max()) <= task.cfg.events.push_velocity_xy and float(kick.abs().sum()) > 0
        low, high = task.cfg.events.push_interval_s
        assert ((after["push_time_left"] >= low) & (after["push_time_left"] <= high)).all()
        before = task.physics.qvel.clone()
        task._before_observe(task.physics, with_state(task, push_time_left=3.0))
        assert torch.equal(task.physics.qvel, before)

    def test_fixed_commands_and_the_tracking_error_of_a_robot_standing_still(self):
        task = built("Rlscale-Go1-Flat")
        commands = torch.tensor([[1.0, 0.0, 0.0], [0.0, -0.5, 0.5]]).repeat(NUM_ENVS // 2, 1)
        task.set_commands(commands)
        for _ in range(30):
            task.step(torch.zeros(NUM_ENVS, task.num_actions))
        assert torch.equal(task.task_state["command"], commands)
        errors = task.episode_tracking_errors
        assert errors[0::2, 0] == pytest.approx(torch.ones(NUM_ENVS // 2), abs=0.15)  # |(1, 0) - ~0|
        assert errors[1::2, 0] == pytest.approx(torch.full((NUM_ENVS // 2,), 0.5), abs=0.15)
        assert errors[1::2, 1] == pytest.approx(torch.full((NUM_ENVS // 2,), 0.5), abs=0.15)


@requires_warp
class TestG1Mdp:
    def test_sizes_and_its_biped_terms(self):
        task = built("Rlscale-G1-Flat")
        assert (task.num_actions, task.observation_dims["policy"]) == (29, 99)
        assert {"termination_penalty", "feet_slide", "joint_deviation_arms"} <= set(task.reward_terms)
        arms = task._joint_mask("joint_deviation_arms")
        assert int(arms.sum()) == 14  # shoulder pitch, roll, yaw, elbow, wrist roll, pitch, yaw; both arms

    def test_biped_air_time_rewards_the_shorter_single_stance_phase_up_to_the_threshold(self):
        task = built("Rlscale-G1-Flat")
        single = {"command": [0.8, 0.0, 0.0], "foot_contact": [True, False], "contact_time": [0.3, 0.0]}
        single["air_time"] = [0.0, 0.25]
        long_single = {**single, "contact_time": [0.9, 0.0], "air_time": [0.0, 0.7]}
        double = {**single, "foot_contact": [True, True], "contact_time": [0.3, 0.2]}
        reward = task._reward_feet_air_time
        assert reward(task.physics, with_state(task, **single), None, None, None) == pytest.approx(
            torch.full((NUM_ENVS,), 0.25)
        )
        assert reward(task.physics, with_state(task, **long_single), None, None, None) == pytest.approx(
            torch.full((NUM_ENVS,), 0.4)  # the threshold
        )
        assert not reward(task.physics, with_state(task, **double), None, None, None).any()

    def test_without_a_policy_it_falls_and_base_contact_ends_the_episode(self):
        """Playground's soft ankles (kp 20) cannot hold the G1 at zero action: the policy must balance it."""
        task = built("Rlscale-G1-Flat")
        ended = torch.zeros(NUM_ENVS, dtype=torch.bool)
        for _ in range(150):  # 3 s
            _, _, terminated, truncated, extras = task.step(torch.zeros(NUM_ENVS, task.num_actions))
            assert not truncated.any()
            ended |= terminated
        assert ended.all() and float(extras["log"]["Episode_Termination/base_contact"]) > 0


@requires_warp
@pytest.mark.parametrize("task_id", ROBOTS)
def test_each_robot_keeps_the_vectask_contract_on_cpu(task_id):
    from rlscale.tasks.conformance import check_task

    report = check_task(task_id, "cpu", num_envs=NUM_ENVS)
    assert report.conforms, report.violations


SAME_STARTS = {"events.reset_yaw": (0.3, 0.3), "events.reset_joint_position_scale": (1.2, 1.2)}
SAME_STARTS |= {"events.reset_base_velocity": 0.0, "noise.enable": False}
"""Overrides that make the resets and the observations deterministic, so that both engines' can be compared."""


def mjx_mdp(task_id: str, **overrides):
    """The MJX task's MDP hooks on CPU, without its compiled step (the hooks are what is compared, and compiling the
    whole step would take a minute per robot)."""
    import mujoco
    from mujoco import mjx

    from rlscale.tasks import get_spec
    from rlscale.tasks.locomotion import mjx_env
    from rlscale.tasks.overrides import with_overrides

    cfg = with_overrides(get_spec(task_id).cfg_class(), overrides | {"physics": "mjx"})
    task_class = {"Rlscale-Go1-Flat": mjx_env.Go1FlatTask, "Rlscale-G1-Flat": mjx_env.G1FlatTask}[task_id]
    task = task_class.__new__(task_class)
    task.cfg, task.mjcf = cfg, task_class.robot.mjcf
    task.reward_terms = tuple(item.name for item in dataclasses.fields(cfg.rewards))
    task.step_dt = cfg.sim_dt * cfg.decimation
    task.mj_model = mujoco.MjModel.from_xml_string(task.mjcf)
    task._read_model()
    return task, mjx.make_data(task.mj_model)


@requires_warp
@requires_mjx
@pytest.mark.parametrize("task_id", ROBOTS)
def test_the_torch_and_jax_mdps_agree_on_the_same_states(task_id):
    """Every hook of the MuJoCo Warp task (torch) and of the MJX task (JAX), given the same physics states, task
    states and actions: observations, every reward term, terminations, resets, commands, contacts and metrics agree
    within float32 tolerance. A silent difference in one term is how a walking robot goes back to standing."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from rlscale.tasks import make_task
    from rlscale.tasks.mjwarp.backend import Physics

    n = 32
    warp = make_task(task_id, num_envs=n, seed=5, **SAME_STARTS)
    jax_task, data0 = mjx_mdp(task_id, **SAME_STARTS)
    generator = torch.Generator().manual_seed(0)
    for _ in range(40):  # feet in the air and on the floor, some robots falling
        warp.step(0.6 * torch.randn(n, warp.num_actions, generator=generator))
    sunk = warp.physics.geom_xpos.clone()
    sunk[:4, :, 2] -= 1.0  # four robots through the floor: they end their episodes, their feet touch
    physics = dataclasses.replace(warp.physics, geom_xpos=sunk)
    state = {name: value.clone() for name, value in warp.task_state.items()}
    state["heading_env"] = torch.arange(n) % 3 == 0
    state["standing_env"] = torch.arange(n) % 7 == 0
    state["command_time_left"].fill_(5.0)  # no resampling and no push: the random draws are left out
    state["push_time_left"].fill_(5.0)
    actions, last_actions = (torch.randn(n, warp.num_actions, generator=generator) for _ in range(2))

    def to_jax(tree):
        return {name: jnp.asarray(value.numpy()) for name, value in tree.items()}

    batch = jax.tree_util.tree_map(lambda leaf: jnp.broadcast_to(leaf, (n, *leaf.shape)), data0)
    data = batch.replace(**to_jax({name: getattr(physics, name) for name in Physics.__dataclass_fields__}))
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    jax_state = to_jax(state)

    def agree(torch_value, jax_value, what):
        expected = np.asarray(jax_value)
        got = torch_value.numpy()
        assert got.shape == expected.shape, what
        if got.dtype == bool:
            assert (got == expected).all(), what
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, err_msg=what)

    agree(warp._control(actions), jax.vmap(jax_task._control)(jnp.asarray(actions.numpy())), "control")
    after = warp._after_physics(physics, state, actions)
    jax_after = jax.vmap(jax_task._after_physics)(data, jax_state, jnp.asarray(actions.numpy()))
    for name in after:
        agree(after[name], jax_after[name], f"after_physics {name}")
    flags = warp._termination_flags(physics, after)
    agree(flags, jax.vmap(jax_task._termination_flags)(data, jax_after), "terminations")
    assert flags.any() and not flags.all()  # both kinds of env are compared
    terminated = flags.any(dim=1)
    rewards = warp._reward_values(physics, after, actions, last_actions, terminated)
    jax_rewards = jax.vmap(jax_task._reward_values)(
        data,
        jax_after,
        jnp.asarray(actions.numpy()),
        jnp.asarray(last_actions.numpy()),
        jnp.asarray(terminated.numpy()),
    )
    for index, term in enumerate(warp.reward_terms):
        agree(rewards[:, index], jax_rewards[:, index], f"reward {term}")
    steps = torch.arange(1, n + 1)
    agree(
        warp._episode_metrics(physics, after, steps),
        jax.vmap(jax_task._episode_metrics)(data, jax_after, jnp.asarray(steps.numpy())),
        "metrics",
    )
    commanded = warp._before_observe(physics, after)
    _, jax_commanded = jax.vmap(jax_task._before_observe)(data, jax_after, keys)
    for name in ("command", "command_time_left", "push_time_left"):
        agree(commanded[name], jax_commanded[name], f"before_observe {name}")
    observations = warp._observe(physics, commanded, last_actions)
    agree(
        observations,
        jax.vmap(jax_task._observe)(data, jax_commanded, jnp.asarray(last_actions.numpy()), keys),
        "observations",
    )
    qpos, qvel = warp._sample_reset(n)
    jax_qpos, jax_qvel = jax.vmap(jax_task._sample_reset)(keys)
    agree(qpos, jax_qpos, "reset qpos")
    agree(qvel, jax_qvel, "reset qvel")


@requires_warp
@pytest.mark.parametrize("robot", ["go1", "g1"])
def test_mujoco_warp_steps_each_robot_as_mujoco_does(robot):
    """One control sequence through MuJoCo Warp (its CPU device, float32) and MuJoCo's own ``mj_step`` (float64):
    the joint and base positions agree within 1e-4 (m, rad) over 300 physics steps (1.5 s).

    Both solvers run to convergence here: with the models' own caps (1 and 3 iterations) each engine stops its
    solver at a different point, and the states part by about 1e-2 within 100 steps, as MJX's do from MuJoCo's.
    """
    from importlib import resources

    import mujoco
    import numpy as np
    import warp as wp

    from rlscale.tasks.mjwarp import backend  # noqa: F401  Warp's logging set as the tasks set it
    from rlscale.tasks.mjwarp.backend import mjw
    from rlscale.tasks.mjwarp.capacity import model_capacity

    model = mujoco.MjModel.from_xml_string(
        resources.files("rlscale.tasks.locomotion").joinpath("assets", f"{robot}.xml").read_text()
    )
    model.opt.timestep, model.opt.iterations, model.opt.ls_iterations = 0.005, 100, 50
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    capacity = model_capacity(model)
    with wp.ScopedDevice("cpu"):
        warp_model = mjw.put_model(model)
        warp_model.opt.warn_overflow = 0
        warp_data = mjw.put_data(model, data, nworld=1, nconmax=capacity.contacts, njmax=capacity.constraints)
        home, worst = data.ctrl.copy(), 0.0
        for step in range(300):
            data.ctrl[:] = home + 0.2 * np.sin(0.05 * step + np.arange(model.nu))
            wp.copy(warp_data.ctrl, wp.array(data.ctrl[None].astype(np.float32), dtype=float))
            mujoco.mj_step(model, data)
            mjw.step(warp_model, warp_data)
            worst = max(worst, float(np.abs(warp_data.qpos.numpy()[0] - data.qpos).max()))
    assert worst < 1e-4
    assert abs(data.qpos[2] - model.key("home").qpos[2]) > 0.01  # the controls moved the robot


@requires_warp
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("task_id", ROBOTS)
def test_on_cuda_the_whole_step_replays_as_one_graph(task_id):
    """The substeps, the MDP and the resets captured together keep stepping through falls and resets, with finite
    outputs. The trajectory is not compared with an eager build's: MuJoCo Warp's atomic sums on the GPU part two
    builds of one seed within a few steps (joint velocities by up to 2.8 rad/s within 5 steps on an H100)."""
    from rlscale.tasks.graph import build_task, env_step_of

    task = build_task(task_id, cuda_graph=True, device="cuda", num_envs=256, seed=3)
    assert not task.task.bitwise_repeatable
    generator = torch.Generator("cuda").manual_seed(0)
    ended = torch.zeros((), device="cuda")
    for _ in range(150):
        observations, reward, terminated, _, _ = task.step(
            0.5 * torch.randn(256, task.num_actions, device="cuda", generator=generator)
        )
        assert observations["policy"].isfinite().all() and reward.isfinite().all()
        ended += terminated.sum()
    assert env_step_of(task) == "cuda_graph" and float(ended) > 0
    task.check_physics()


@requires_warp
def test_an_undersized_contact_buffer_stops_the_run_in_one_line(tmp_path):
    result = rlscale(
        "train", "--task", "Rlscale-G1-Flat", "--device", "cpu", "--num_envs", "4", "--max_iterations", "2",
        "--log_root", str(tmp_path), "env.contacts_per_world=1", timeout=TIMEOUT_S,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    (line,) = [line for line in result.stderr.strip().splitlines() if "error" in line]
    assert line == (
        "rlscale train: error: MuJoCo Warp ran out of buffer: "
        "a world needed more than env.contacts_per_world=1; raise it"
    )
    assert result.stderr.strip().splitlines()[-1] == line and "Traceback" not in result.stderr
    (manifest,) = [json.loads(path.read_text()) for path in tmp_path.rglob("manifest.json")]
    assert manifest["status"] == "crashed" and "contacts_per_world=1" in manifest["error"]


@requires_warp
def test_the_startup_benchmark_tells_a_cold_kernel_cache_from_a_warm_one(tmp_path):
    """A copy of Warp's kernel cache without the modules of MuJoCo Warp's reset (a step launches them all): the
    first run compiles what is missing, the second loads every module."""
    source = Path(os.environ.get("WARP_CACHE_PATH", Path.home() / ".cache" / "warp"))
    cache = tmp_path / "cache"
    if source.is_dir():
        shutil.copytree(source, cache)
    for module in cache.glob("*/wp_reset_data_*"):
        shutil.rmtree(module)
    states = []
    for run in ("first", "second"):
        bundle = tmp_path / f"{run}.json"
        result = rlscale(
            "benchmark", "startup", "--task", "Rlscale-Go1-Flat", "--rl_library", "rsl_rl", "--device", "cpu",
            "--num_envs", "4", "--log_root", str(tmp_path / "logs"), "--output_path", str(bundle),
            env={"WARP_CACHE_PATH": str(cache)}, timeout=TIMEOUT_S,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        runtime = json.loads(bundle.read_text())["runtime"]
        states.append((runtime["kernel_cache"]["state"], runtime["kernel_cache"]["modules_compiled"] > 0))
        assert f"task_compile with a {states[-1][0]} kernel cache" in result.stdout
    assert states == [("cold", True), ("warm", False)]


def train_on_two_cpu_ranks(log_root: Path, task_id: str, library: str, *extra: str) -> Path:
    """Train ``task_id`` with ``library`` on two CPU ranks; check both ranks completed with the same parameters, and
    return rank 0's run directory."""
    result = rlscale(
        "train_multigpu", "--task", task_id, "--rl_library", library, "--num_gpus", "2", "--device", "cpu",
        "--num_envs", str(NUM_ENVS), "--log_root", str(log_root), *extra, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    by_rank = {
        data["rank"]: (path, data)
        for path, data in ((p, json.loads(p.read_text())) for p in log_root.rglob("manifest.json"))
    }
    assert sorted(by_rank) == [0, 1] and all(data["status"] == "completed" for _, data in by_rank.values())
    rank0_path, rank0 = by_rank[0]
    assert len(set(rank0["rank_param_digests"])) == 1
    return rank0_path.parent


@requires_warp
@pytest.mark.slow
@pytest.mark.parametrize("library", ["rsl_rl", "rl_games", "skrl"])
def test_every_library_trains_the_g1_on_two_cpu_ranks(tmp_path, library):
    """The Go1's two-rank runs are those of the evaluation test below."""
    train_on_two_cpu_ranks(tmp_path, "Rlscale-G1-Flat", library, "--max_iterations", "1")


CHECKPOINTS = {"rsl_rl": "model_*.pt", "rl_games": "nn/*.pth", "skrl": "checkpoints/agent_*.pt"}
"""Where each library's checkpoints lie in a run directory."""


@requires_warp
@pytest.mark.slow
@pytest.mark.parametrize("library", list(CHECKPOINTS))
def test_every_library_trains_the_go1_on_two_cpu_ranks_and_evaluate_reads_its_checkpoints(tmp_path, library):
    """``rlscale evaluate`` reports the tracking error and falls per command of each checkpoint."""
    run = train_on_two_cpu_ranks(
        tmp_path / "runs", "Rlscale-Go1-Flat", library, "--max_iterations", "2", "--checkpoint_interval", "1"
    )
    checkpoints = sorted(run.glob(CHECKPOINTS[library]))
    assert len(checkpoints) >= 2, checkpoints
    result = rlscale(
        "evaluate", "--checkpoint", *map(str, checkpoints), "--num_envs", "4", "--command", "1.0,0.0,0.0",
        "--command", "0.0,0.0,0.0", "--output", str(tmp_path / "{checkpoint}.json"), timeout=TIMEOUT_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    for checkpoint in checkpoints:  # one process, one file per checkpoint
        evaluation = json.loads((tmp_path / f"{checkpoint.stem}.json").read_text())
        assert evaluation["checkpoint"] == str(checkpoint)
        assert [entry["command"] for entry in evaluation["per_command"]] == [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
        assert [entry["envs"] for entry in evaluation["per_command"]] == [2, 2]
        summary = evaluation["summary"]
        assert summary["envs"] == 4 and 0.0 <= summary["fall_rate"] <= 1.0 and summary["lin_vel_error_mps"] >= 0.0
    if torch.cuda.is_available():  # on a GPU the evaluation's step replays one CUDA graph
        on_cuda = rlscale(
            "evaluate", "--checkpoint", str(checkpoints[-1]), "--num_envs", "4", "--device", "cuda", timeout=TIMEOUT_S
        )
        assert on_cuda.returncode == 0 and "eagerly" not in on_cuda.stderr, on_cuda.stderr[-3000:]


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
        manifest = manifest_data({"args": {"task": "Rlscale-Go1-Flat", "rl_library": "rsl_rl"}})
        for folder in (tmp_path, elsewhere.parent):
            (folder / "manifest.json").write_text(json.dumps(manifest))
    paths = {"file": checkpoint, "other": other, "elsewhere": elsewhere}
    result = rlscale("evaluate", *[arg.format(**paths) for arg in args], timeout=120)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert expected in result.stderr
