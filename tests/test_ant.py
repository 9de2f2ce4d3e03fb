"""Rlscale-Ant on MuJoCo Warp (its CPU device): stepping and resets, zero-copy views, and training end to end; and on
its MJX engine (``physics=mjx``): the DLPack path and the device placement.

Warp keeps its compiled kernels in its cache, so only the first build of a fresh host compiles. MJX's compile dominates
on CPU, so its processes share one persistent JAX compilation cache and the XLA CPU backend's cheap optimisation
level (``FAST_COMPILE``): both change compile time only, not results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from physics_support import FAST_COMPILE, requires_mjx, requires_warp
from rlscale_command import rlscale

from rlscale.tasks import list_tasks, make_task

NUM_ENVS = 16


@pytest.fixture(scope="module")
def task():
    task = make_task("Rlscale-Ant", num_envs=NUM_ENVS, seed=3)
    print(f"Rlscale-Ant compile_s={task.compile_s:.1f}")
    return task


@pytest.fixture(scope="module")
def mjx_task(jax_env):
    saved = {key: os.environ.get(key) for key in jax_env}
    os.environ.update(jax_env)  # read when JAX's CPU backend starts (unless another test started it already)
    try:
        return make_task(
            "Rlscale-Ant", num_envs=NUM_ENVS, seed=3, physics="mjx", jax_cache_dir=jax_env["JAX_COMPILATION_CACHE_DIR"]
        )
    finally:
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


class TestRegistration:
    def test_listed_without_importing_an_engine(self):
        code = "import sys; from rlscale.tasks import list_tasks; ids = list_tasks(); print('Rlscale-Ant' in ids, "
        code += "any(m.split('.')[0] in ('jax', 'mujoco', 'warp', 'mujoco_warp') for m in sys.modules))"
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert result.stdout.split() == ["True", "False"], result.stderr
        assert "Rlscale-Ant" in list_tasks()

    def test_without_the_extra_one_line_names_it(self, monkeypatch):
        from rlscale.tasks.physics import PhysicsUnavailableError

        monkeypatch.setitem(sys.modules, "mujoco", None)  # makes `import mujoco` fail, as on a base install
        monkeypatch.setitem(sys.modules, "mujoco_warp", None)
        with pytest.raises(
            PhysicsUnavailableError,
            match=r"^Rlscale-Ant with physics=warp needs MuJoCo Warp: pip install 'rlscale\[warp\]'$",
        ):
            make_task("Rlscale-Ant", num_envs=2)

    def test_the_other_engine_without_its_extra_is_named(self, monkeypatch):
        from rlscale.tasks.physics import PhysicsUnavailableError

        monkeypatch.setitem(sys.modules, "mujoco.mjx", None)
        with pytest.raises(PhysicsUnavailableError, match=r"physics=mjx needs MuJoCo MJX and JAX: .*'rlscale\[mjx\]'$"):
            make_task("Rlscale-Ant", num_envs=2, physics="mjx")

    def test_train_refuses_it_in_one_line_without_the_extra(self, monkeypatch, tmp_path, capsys):
        """rlscale train checks the backend while parsing: exit 2, one line naming the extra, nothing written."""
        from rlscale.run.spec import resolve_spec

        # Every engine module hidden, whatever an earlier test of this process imported.
        for module in ("mujoco", "mujoco.mjx", "mujoco_warp"):
            monkeypatch.setitem(sys.modules, module, None)
        with pytest.raises(SystemExit) as raised:
            resolve_spec(["--task", "Rlscale-Ant", "--device", "cpu", "--log_root", str(tmp_path / "logs")])
        assert raised.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and "pip install 'rlscale[warp]'" in lines[0]
        assert not (tmp_path / "logs").exists()


@requires_warp
class TestStepAndReset:
    def test_shapes_dtypes_and_finite_values(self, task):
        observations, _ = task.reset()
        assert observations["policy"].shape == (NUM_ENVS, task.observation_dims["policy"])
        generator = torch.Generator().manual_seed(0)
        for _ in range(30):
            actions = torch.rand(NUM_ENVS, task.num_actions, generator=generator) * 2 - 1
            observations, reward, terminated, truncated, extras = task.step(actions)
            policy = observations["policy"]
            assert policy.shape == (NUM_ENVS, 34) and policy.dtype == torch.float32 and policy.isfinite().all()
            assert reward.shape == (NUM_ENVS,) and reward.dtype == torch.float32 and reward.isfinite().all()
            assert terminated.dtype == truncated.dtype == extras["done"].dtype == torch.bool
            assert not (terminated & truncated).any()
            assert extras["episode_length"].dtype == torch.long and extras["episode_return"].shape == (NUM_ENVS,)
            assert all(value.dim() == 0 and value.isfinite() for value in extras["log"].values())
        assert {f"Episode_Reward/{t}" for t in task.reward_terms} <= set(extras["log"])
        assert task.episode_length_buf.dtype == torch.long

    def test_forced_termination_resets_that_env_only(self, task):
        task.reset()
        task.step(torch.zeros(NUM_ENVS, task.num_actions))
        qpos = task.qpos.clone()
        qpos[3, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0])  # upside down
        task.write_state(qpos, torch.zeros(NUM_ENVS, task.mj_model.nv))
        observations, _, terminated, truncated, extras = task.step(torch.zeros(NUM_ENVS, task.num_actions))
        assert terminated.tolist() == [env == 3 for env in range(NUM_ENVS)] and not truncated.any()
        assert extras["episode_length"][3] == 2 and task.episode_length_buf[3] == 0
        assert task.episode_length_buf[0] == 2
        assert extras["log"]["Episode_Termination/flipped"] == 1
        assert observations["policy"][3, 9] == pytest.approx(-1.0, abs=1e-4)  # upright again: gravity along -z
        assert observations["policy"][3, 0] == pytest.approx(float(task.mj_model.qpos0[2]), abs=1e-4)

    def test_forward_speed_is_the_ended_episodes_distance_over_time(self, task):
        task.reset()
        task.step(torch.zeros(NUM_ENVS, task.num_actions))
        qpos = task.qpos.clone()
        qpos[5, 0] = 0.4  # 0.4 m forward after one step, then flipped so that the next step ends the episode
        qpos[5, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0])
        task.write_state(qpos, torch.zeros(NUM_ENVS, task.mj_model.nv))
        _, _, terminated, _, extras = task.step(torch.zeros(NUM_ENVS, task.num_actions))
        assert terminated.tolist() == [env == 5 for env in range(NUM_ENVS)]
        assert extras["log"]["Metrics/forward_speed"] == pytest.approx(0.4 / (2 * task.step_dt), rel=0.02)

    def test_episode_length_buf_is_writable(self, task):
        task.reset()
        task.episode_length_buf = torch.full((NUM_ENVS,), task.max_episode_length - 1)
        _, _, terminated, truncated, _ = task.step(torch.zeros(NUM_ENVS, task.num_actions))
        assert (truncated | terminated).all() and (task.episode_length_buf == 0).all()


HOOKS = [
    ("reward_weights", 0, 0),
    ("_sample_reset", 1, 1),
    ("_control", 1, 1),
    ("_observe", 4, 3),
    ("_termination_flags", 2, 2),
    ("_reward_values", 5, 5),
    ("_episode_metrics", 3, 3),
]
"""Each MDP hook, and how many arguments it takes on MJX and on MuJoCo Warp."""


@pytest.mark.parametrize(
    "engine", [pytest.param("mjx", marks=requires_mjx), pytest.param("mjwarp", marks=requires_warp)]
)
@pytest.mark.parametrize(("hook", "mjx_arguments", "warp_arguments"), HOOKS)
def test_every_mdp_hook_is_the_subclass_to_write(engine, hook, mjx_arguments, warp_arguments):
    """Neither backend implements the MDP: a subclass that forgets a hook fails when it is first called."""
    if engine == "mjx":
        from rlscale.tasks.mjx.backend import MjxVecTask as backend
    else:
        from rlscale.tasks.mjwarp.backend import WarpVecTask as backend

    with pytest.raises(NotImplementedError):
        getattr(backend, hook)(object(), *[None] * (mjx_arguments if engine == "mjx" else warp_arguments))


@requires_warp
def test_the_physics_views_are_warps_own_memory(task):
    """Torch reads and writes MuJoCo Warp's arrays in place: no copy in either direction."""
    task.reset()
    assert task.physics.qpos.data_ptr() == task.data.qpos.ptr and task.physics.ctrl.data_ptr() == task.data.ctrl.ptr
    task.step(torch.full((NUM_ENVS, task.num_actions), 0.5))
    assert torch.equal(task.physics.ctrl, torch.as_tensor(task.data.ctrl.numpy()))
    assert torch.allclose(task.physics.ctrl, torch.full_like(task.physics.ctrl, 0.5 * task.cfg.action_scale))


