"""The MJX backend: one jitted JAX function steps, scores and auto-resets every env; torch sees it through DLPack.

A subclass gives the MJCF and the MDP as pure per-env JAX functions (:meth:`MjxVecTask._observe` and friends); this
class vmaps them over the envs and owns the rest: the model on the rank's JAX device, the decimation loop
(``lax.fori_loop`` over ``mjx.step``, so compile time does not grow with it), episode bookkeeping and masked resets
in the same function, with the PRNG key carried in the state and seeded from ``cfg.seed``. A task whose MDP needs
per-env state beyond the physics (a velocity command, feet air time, timers) keeps it in a pytree of its own
(:meth:`MjxVecTask._init_task_state`), which the step carries and resets with the rest.

Torch and JAX share memory: outputs reach torch with ``torch.from_dlpack`` and actions reach JAX with
``jnp.from_dlpack``, no copy when both sit on one device. JAX arrays are immutable, so every step returns fresh
buffers; the torch views stay valid after later steps.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # before JAX initialises: torch shares the GPU

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from mujoco import mjx  # noqa: E402

from rlscale.tasks.base import Observations, VecTask  # noqa: E402
from rlscale.tasks.physics import MujocoTaskCfg  # noqa: E402

TaskState = dict[str, jax.Array]
"""A task's own per-env state (:meth:`MjxVecTask._init_task_state`): arrays the step carries and resets."""

_COMPILED: dict[tuple, tuple] = {}
"""(task class, cfg without seed, JAX device) → (compiled step, compiled reset): compile once per process."""


def jax_device_for(device: torch.device) -> jax.Device:
    """The JAX device that holds the same memory as a torch device (for CUDA, the same local index).

    Every array the task makes is placed on that device. JAX would still open a context on each GPU the process sees,
    so a rank of a multi-GPU job sees only its own (every task's default, :func:`rlscale.dist.isolate_own_gpu`): JAX
    0.11's own ``jax_cuda_visible_devices`` narrowed to a GPU other than the first fails every computation
    (``Device id 1 is out of range [0, 1)``, docs/tasks.md).
    """
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return jax.devices("cuda")[index]
    if device.type == "cpu":
        return jax.devices("cpu")[0]
    raise ValueError(f"MJX tasks run on cpu or cuda devices, not {device}")


def use_compile_cache(cache_dir: str | None) -> None:
    """Point JAX's persistent compilation cache at ``cache_dir`` (None keeps JAX's own, ``JAX_COMPILATION_CACHE_DIR``)
    and, with a cache, keep every executable there: JAX keeps only those that took over a second to compile, and a
    study's later processes should load the quick ones (the reset, a small step) too."""
    if cache_dir is not None:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
    if jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def quat_rotate_inverse(quat: jax.Array, vec: jax.Array) -> jax.Array:
    """Rotate a world-frame vector into the body frame of a unit quaternion ``(w, x, y, z)``."""
    w, xyz = quat[0], quat[1:]
    return vec * (2.0 * w * w - 1.0) - 2.0 * w * jnp.cross(xyz, vec) + 2.0 * xyz * jnp.dot(xyz, vec)


