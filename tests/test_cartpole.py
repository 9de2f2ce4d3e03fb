"""Tests of the Cartpole physics, the two Isaac Lab Cartpole MDPs and their registration (CPU only)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from rlscale.tasks import UnknownTaskError, get_spec, list_tasks, make_task
from rlscale.tasks.cartpole.env import CartpoleCfg, CartpoleDirectCfg, DirectCartpole, ManagerCartpole
from rlscale.tasks.cartpole.physics import CartpoleParams, horizontal_momentum, rk4_step, simulate, total_energy

DT = 1.0 / 120.0
STEP_DT = 1.0 / 60.0
# Isaac Lab's reward weights, written out here independently of the config defaults.
W_ALIVE, W_TERM, W_POLE, W_CART_VEL, W_POLE_VEL = 1.0, -2.0, -1.0, -0.01, -0.005


def run(state: torch.Tensor, params: CartpoleParams, steps: int, force: float = 0.0) -> torch.Tensor:
    """Trajectory of ``steps`` RK4 steps at ``DT``, shape ``(steps + 1, N, 4)``."""
    out = [state]
    forces = torch.full((state.shape[0],), force, dtype=state.dtype)
    for _ in range(steps):
        out.append(rk4_step(out[-1], forces, DT, params))
    return torch.stack(out)


def wrap(angle: torch.Tensor) -> torch.Tensor:
    """Angle wrapped to (-pi, pi] via atan2, an implementation independent of the task's."""
    return torch.atan2(torch.sin(angle), torch.cos(angle))


def manager(**overrides) -> ManagerCartpole:
    return ManagerCartpole(CartpoleCfg(**{"num_envs": 8, **overrides}))


def direct(**overrides) -> DirectCartpole:
    return DirectCartpole(CartpoleDirectCfg(**{"num_envs": 8, **overrides}))


class TestEnergyConservation:
    def test_energy_conserved_without_damping(self):
        """Total energy (cart KE included) stays within 1e-3 relative over 1000 steps of large swings."""
        params = CartpoleParams(cart_damping=0.0)
        state = torch.tensor([[0.0, 1.0, 0.5, 0.0], [0.3, -2.0, -1.0, 3.0], [0.0, 3.0, 2.0, -4.0]])
        traj = run(state, params, 1000)
        energy = torch.stack([total_energy(s, params) for s in traj])
        rel = ((energy - energy[0]).abs() / energy[0]).max()
        assert rel < 1e-3
        # The motion is genuinely large: the pole sweeps through more than a radian and the cart moves.
        assert (traj[:, :, 1].amax(0) - traj[:, :, 1].amin(0)).min() > 1.0
        assert (traj[:, :, 2].amax(0) - traj[:, :, 2].amin(0)).min() > 0.1


class TestSmallOscillationPeriod:
    @pytest.mark.parametrize(("cart_mass", "pole_mass"), [(1.0, 0.1), (0.2, 1.0)])
    def test_period_about_hanging_equilibrium(self, cart_mass, pole_mass):
        """Small swings about theta = pi with a free cart have the linearised period 2 pi / omega.

        Linearising T - V about the hanging position (phi = theta - pi) gives (M+m) x'' - m l phi'' = 0 and
        -m l x'' + J phi'' = -m g l phi, so omega^2 = m g l (M+m) / (J (M+m) - m^2 l^2) = 3 g (M+m) / (l (4M+m)).
        """
        params = CartpoleParams(cart_mass=cart_mass, pole_mass=pole_mass, cart_damping=0.0)
        half = params.pole_length / 2
        omega = math.sqrt(3 * params.gravity * (cart_mass + pole_mass) / (half * (4 * cart_mass + pole_mass)))
        state = torch.tensor([[0.0, math.pi + 0.02, 0.0, 0.0]], dtype=torch.float64)
        phi = (run(state, params, 1000)[:, 0, 1] - math.pi).tolist()
        # Zero crossings, linearly interpolated between samples.
        crossings = [(i + phi[i] / (phi[i] - phi[i + 1])) * DT for i in range(len(phi) - 1) if phi[i] * phi[i + 1] < 0]
        assert len(crossings) >= 6
        period = 2 * (crossings[-1] - crossings[0]) / (len(crossings) - 1)
        assert period == pytest.approx(2 * math.pi / omega, rel=1e-2)