@requires_mjx
class TestDlpack:
    def test_outputs_alias_the_jitted_buffers_without_host_copies(self, mjx_task, monkeypatch):
        task = mjx_task
        import jax

        seen = {}

        def spy(state, actions):
            seen["actions"] = actions
            seen["state"], seen["outputs"] = compiled(state, actions)
            return seen["state"], seen["outputs"]

        compiled = task._step_fn
        monkeypatch.setattr(task, "_step_fn", spy)
        task.reset()
        actions = torch.rand(NUM_ENVS, task.num_actions)
        with jax.transfer_guard("disallow"):  # any implicit host<->device transfer would raise
            observations, reward, terminated, truncated, extras = task.step(actions)
        returned = [observations["policy"], reward, terminated, truncated, extras["done"], extras["episode_return"]]
        pointers = [output.unsafe_buffer_pointer() for output in seen["outputs"][:6]]
        assert [tensor.data_ptr() for tensor in returned] == pointers
        assert seen["actions"].unsafe_buffer_pointer() == actions.data_ptr()  # torch -> JAX: no copy either
        log_buffer = seen["outputs"][7].unsafe_buffer_pointer()
        assert [value.data_ptr() for value in extras["log"].values()] == [
            log_buffer + 4 * i for i in range(len(extras["log"]))
        ]
        assert task.get_observations()["policy"].data_ptr() == pointers[0]