class MjxVecTask(VecTask):
    """A batch of MJX worlds as a :class:`VecTask`; see the module docstring.

    Subclasses set :attr:`mjcf`, :attr:`reward_terms`, :attr:`termination_terms`, :attr:`observation_dims` and
    implement the per-env hooks. ``extras`` follow :class:`rlscale.tasks.cartpole.env.CartpoleBase`: ``"log"``
    holds ``Episode_Reward/<term>`` (episodic sum / ``episode_length_s``, mean over the envs that ended),
    ``Episode_Termination/<term>`` (counts, ``time_out`` for truncations only) and ``Metrics/<name>`` for each of
    :attr:`metric_terms` (mean over the envs that ended), repeating the last values on steps where no episode
    ended; ``"episode_return"``, ``"episode_length"`` (long) and ``"done"``.

    ``compile_s`` counts the step and reset functions' compilation (0 when an earlier task of the same config in this
    process had compiled them; loading them from JAX's persistent cache counts).
    """

    mjcf: str
    reward_terms: tuple[str, ...]
    termination_terms: tuple[str, ...]
    metric_terms: tuple[str, ...] = ()
    graph_capturable = False  # JAX runs its own executables: nothing for a torch CUDA graph to capture

    def __init__(self, cfg: MujocoTaskCfg):
        self.cfg = cfg
        self.num_envs = cfg.num_envs
        self.device = torch.device(cfg.device)
        self.jax_device = jax_device_for(self.device)
        self.step_dt = cfg.sim_dt * cfg.decimation
        self.max_episode_length = math.ceil(cfg.episode_length_s / self.step_dt)
        self.is_finite_horizon = False
        use_compile_cache(cfg.jax_cache_dir)

        self.mj_model = mujoco.MjModel.from_xml_string(self.mjcf)
        cfg.apply_solver_options(self.mj_model)
        self.num_actions = self.mj_model.nu
        self._read_model()
        self.model = mjx.put_model(self.mj_model, device=self.jax_device)
        self._data0 = mjx.make_data(self.mj_model, device=self.jax_device)
        # numpy, like every constant the jitted functions close over: a JAX array would land on JAX's default GPU 0
        self._reward_weights = np.asarray(self.reward_weights(), np.float32) * np.float32(self.step_dt)
        self._log_keys = (
            [f"Episode_Reward/{t}" for t in self.reward_terms]
            + [f"Episode_Termination/{t}" for t in ("time_out", *self.termination_terms)]
            + [f"Metrics/{t}" for t in self.metric_terms]
        )

        with jax.default_device(self.jax_device):  # made on the rank's GPU, then committed to it
            key = jax.device_put(jax.random.PRNGKey(cfg.seed), self.jax_device)
            actions = jax.device_put(jnp.zeros((self.num_envs, self.num_actions), jnp.float32), self.jax_device)
        cache_key = (type(self).__qualname__, repr(dataclasses.replace(cfg, seed=0)), str(self.jax_device))
        started = time.perf_counter()
        if cache_key not in _COMPILED:
            reset = jax.jit(self._reset_all).lower(key).compile()
            _COMPILED[cache_key] = (jax.jit(self._step).lower(reset(key)[0], actions).compile(), reset)
        self._step_fn, self._reset_fn = _COMPILED[cache_key]
        self.compile_s = time.perf_counter() - started
        self._state = None
        self._key = key
        self.reset()

    # --- MDP hooks: pure JAX on one env (vmapped by this class) ------------------------------------------------

    def _read_model(self) -> None:  # noqa: B027  an optional hook: most tasks need nothing from the model
        """Take what the MDP needs from ``self.mj_model`` (indices, default pose), before the step is compiled."""

    def reward_weights(self) -> tuple[float, ...]:
        """Weight of each term in :attr:`reward_terms` order (multiplied by ``step_dt``, as Isaac Lab's manager)."""
        raise NotImplementedError

    def _sample_reset(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """A fresh ``(qpos, qvel)``."""
        raise NotImplementedError

    def _init_task_state(self, key: jax.Array, data: mjx.Data) -> TaskState:
        """The task's own per-env state at the start of an episode in ``data`` (none by default)."""
        return {}

    def _control(self, action: jax.Array) -> jax.Array:
        """Actuator controls ``(nu,)`` for an action."""
        raise NotImplementedError

    def _after_physics(self, data: mjx.Data, task_state: TaskState, action: jax.Array) -> TaskState:
        """The task state after the physics steps of a control step, before terminations and rewards read it."""
        return task_state

    def _before_observe(self, data: mjx.Data, task_state: TaskState, key: jax.Array) -> tuple[mjx.Data, TaskState]:
        """After the resets, before the observation: commands and interval events (Isaac Lab's command and event
        managers run here); returns the possibly changed ``(data, task_state)``."""
        return data, task_state

    def _observe(self, data: mjx.Data, task_state: TaskState, last_action: jax.Array, key: jax.Array) -> jax.Array:
        """Policy observation ``(observation_dims["policy"],)``; ``key`` is for observation noise."""
        raise NotImplementedError

    def _termination_flags(self, data: mjx.Data, task_state: TaskState) -> jax.Array:
        """Bool ``(len(termination_terms),)``."""
        raise NotImplementedError

    def _reward_values(
        self, data: mjx.Data, task_state: TaskState, action: jax.Array, last_action: jax.Array, terminated: jax.Array
    ) -> jax.Array:
        """Unweighted terms ``(len(reward_terms),)``."""
        raise NotImplementedError

    def _episode_metrics(self, data: mjx.Data, task_state: TaskState, episode_steps: jax.Array) -> jax.Array:
        """Values ``(len(metric_terms),)`` of an episode ending in ``data`` after ``episode_steps`` control steps
        (``jnp.zeros(0)`` for a task without metrics)."""
        raise NotImplementedError

    # --- the jitted functions (batched) ------------------------------------------------------------------------

    def _env_keys(self, key: jax.Array) -> jax.Array:
        return jax.random.split(key, self.num_envs)

    def _fresh_start(self, key: jax.Array) -> tuple[mjx.Data, TaskState]:
        physics_key, task_key = jax.random.split(key)
        qpos, qvel = jax.vmap(self._sample_reset)(self._env_keys(physics_key))
        # Only qpos and qvel are fresh: derived quantities (positions, contacts) are the next physics step's
        data = jax.vmap(lambda q, v: self._data0.replace(qpos=q, qvel=v))(qpos, qvel)
        return data, jax.vmap(self._init_task_state)(self._env_keys(task_key), data)

    def _prepare_observation(self, state: dict, key: jax.Array) -> tuple[dict, jax.Array]:
        events_key, noise_key = jax.random.split(key)
        data, task_state = jax.vmap(self._before_observe)(state["data"], state["task"], self._env_keys(events_key))
        state = {**state, "data": data, "task": task_state}
        observe = jax.vmap(self._observe)
        return state, observe(data, task_state, state["last_action"], self._env_keys(noise_key))

    def _reset_all(self, key: jax.Array) -> tuple[dict, jax.Array]:
        key, start_key, observe_key = jax.random.split(key, 3)
        n = self.num_envs
        data, task_state = self._fresh_start(start_key)
        state = {
            "data": data,
            "task": task_state,
            "last_action": jnp.zeros((n, self.num_actions), jnp.float32),
            "episode_length": jnp.zeros(n, jnp.int32),
            "ep_steps": jnp.zeros(n, jnp.int32),
            "ep_sums": jnp.zeros((n, len(self.reward_terms)), jnp.float32),
            "log": jnp.zeros(len(self._log_keys), jnp.float32),
            "key": key,
        }
        return self._prepare_observation(state, observe_key)

    def _step(self, state: dict, actions: jax.Array) -> tuple[dict, tuple]:
        data = state["data"].replace(ctrl=jax.vmap(self._control)(actions))
        step_all = jax.vmap(mjx.step, in_axes=(None, 0))
        data = jax.lax.fori_loop(0, self.cfg.decimation, lambda _, d: step_all(self.model, d), data)
        task_state = jax.vmap(self._after_physics)(data, state["task"], actions)
        episode_length = state["episode_length"] + 1
        ep_steps = state["ep_steps"] + 1

        term_flags = jax.vmap(self._termination_flags)(data, task_state)
        terminated = term_flags.any(axis=1)
        time_out = episode_length >= self.max_episode_length
        truncated = time_out & ~terminated
        done = terminated | time_out

        reward_values = jax.vmap(self._reward_values)(data, task_state, actions, state["last_action"], terminated)
        terms = reward_values * self._reward_weights
        reward = terms.sum(axis=1)
        ep_sums = state["ep_sums"] + terms
        done_f = done.astype(jnp.float32)
        num_done = done_f.sum()
        reward_means = (ep_sums * done_f[:, None]).sum(axis=0) / (
            jnp.maximum(num_done, 1.0) * self.cfg.episode_length_s
        )
        term_counts = jnp.concatenate((truncated[:, None], term_flags), axis=1).sum(axis=0).astype(jnp.float32)
        metrics = jax.vmap(self._episode_metrics)(data, task_state, ep_steps)
        metric_means = (metrics * done_f[:, None]).sum(axis=0) / jnp.maximum(num_done, 1.0)
        log = jnp.where(num_done > 0, jnp.concatenate((reward_means, term_counts, metric_means)), state["log"])

        key, start_key, observe_key = jax.random.split(state["key"], 3)
        fresh_data, fresh_task_state = self._fresh_start(start_key)

        def where_done(new: jax.Array, old: jax.Array) -> jax.Array:
            return jnp.where(done.reshape((-1,) + (1,) * (old.ndim - 1)), new, old)

        new_state = {
            "data": jax.tree_util.tree_map(where_done, fresh_data, data),
            "task": jax.tree_util.tree_map(where_done, fresh_task_state, task_state),
            "last_action": jnp.where(done[:, None], 0.0, actions),
            "episode_length": jnp.where(done, 0, episode_length),
            "ep_steps": jnp.where(done, 0, ep_steps),
            "ep_sums": jnp.where(done[:, None], 0.0, ep_sums),
            "log": log,
            "key": key,
        }
        new_state, observations = self._prepare_observation(new_state, observe_key)
        return new_state, (observations, reward, terminated, truncated, done, ep_sums.sum(axis=1), ep_steps, log)

    # --- VecTask interface -------------------------------------------------------------------------------------

    def _to_jax(self, tensor: torch.Tensor, dtype: torch.dtype) -> jax.Array:
        """A torch tensor as a JAX array on the task's device: the same memory when it already lies there."""
        # DLPack names a device only by kind and index; ``device`` keeps a CPU tensor off JAX's CPU device 0 when
        # the task runs on another one (the test stand-in for a second GPU).
        return jnp.from_dlpack(tensor.detach().to(self.device, dtype).contiguous(), device=self.jax_device)

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """A long copy of the JAX counter; assign a tensor to change it (rsl_rl's ``init_at_random_ep_len``)."""
        return torch.from_dlpack(self._state["episode_length"]).long()

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        lengths = self._to_jax(value, torch.int32)
        self._state = {**self._state, "episode_length": jnp.array(lengths, copy=True)}  # not aliasing torch's

    def reset(self) -> tuple[Observations, dict]:
        """Reset every env (fresh states, zeroed counters and statistics); the PRNG key carries on."""
        self._state, observations = self._reset_fn(self._key)
        self._key = self._state["key"]
        self._observations = torch.from_dlpack(observations)
        return self.get_observations(), {"log": {}}

    def step(self, actions: torch.Tensor) -> tuple[Observations, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """One control step of every env, with the finished ones reset; see :class:`MjxVecTask` for ``extras``."""
        actions = self._to_jax(actions, torch.float32)
        self._state, outputs = self._step_fn(self._state, actions)
        self._key = self._state["key"]
        observations, reward, terminated, truncated, done, episode_return, episode_length, log = (
            torch.from_dlpack(output) for output in outputs
        )
        self._observations = observations
        extras = {
            "log": dict(zip(self._log_keys, log.unbind(), strict=True)),
            "episode_return": episode_return,
            "episode_length": episode_length.long(),
            "done": done,
        }
        return self.get_observations(), reward, terminated, truncated, extras

    def get_observations(self) -> Observations:
        """Observation group ``policy``: a read-only view of JAX's buffer (every step makes a new one)."""
        return {"policy": self._observations}

    @property
    def qpos(self) -> torch.Tensor:
        """Generalised positions ``(num_envs, nq)``, a view of JAX's buffer."""
        return torch.from_dlpack(self._state["data"].qpos)

    def write_state(self, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Overwrite the simulated state of every env (for tests and scripted starts); counters are kept."""
        data = self._state["data"].replace(
            qpos=jnp.array(self._to_jax(qpos, torch.float32), copy=True),
            qvel=jnp.array(self._to_jax(qvel, torch.float32), copy=True),
        )
        self._state = {**self._state, "data": data}