class TestDamping:
    @pytest.mark.parametrize("damping", [0.0, 10.0])
    def test_momentum_balance(self, damping):
        """d/dt of the x-momentum is -b x_dot, so p_x + b x is invariant while the pole swings (zero force)."""
        params = CartpoleParams(cart_damping=damping)
        state = torch.tensor([[0.0, 0.5, 2.0, 1.0], [1.0, 2.5, -1.0, -2.0]], dtype=torch.float64)
        traj = run(state, params, 240)
        invariant = torch.stack([horizontal_momentum(s, params) + damping * s[:, 0] for s in traj])
        torch.testing.assert_close(invariant, invariant[:1].expand_as(invariant), rtol=0, atol=1e-6)
        if damping:
            assert traj[-1, :, 2].abs().max() < 0.1 * traj[0, :, 2].abs().min()

    def test_cart_velocity_decays_exponentially(self):
        """With a negligible pole the cart velocity follows x_dot0 * exp(-b t / M)."""
        params = CartpoleParams(cart_mass=1.0, pole_mass=1e-9, cart_damping=10.0)
        state = torch.tensor([[0.0, 0.3, 2.0, 0.0]], dtype=torch.float64)
        traj = run(state, params, 60)
        t = torch.arange(61, dtype=torch.float64) * DT
        expected = 2.0 * torch.exp(-params.cart_damping * t / params.cart_mass)
        torch.testing.assert_close(traj[:, 0, 2], expected, rtol=1e-4, atol=1e-9)

    def test_energy_never_increases(self):
        """Damping dissipates: total energy is non-increasing at every step under zero force."""
        params = CartpoleParams()
        state = torch.tensor([[0.0, 1.0, 1.5, -2.0]], dtype=torch.float64)
        energy = torch.stack([total_energy(s, params) for s in run(state, params, 600)])[:, 0]
        assert (energy[1:] - energy[:-1]).max() <= 1e-12
        assert energy[-1] < 0.9 * energy[0]

    def test_effort_limit_clamps_force(self):
        """Forces beyond the 400 N limit act like 400 N; forces inside it are not clamped."""
        params = CartpoleParams()
        state = torch.tensor([[0.0, 0.2, 0.0, 0.0]]).expand(3, 4)
        out = simulate(state, torch.tensor([1000.0, 400.0, 300.0]), DT, 2, params)
        torch.testing.assert_close(out[0], out[1])
        assert not torch.allclose(out[1], out[2])


