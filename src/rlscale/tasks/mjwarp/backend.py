"""The MuJoCo Warp backend: MuJoCo Warp steps the worlds, torch scores and resets them, on one device and stream.

A subclass gives the MJCF and the MDP as batched torch functions over all worlds (:meth:`WarpVecTask._observe` and
friends); this class owns the rest: the model on the rank's device, the decimation loop (``mujoco_warp.step``),
episode bookkeeping and masked resets. The physics state is read and written through zero-copy torch views of
MuJoCo Warp's arrays (:class:`Physics`), and every Warp launch goes to torch's current stream, so a step needs no
synchronisation and on CUDA it is captured whole as one graph (:mod:`rlscale.tasks.graph`): the substeps, the MDP and
the resets. Random numbers come from the task's own ``torch.Generator``.

MuJoCo Warp's buffers are fixed per world (:mod:`rlscale.tasks.mjwarp.capacity`). Its overflow flags are gathered on
the device at every step and read by :meth:`WarpVecTask.check_physics`, once per training iteration: an overflow
stops the run with one line naming the setting to raise. The share of worlds at the solver's iteration cap (no error:
MJX stops there too) is logged as ``Physics/solver_iteration_cap``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import mujoco
import torch
import warp as wp

wp.config.log_level = wp.LOG_WARNING  # before Warp initialises (importing MuJoCo Warp does): no banner or module lines

import mujoco_warp as mjw  # noqa: E402

from rlscale.tasks.base import Observations, VecTask  # noqa: E402
from rlscale.tasks.mjwarp.capacity import model_capacity  # noqa: E402
from rlscale.tasks.mjwarp.kernels import announce_kernels, cache_entries  # noqa: E402
from rlscale.tasks.physics import MujocoTaskCfg, PhysicsCapacityError  # noqa: E402

TaskState = dict[str, torch.Tensor]
"""A task's own per-env state (:meth:`WarpVecTask._init_task_state`): tensors with the envs as first dimension."""

CAPACITY_OVERFLOWS = {
    mjw.OverflowType.NEFC: "constraints_per_world",
    mjw.OverflowType.NJMAX_NNZ: "constraints_per_world",
    mjw.OverflowType.BROADPHASE: "contacts_per_world",
    mjw.OverflowType.NARROWPHASE: "contacts_per_world",
    mjw.OverflowType.CCD: "contacts_per_world",
}
"""MuJoCo Warp's overflow bits that mean a buffer was too small → the task setting that sizes it."""
CAP_LOG_KEY = "Physics/solver_iteration_cap"


@dataclass(frozen=True)
class Physics:
    """The simulated state of every world, as MJX's ``Data`` names it, batched: envs first (zero-copy views)."""

    qpos: torch.Tensor
    qvel: torch.Tensor
    qacc: torch.Tensor
    ctrl: torch.Tensor
    actuator_force: torch.Tensor
    qfrc_actuator: torch.Tensor
    xpos: torch.Tensor
    """Body positions ``(envs, nbody, 3)``."""
    geom_xpos: torch.Tensor
    geom_xmat: torch.Tensor
    """Geom rotations ``(envs, ngeom, 3, 3)``, columns the geom's axes."""
    cvel: torch.Tensor
    """Com-based body velocities ``(envs, nbody, 6)``: angular, then linear."""
    subtree_com: torch.Tensor

    @classmethod
    def of(cls, data: mjw.Data) -> Physics:
        return cls(**{name: wp.to_torch(getattr(data, name)) for name in cls.__dataclass_fields__})


def warp_device_for(device: torch.device) -> str:
    """The Warp device holding the same memory as a torch device (a rank sees its own GPU as ``cuda:0``)."""
    if device.type == "cuda":
        return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
    if device.type == "cpu":
        return "cpu"
    raise ValueError(f"MuJoCo Warp tasks run on cpu or cuda devices, not {device}")