@requires_mjx
class TestDevicePlacement:
    def test_the_task_lives_on_its_own_device_only(self, jax_env):
        """As rank 1 of a GPU host, where JAX's default device is another rank's GPU: two CPU devices stand in."""
        code = """
import jax, torch
from rlscale.tasks import make_task
from rlscale.tasks.mjx import backend
own = jax.devices("cpu")[1]
backend.jax_device_for = lambda device: own
task = make_task("Rlscale-Ant", num_envs=4, seed=0, physics="mjx")
with jax.transfer_guard("disallow"):  # an array left on device 0 would need a transfer into the step
    for _ in range(3):
        task.step(torch.zeros(4, task.num_actions))
print(sorted({device.id for leaf in jax.tree_util.tree_leaves(task._state) for device in leaf.devices()}))
"""
        env = {**jax_env, "XLA_FLAGS": f"{FAST_COMPILE} --xla_force_host_platform_device_count=2"}
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.strip().splitlines()[-1] == "[1]"


class TestOwnGpuPerRank:
    """Warp and JAX open a context on every GPU they see, so each rank of an Ant job is shown only its own GPU, as
    cuda:0."""

    @pytest.mark.parametrize(
        ("visible", "local_rank", "expected"),
        [(None, 1, "1"), ("4,6", 1, "6"), ("GPU-a,GPU-b", 0, "GPU-a"), ("6", 1, "6")],
        ids=["all-visible", "listed", "uuids", "already-bound"],
    )
    def test_the_rank_keeps_its_own_entry_as_local_rank_0(self, visible, local_rank, expected):
        from rlscale.dist import RankInfo, own_gpu_variables

        environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
        rank = RankInfo(rank=local_rank, local_rank=local_rank, world_size=2, local_world_size=2)
        variables = own_gpu_variables(environ, rank)
        assert variables == {"CUDA_VISIBLE_DEVICES": expected, "LOCAL_RANK": "0", "RLSCALE_LOCAL_RANK": str(local_rank)}

    def test_a_rank_beyond_the_listed_gpus_is_refused(self):
        from rlscale.dist import RankInfo, own_gpu_variables

        with pytest.raises(ValueError, match="local rank 2 has no GPU"):
            own_gpu_variables({"CUDA_VISIBLE_DEVICES": "0,1"}, RankInfo(2, 2, 3, 3))

    @requires_warp
    @pytest.mark.parametrize("entry", ["train", "benchmark worker"])
    @pytest.mark.parametrize(("task", "expected"), [("Rlscale-Ant", "5 0"), ("Isaac-Cartpole-Direct", "5 0")])
    def test_a_cuda_rank_isolates_only_tasks_that_ask(self, entry, task, expected):
        """Rank 1 of 2 on a GPU host: Ant narrows the variables before anything asks CUDA; Cartpole keeps them.

        The benchmark worker must do it before it imports the library: after rl_games' import it came too late on a GPU.
        """
        argv = ["--task", task, "--device", "cuda", "--rl_library", "rl_games"]
        if entry == "train":
            call = f"from rlscale.run.train import resolve_own_spec; resolve_own_spec({argv + ['--distributed']!r})"
        else:
            call = (
                "from argparse import Namespace; from rlscale.benchmark import worker; "
                "from rlscale.benchmark.workflows.training import WORKFLOW as TRAINING; "
                f"worker.time_python_imports(TRAINING, Namespace(task={task!r}, device='cuda', ml_framework='torch', "
                "rl_library='rl_games', logger='tensorboard'))"
            )
        code = f"""
import os
try:
    {call}
except SystemExit:
    pass  # this machine has no GPU; the variables were set before CUDA was asked
print(os.environ["CUDA_VISIBLE_DEVICES"], os.environ["LOCAL_RANK"])
"""
        ranks = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
        env = {**os.environ, **ranks, "CUDA_VISIBLE_DEVICES": "3,5"}
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.strip() == expected