class TestResets:
    def test_only_done_envs_reset_manager(self):
        """Out-of-bounds envs restart from the reset ranges; the others advance exactly as the physics says."""
        env = manager()
        for _ in range(3):
            env.step(torch.zeros(8, 1))
        state = env.state.clone()
        state[[1, 5], 0] = torch.tensor([3.5, -3.5])
        state[[1, 5], 2] = torch.tensor([1.0, -1.0])
        env.state = state.clone()
        length_before = env.episode_length_buf.clone()
        actions = torch.linspace(-1, 1, 8).unsqueeze(1)
        obs, _, terminated, truncated, extras = env.step(actions)
        done = torch.zeros(8, dtype=torch.bool)
        done[[1, 5]] = True
        assert torch.equal(terminated, done) and not truncated.any() and torch.equal(extras["done"], done)
        expected = simulate(state, 100.0 * actions[:, 0], DT, 2, env.params)
        torch.testing.assert_close(obs["policy"][~done], expected[~done], rtol=0, atol=0)
        torch.testing.assert_close(env.episode_length_buf[~done], length_before[~done] + 1)
        assert (env.episode_length_buf[done] == 0).all()
        fresh = obs["policy"][done]
        assert (fresh[:, 0].abs() <= 1.0).all() and (fresh[:, 2].abs() <= 0.5).all()
        assert (fresh[:, 1].abs() <= math.pi / 4).all() and (fresh[:, 3].abs() <= math.pi / 4).all()

    def test_only_done_envs_reset_direct(self):
        """A fallen pole resets that env to the direct reset distribution: cart at 0, zero velocities."""
        env = direct()
        state = env.state.clone()
        state[2, 1] = 2.0
        env.state = state.clone()
        obs, _, terminated, _, _ = env.step(torch.zeros(8, 1))
        assert terminated.tolist() == [i == 2 for i in range(8)]
        pole_pos, pole_vel, cart_pos, cart_vel = obs["policy"][2]
        assert abs(pole_pos) <= math.pi / 4 and pole_vel == 0 and cart_pos == 0 and cart_vel == 0
        expected = simulate(state, torch.zeros(8), DT, 2, env.params)
        keep = [i for i in range(8) if i != 2]
        torch.testing.assert_close(obs["policy"][keep], expected[keep][:, [1, 3, 0, 2]], rtol=0, atol=0)

    def test_reset_restarts_everything(self):
        """reset() zeroes every episode counter and redraws states in the reset ranges."""
        env = manager(num_envs=64)
        for _ in range(5):
            env.step(torch.ones(64, 1))
        obs, extras = env.reset()
        assert (env.episode_length_buf == 0).all() and extras == {"log": {}}
        assert (obs["policy"][:, 0].abs() <= 1.0).all() and (obs["policy"][:, 2].abs() <= 0.5).all()
        _, reward, _, _, extras = env.step(torch.zeros(64, 1))
        torch.testing.assert_close(extras["episode_return"], reward)
        assert (extras["episode_length"] == 1).all()