class WarpVecTask(VecTask):
    """A batch of MuJoCo Warp worlds as a :class:`VecTask`; see the module docstring.

    Subclasses set :attr:`mjcf`, :attr:`reward_terms`, :attr:`termination_terms`, :attr:`observation_dims` and
    implement the batched hooks. ``extras`` are those of :class:`rlscale.tasks.mjx.backend.MjxVecTask`, plus
    :data:`CAP_LOG_KEY` in ``"log"``.

    ``compile_s`` counts loading the physics kernels (compiling them when Warp's kernel cache lacks them), and
    ``compiled_kernels`` how many of Warp's modules were compiled then.
    """

    mjcf: str
    reward_terms: tuple[str, ...]
    termination_terms: tuple[str, ...]
    metric_terms: tuple[str, ...] = ()

    def __init__(self, cfg: MujocoTaskCfg):
        self.cfg = cfg
        self.num_envs = cfg.num_envs
        self.device = torch.device(cfg.device)
        self.graph_capturable = self.device.type == "cuda"
        self.bitwise_repeatable = self.device.type != "cuda"  # Warp's contacts and constraints sum by atomics there
        self.step_dt = cfg.sim_dt * cfg.decimation
        self.max_episode_length = math.ceil(cfg.episode_length_s / self.step_dt)
        self.is_finite_horizon = False
        self.generator = torch.Generator(self.device).manual_seed(cfg.seed)

        self.mj_model = mujoco.MjModel.from_xml_string(self.mjcf)
        cfg.apply_solver_options(self.mj_model)
        self.num_actions = self.mj_model.nu
        self._read_model()
        derived = model_capacity(self.mj_model)
        self.contacts_per_world = cfg.contacts_per_world or derived.contacts
        self.constraints_per_world = cfg.constraints_per_world or derived.constraints

        self._warp_device = warp_device_for(self.device)
        wp.init()
        with wp.ScopedDevice(self._warp_device):
            self.model = mjw.put_model(self.mj_model)
            self.model.opt.warn_overflow = 0  # a printf per world and step: gathered by check_physics instead
            self.data = mjw.put_data(
                self.mj_model,
                mujoco.MjData(self.mj_model),
                nworld=self.num_envs,
                nconmax=self.contacts_per_world,
                njmax=self.constraints_per_world,
            )
        wp.synchronize_device(self._warp_device)  # the model and data copies, before torch reads the views
        self.physics = Physics.of(self.data)
        self._overflow = wp.to_torch(self.data.overflow)
        self._reset_mask = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self._reset_mask_wp = wp.from_torch(self._reset_mask, dtype=wp.bool)
        self._capacity_bits = torch.tensor([int(bit) for bit in CAPACITY_OVERFLOWS], device=self.device)
        self._overflowed = torch.zeros(len(CAPACITY_OVERFLOWS), dtype=torch.bool, device=self.device)
        self._warp_streams: dict[int, wp.Stream] = {}
        self._captures: list = []  # Warp's records of the graph captures the task's launches joined (kept alive)
        self._cpu_graph: wp.Graph | None = None

        started = announce_kernels(type(self).__name__, self._warp_device)
        cached = cache_entries()
        with self._on_torch_stream():  # the first launches load (or compile) every kernel a step uses
            mjw.step(self.model, self.data)
            mjw.reset_data(self.model, self.data, reset=self._reset_mask_wp)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.compile_s = time.perf_counter() - started
        self.compiled_kernels = len(cache_entries() - cached)

        self._reward_weights = torch.tensor(self.reward_weights(), device=self.device) * self.step_dt
        self._log_keys = (
            [f"Episode_Reward/{t}" for t in self.reward_terms]
            + [f"Episode_Termination/{t}" for t in ("time_out", *self.termination_terms)]
            + [f"Metrics/{t}" for t in self.metric_terms]
        )
        n = self.num_envs
        self._last_action = torch.zeros(n, self.num_actions, device=self.device)
        self._episode_length = torch.zeros(n, dtype=torch.long, device=self.device)
        self._ep_steps = torch.zeros(n, dtype=torch.long, device=self.device)
        self._ep_sums = torch.zeros(n, len(self.reward_terms), device=self.device)
        self._log = torch.zeros(len(self._log_keys) + 1, device=self.device)
        self.task_state: TaskState = {}
        self._observations = torch.zeros(n, self.observation_dims["policy"], device=self.device)
        self.reset()

    # --- MDP hooks: batched torch over every env (all in place or fresh tensors; no host sync) -------------------

    def _read_model(self) -> None:  # noqa: B027  an optional hook: most tasks need nothing from the model
        """Take what the MDP needs from ``self.mj_model`` (indices, default pose)."""

    def reward_weights(self) -> tuple[float, ...]:
        """Weight of each term in :attr:`reward_terms` order (multiplied by ``step_dt``, as Isaac Lab's manager)."""
        raise NotImplementedError

    def _sample_reset(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Fresh ``(qpos, qvel)`` for ``n`` envs."""
        raise NotImplementedError

    def _init_task_state(self, n: int, physics: Physics) -> TaskState:
        """The task's own state for ``n`` envs starting an episode (none by default)."""
        return {}

    def _control(self, action: torch.Tensor) -> torch.Tensor:
        """Actuator controls ``(envs, nu)`` for actions."""
        raise NotImplementedError

    def _after_physics(self, physics: Physics, task_state: TaskState, action: torch.Tensor) -> TaskState:
        """The task state after the physics steps of a control step, before terminations and rewards read it."""
        return task_state

    def _before_observe(self, physics: Physics, task_state: TaskState) -> TaskState:
        """After the resets, before the observation: commands and interval events; may write ``physics``' qvel."""
        return task_state

    def _observe(self, physics: Physics, task_state: TaskState, last_action: torch.Tensor) -> torch.Tensor:
        """Policy observations ``(envs, observation_dims["policy"])``, noise included."""
        raise NotImplementedError

    def _termination_flags(self, physics: Physics, task_state: TaskState) -> torch.Tensor:
        """Bool ``(envs, len(termination_terms))``."""
        raise NotImplementedError

    def _reward_values(
        self,
        physics: Physics,
        task_state: TaskState,
        action: torch.Tensor,
        last_action: torch.Tensor,
        terminated: torch.Tensor,
    ) -> torch.Tensor:
        """Unweighted terms ``(envs, len(reward_terms))``."""
        raise NotImplementedError

    def _episode_metrics(self, physics: Physics, task_state: TaskState, episode_steps: torch.Tensor) -> torch.Tensor:
        """Values ``(envs, len(metric_terms))`` of episodes ending after ``episode_steps`` control steps."""
        raise NotImplementedError

    # --- helpers for the hooks -----------------------------------------------------------------------------------

    def uniform(self, bounds: tuple[float, float], shape: tuple[int, ...]) -> torch.Tensor:
        """``U(low, high)`` of ``shape`` from the task's generator."""
        low, high = bounds
        return low + (high - low) * torch.rand(shape, generator=self.generator, device=self.device)

    # --- the step --------------------------------------------------------------------------------------------------

    def _on_torch_stream(self) -> wp.ScopedStream | wp.ScopedDevice:
        """Warp's launches on torch's current stream (the capture stream while a graph is captured)."""
        if self.device.type != "cuda":
            return wp.ScopedDevice(self._warp_device)
        stream = torch.cuda.current_stream(self.device)
        if stream.cuda_stream not in self._warp_streams:
            self._warp_streams[stream.cuda_stream] = wp.stream_from_torch(stream)
        return wp.ScopedStream(self._warp_streams[stream.cuda_stream], sync_enter=False)

    def _warp(self, work) -> None:
        """Run ``work`` (Warp launches) on torch's stream; inside torch's graph capture, tell Warp it joins one."""
        with self._on_torch_stream():
            if self.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
                wp.capture_begin(external=True, capture_mode=wp.CaptureMode.GLOBAL)
                try:
                    work()
                finally:
                    self._captures.append(wp.capture_end())
            else:
                work()

    def _substeps(self) -> None:
        for _ in range(self.cfg.decimation):
            mjw.step(self.model, self.data)

    def _physics_steps(self) -> None:
        """The substeps; on CPU replayed from Warp's own capture (7 times faster for the G1 than launching each
        kernel from Python). On CUDA torch's graph captures them with the rest of the step."""
        if self.device.type != "cpu":
            self._substeps()
            return
        if self._cpu_graph is None:
            with wp.ScopedCapture(device="cpu") as capture:  # records the launches; runs nothing
                self._substeps()
            self._cpu_graph = capture.graph
        wp.capture_launch(self._cpu_graph)

    def _reset_where(self, done: torch.Tensor) -> None:
        """Reset the envs in ``done``: MuJoCo Warp's reset of their worlds, then sampled qpos, qvel and task state."""
        self._reset_mask.copy_(done)
        self._warp(lambda: mjw.reset_data(self.model, self.data, reset=self._reset_mask_wp))
        qpos, qvel = self._sample_reset(self.num_envs)
        column = done[:, None]
        self.physics.qpos.copy_(torch.where(column, qpos, self.physics.qpos))
        self.physics.qvel.copy_(torch.where(column, qvel, self.physics.qvel))
        fresh = self._init_task_state(self.num_envs, self.physics)
        for name, value in fresh.items():
            mask = done.reshape((-1,) + (1,) * (value.ndim - 1))
            if name in self.task_state:
                self.task_state[name].copy_(torch.where(mask, value, self.task_state[name]))
            else:
                self.task_state[name] = value.clone()

    def _gather_overflows(self) -> torch.Tensor:
        """Fold this step's overflow flags into the run's and clear them; the share of worlds at the iteration cap."""
        flags = self._overflow
        self._overflowed |= ((flags[:, None] & self._capacity_bits) != 0).any(dim=0)
        capped = ((flags & int(mjw.OverflowType.ITERATIONS)) != 0).float().mean()
        flags.zero_()
        return capped

    def step(self, actions: torch.Tensor) -> tuple[Observations, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """One control step of every env, with the finished ones reset; see :class:`WarpVecTask` for ``extras``."""
        actions = actions.detach().to(self.device, torch.float32)
        self.physics.ctrl.copy_(self._control(actions))
        self._warp(self._physics_steps)
        capped = self._gather_overflows()
        self._store(self._after_physics(self.physics, self.task_state, actions))
        self._episode_length += 1
        self._ep_steps += 1
        ep_steps = self._ep_steps.clone()

        term_flags = self._termination_flags(self.physics, self.task_state)
        terminated = term_flags.any(dim=1)
        time_out = self._episode_length >= self.max_episode_length
        truncated = time_out & ~terminated
        done = terminated | time_out

        values = self._reward_values(self.physics, self.task_state, actions, self._last_action, terminated)
        terms = values * self._reward_weights
        reward = terms.sum(dim=1)
        self._ep_sums += terms
        episode_return = self._ep_sums.sum(dim=1)
        done_f = done.float()
        num_done = done_f.sum()
        reward_means = (self._ep_sums * done_f[:, None]).sum(dim=0) / (
            num_done.clamp(min=1.0) * self.cfg.episode_length_s
        )
        term_counts = torch.cat((truncated[:, None], term_flags), dim=1).sum(dim=0).float()
        metrics = self._episode_metrics(self.physics, self.task_state, ep_steps)
        metric_means = (metrics * done_f[:, None]).sum(dim=0) / num_done.clamp(min=1.0)
        episode_log = torch.where(num_done > 0, torch.cat((reward_means, term_counts, metric_means)), self._log[:-1])
        self._log.copy_(torch.cat((episode_log, capped[None])))

        self._reset_where(done)
        self._last_action.copy_(torch.where(done[:, None], 0.0, actions))
        self._episode_length.masked_fill_(done, 0)
        self._ep_steps.masked_fill_(done, 0)
        self._ep_sums.masked_fill_(done[:, None], 0.0)
        self._observations.copy_(self._prepare_observation())
        extras = {
            "log": dict(zip([*self._log_keys, CAP_LOG_KEY], self._log.unbind(), strict=True)),
            "episode_return": episode_return,
            "episode_length": ep_steps,
            "done": done,
        }
        return self.get_observations(), reward, terminated, truncated, extras

    def _store(self, task_state: TaskState) -> None:
        """Copy a hook's task state into the persistent tensors: a captured graph replays on the same memory."""
        for name, value in task_state.items():
            if value is not self.task_state[name]:
                self.task_state[name].copy_(value)

    def _prepare_observation(self) -> torch.Tensor:
        self._store(self._before_observe(self.physics, self.task_state))
        return self._observe(self.physics, self.task_state, self._last_action)

    # --- VecTask interface -------------------------------------------------------------------------------------

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """The episode step counters (long); assign a tensor to change them (rsl_rl's ``init_at_random_ep_len``)."""
        return self._episode_length

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self._episode_length.copy_(value.to(self.device, torch.long))

    def reset(self) -> tuple[Observations, dict]:
        """Reset every env (fresh states, zeroed counters and statistics); the generator carries on."""
        self._reset_where(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        for buffer in (self._last_action, self._episode_length, self._ep_steps, self._ep_sums, self._log):
            buffer.zero_()
        self._observations.copy_(self._prepare_observation())
        return self.get_observations(), {"log": {}}

    def get_observations(self) -> Observations:
        return {"policy": self._observations}

    def check_physics(self) -> None:
        """Raise :class:`PhysicsCapacityError` if a world overflowed a buffer since the task was built (one host
        read: call it once per iteration, not per step)."""
        hit = {
            setting
            for setting, flag in zip(CAPACITY_OVERFLOWS.values(), self._overflowed.tolist(), strict=True)
            if flag
        }
        if hit:
            sizes = {"contacts_per_world": self.contacts_per_world, "constraints_per_world": self.constraints_per_world}
            raise PhysicsCapacityError(
                "MuJoCo Warp ran out of buffer: a world needed more than "
                + " and ".join(f"env.{name}={sizes[name]}" for name in sorted(hit))
                + "; raise it"
            )

    @property
    def qpos(self) -> torch.Tensor:
        """Generalised positions ``(num_envs, nq)``, a view of MuJoCo Warp's array."""
        return self.physics.qpos

    def write_state(self, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Overwrite the simulated state of every env (for tests and scripted starts); counters are kept."""
        self.physics.qpos.copy_(qpos)
        self.physics.qvel.copy_(qvel)