@requires_warp
class TestTraining:
    def test_skrl_trains(self, tmp_path):
        """skrl's iteration on one rank (rsl_rl's: test_two_gloo_ranks_stay_in_sync, on two)."""
        result = rlscale(
            "train", "--task", "Rlscale-Ant", "--rl_library", "skrl", "--num_envs", str(NUM_ENVS),
            "--max_iterations", "1", "--device", "cpu", "--log_root", str(tmp_path),
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        (manifest,) = [json.loads(path.read_text()) for path in tmp_path.rglob("manifest.json")]
        assert manifest["status"] == "completed" and manifest["iterations_completed"] == 1

    def test_rl_games_trains_past_its_first_iteration(self, tmp_path):
        """rl_games beyond its first epoch (the other tests stop there): three iterations, each one timed."""
        result = rlscale(
            "train", "--task", "Rlscale-Ant", "--rl_library", "rl_games", "--num_envs", str(NUM_ENVS),
            "--max_iterations", "3", "--device", "cpu", "--log_root", str(tmp_path),
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        (manifest,) = [json.loads(path.read_text()) for path in tmp_path.rglob("manifest.json")]
        assert manifest["status"] == "completed" and manifest["iterations_completed"] == 3
        assert [record["iteration"] for record in manifest["iterations"]] == [0, 1, 2]
        assert all(record["iteration_s"] > 0 for record in manifest["iterations"])

    def test_startup_benchmark_times_the_compile_apart(self, tmp_path):
        """rl_games' first iteration, with the task's kernels' loading as its own phase (from Warp's cache here)."""
        bundle_path = tmp_path / "startup.json"
        result = rlscale(
            "benchmark", "startup", "--task", "Rlscale-Ant", "--rl_library", "rl_games", "--num_envs", str(NUM_ENVS),
            "--device", "cpu", "--output_path", str(bundle_path), "--log_root", str(tmp_path / "runs"),
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        runtime = json.loads(bundle_path.read_text())["runtime"]
        phases = runtime["startup_time_s"]
        assert all(value is not None and value > 0 for value in phases.values()), phases
        assert runtime["total_wall_time_s"] == pytest.approx(sum(phases.values()))

    def test_two_gloo_ranks_stay_in_sync(self, tmp_path):
        """rsl_rl (the default library) trains it on two gloo ranks, which end with the same policy."""
        result = rlscale(
            "train_multigpu", "--task", "Rlscale-Ant", "--num_gpus", "2", "--device", "cpu",
            "--num_envs", str(NUM_ENVS), "--max_iterations", "2", "--log_root", str(tmp_path),
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        by_rank = {data["rank"]: data for data in (json.loads(p.read_text()) for p in tmp_path.rglob("manifest.json"))}
        assert sorted(by_rank) == [0, 1]
        assert by_rank[0]["status"] == by_rank[1]["status"] == "completed"
        assert by_rank[0]["iterations_completed"] == by_rank[1]["iterations_completed"] == 2
        digests = by_rank[0]["rank_param_digests"]
        assert len(digests) == 2 and len(set(digests)) == 1