def rollout(env, steps: int, action_seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(action_seed)
    out = []
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(torch.randn(env.num_envs, 1, generator=gen) * 2.0)
        out += [obs["policy"], reward, terminated, truncated]
    return out


class TestDeterminism:
    @pytest.mark.parametrize("cls", [ManagerCartpole, DirectCartpole])
    def test_same_seed_same_trajectory(self, cls):
        """Two instances with one seed produce identical observations, rewards and dones over 200 steps."""
        cfg = CartpoleCfg if cls is ManagerCartpole else CartpoleDirectCfg
        a = rollout(cls(cfg(num_envs=32, seed=7)), 200, action_seed=1)
        torch.manual_seed(123)  # the global RNG must not matter
        torch.rand(10)
        b = rollout(cls(cfg(num_envs=32, seed=7)), 200, action_seed=1)
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
        assert sum(int(t.sum()) for t in a[2::4]) > 0  # resets happened, so their randomness was exercised

    def test_different_seeds_differ(self):
        """Different seeds give different initial states and trajectories."""
        a = rollout(manager(num_envs=32, seed=1), 50, action_seed=1)
        b = rollout(manager(num_envs=32, seed=2), 50, action_seed=1)
        assert not torch.equal(a[0], b[0]) and not torch.equal(a[-4], b[-4])


class TestTerminationSemantics:
    def test_manager_times_out_after_300_steps(self):
        """Isaac-Cartpole truncates exactly at step 300 (episode_length_buf >= max_episode_length)."""
        env = manager(num_envs=16)
        assert env.max_episode_length == round(5.0 / STEP_DT)
        for step in range(1, 301):
            _, _, terminated, truncated, _ = env.step(torch.zeros(16, 1))
            assert not terminated.any()
            assert truncated.all() if step == 300 else not truncated.any()
        assert (env.episode_length_buf == 0).all()

    def test_direct_times_out_after_299_steps(self):
        """Isaac-Cartpole-Direct truncates at step 299 (>= max_episode_length - 1); an upright pole never falls."""
        env = direct(num_envs=4, pole_pos_range=(0.0, 0.0))
        for step in range(1, 300):
            _, _, terminated, truncated, _ = env.step(torch.zeros(4, 1))
            assert not terminated.any()
            assert truncated.all() if step == 299 else not truncated.any()

    @pytest.mark.parametrize("make", [manager, direct])
    def test_terminated_is_never_a_time_out(self, make):
        """At the time-out step an out-of-bounds env is terminated only; a written episode_length_buf is honoured."""
        env = make()
        env.episode_length_buf[:] = env.max_episode_length - 1 - env.time_out_offset
        state = env.state.clone()
        state[:3, 0] = 3.5
        env.state = state
        _, _, terminated, truncated, extras = env.step(torch.zeros(8, 1))
        assert terminated[:3].all() and not truncated[:3].any()
        assert truncated[3:].all() and not terminated[3:].any()
        assert not (terminated & truncated).any()
        log = extras["log"]
        assert log["Episode_Termination/time_out"] == 5 and log["Episode_Termination/cart_out_of_bounds"] == 3
        assert (extras["episode_length"] == 1).all()  # steps actually taken, not the written counter


class TestRewards:
    def test_manager_reward_by_hand(self):
        """Manager reward = step_dt * (alive - 2 terminated - wrap(theta)^2 - 0.01|x_dot| - 0.005|theta_dot|)."""
        env = manager(num_envs=4)
        state = torch.tensor(
            [[0.5, 2 * math.pi - 0.3, 0.4, -1.0], [-1.0, 0.7, -2.0, 3.0], [3.5, 0.1, 1.0, 0.0], [0.0, -4.0, 0.0, 2.0]]
        )
        env.state = state.clone()
        actions = torch.tensor([[0.5], [-1.0], [0.0], [2.0]])
        _, reward, terminated, _, _ = env.step(actions)
        post = simulate(state, 100.0 * actions[:, 0], DT, 2, env.params)
        term = (post[:, 0].abs() > 3.0).float()
        expected = STEP_DT * (
            W_ALIVE * (1 - term)
            + W_TERM * term
            + W_POLE * wrap(post[:, 1]) ** 2
            + W_CART_VEL * post[:, 2].abs()
            + W_POLE_VEL * post[:, 3].abs()
        )
        assert terminated.tolist() == [False, False, True, False]
        torch.testing.assert_close(reward, expected)

    def test_direct_reward_by_hand(self):
        """Direct reward = (1 - terminated) - 2 terminated - theta^2 - 0.01|x_dot| - 0.005|theta_dot|, raw theta."""
        env = direct(num_envs=3)
        state = torch.tensor([[0.5, 0.3, 0.4, -1.0], [-1.0, 1.8, -2.0, 3.0], [-3.2, -0.2, -1.0, 0.5]])
        env.state = state.clone()
        _, reward, terminated, _, _ = env.step(torch.zeros(3, 1))
        post = simulate(state, torch.zeros(3), DT, 2, env.params)
        term = ((post[:, 0].abs() > 3.0) | (post[:, 1].abs() > math.pi / 2)).float()
        expected = (
            W_ALIVE * (1 - term)
            + W_TERM * term
            + W_POLE * post[:, 1] ** 2
            + W_CART_VEL * post[:, 2].abs()
            + W_POLE_VEL * post[:, 3].abs()
        )
        assert terminated.tolist() == [False, True, True]
        torch.testing.assert_close(reward, expected)

    def test_only_manager_reward_is_dt_scaled(self):
        """From one state, the manager reward is step_dt times the direct one; observations are reordered."""
        state = torch.tensor([[0.5, 0.3, 0.4, -1.0], [-1.0, -0.7, -2.0, 3.0]])
        envs = [manager(num_envs=2), direct(num_envs=2)]
        results = []
        for env in envs:
            env.state = state.clone()
            results.append(env.step(torch.tensor([[0.3], [-0.3]])))
        torch.testing.assert_close(results[0][1], STEP_DT * results[1][1])
        torch.testing.assert_close(results[1][0]["policy"], results[0][0]["policy"][:, [1, 3, 0, 2]])


class TestEpisodeStatistics:
    def test_finished_episode_statistics(self):
        """Returns, lengths and Episode_* logs of finished episodes match the rewards the caller observed."""
        env = manager(num_envs=16)
        total = torch.zeros(16)
        for step in range(1, 301):
            _, reward, _, _, extras = env.step(torch.zeros(16, 1))
            total += reward
            if step == 150:  # nothing ended yet: logs are present and zero
                assert all(v == 0 for v in extras["log"].values())
        assert extras["done"].all()
        torch.testing.assert_close(extras["episode_return"], total)
        assert (extras["episode_length"] == 300).all()
        log = extras["log"]
        torch.testing.assert_close(log["Episode_Reward/alive"], torch.tensor(300 * STEP_DT * W_ALIVE / 5.0))
        reward_logs = sum(v for k, v in log.items() if k.startswith("Episode_Reward/"))
        torch.testing.assert_close(reward_logs * 5.0, total.mean())
        assert log["Episode_Termination/time_out"] == 16 and log["Episode_Termination/cart_out_of_bounds"] == 0
        # A step where nothing ends repeats the last values (Isaac Lab's persistent extras["log"]).
        _, reward, _, _, extras = env.step(torch.zeros(16, 1))
        assert not extras["done"].any()
        torch.testing.assert_close(extras["episode_return"], reward)  # the new episodes start from zero
        assert all(torch.equal(extras["log"][k], v) for k, v in log.items())

    def test_episode_length_counts_steps_taken(self):
        """A trainer-randomised episode_length_buf shortens the episode; episode_length reports the real count."""
        env = manager(num_envs=4)
        env.episode_length_buf[:] = 250
        for _ in range(50):
            _, _, _, truncated, extras = env.step(torch.zeros(4, 1))
        assert truncated.all() and (extras["episode_length"] == 50).all()
        env.episode_length_buf[:] = 290  # the next episode counts from zero again
        for _ in range(10):
            _, _, _, truncated, extras = env.step(torch.zeros(4, 1))
        assert truncated.all() and (extras["episode_length"] == 10).all()


class CountOps(TorchDispatchMode):
    """Records the name of every aten op dispatched."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


class TestNoHostSync:
    @pytest.mark.parametrize("make", [manager, direct])
    def test_step_has_no_sync_ops(self, make):
        """step() issues no op that reads device data back to the host (item, nonzero, bool of a tensor)."""
        env = make(num_envs=64)
        with CountOps() as counter:
            env.step(torch.ones(64, 1))
        syncing = {"aten._local_scalar_dense.default", "aten.nonzero.default", "aten.is_nonzero.default"}
        assert not syncing & set(counter.ops)
        assert len(counter.ops) < 400  # kernel-launch budget; the physics alone is ~150


class TestRegistry:
    def test_both_tasks_listed(self):
        """Both Cartpole ids are registered with their classes and the MDP constants."""
        assert {"Isaac-Cartpole", "Isaac-Cartpole-Direct"} <= set(list_tasks())
        assert get_spec("Isaac-Cartpole").task_class is ManagerCartpole
        env = make_task("Isaac-Cartpole-Direct", num_envs=5, seed=3)
        assert isinstance(env, DirectCartpole) and env.cfg.seed == 3
        obs = env.get_observations()["policy"]
        assert obs.shape == (5, env.observation_dims["policy"]) and env.num_actions == 1
        assert env.step_dt == pytest.approx(STEP_DT) and env.max_episode_length == 300
        assert not env.is_finite_horizon
        for task_id in ("Isaac-Cartpole", "Isaac-Cartpole-Direct"):
            assert set(get_spec(task_id).agent_cfg_files) == {"rsl_rl", "rl_games", "skrl"}

    def test_ids_are_case_sensitive_and_errors_list_known_ids(self):
        """A wrongly cased id is unknown, and the error names the registered ids."""
        with pytest.raises(UnknownTaskError) as info:
            get_spec("isaac-cartpole")
        assert "Isaac-Cartpole" in str(info.value) and "Isaac-Cartpole-Direct" in str(info.value)

    def test_tasks_import_no_rl_library(self):
        """Importing and stepping the tasks loads none of the RL libraries."""
        code = (
            "import sys, torch; from rlscale.tasks import make_task; "
            "make_task('Isaac-Cartpole', num_envs=2).step(torch.zeros(2, 1)); "
            "print(sorted(m for m in ('rsl_rl', 'rl_games', 'skrl', 'gymnasium', 'gym') if m in sys.modules))"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
        assert out.stdout.strip() == "[]"
