"""Replay a task's step as one CUDA graph.

A vectorized task's step is a few hundred small elementwise kernels (Cartpole: two RK4 physics steps, rewards,
terminations, masked resets), so on a GPU it is bound by the host launching them, not by the device running them.
Captured once, the whole step is one graph launch. The task must declare ``graph_capturable`` (see
:class:`rlscale.tasks.base.VecTask`).

What a replay returns is copied out of the graph's buffers, which the next replay overwrites: a library may keep a
step's observations or ``extras["log"]`` values past the next step (skrl pairs states with next states, rsl_rl
averages the log over a rollout).

:func:`build_task` is how rlscale's runs and the peer baselines both build a task, so that both step it alike.
"""

from __future__ import annotations

import sys

import torch

from rlscale.tasks.base import Observations, VecTask
from rlscale.tasks.registry import make_task

EAGER_STEPS = 2
"""Steps run eagerly before the capture, so that lazy initialisation (allocator, kernels' first launch) is done."""


def _copy_out(tree, copies: dict):
    """A copy of every tensor in nested dicts/tuples; views of one tensor stay views of one copy of it."""
    if isinstance(tree, dict):
        return {key: _copy_out(value, copies) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_copy_out(value, copies) for value in tree)
    if not isinstance(tree, torch.Tensor):
        return tree
    base = tree if tree._base is None else tree._base
    if id(base) not in copies:
        copies[id(base)] = base.clone()
    if base is tree:
        return copies[id(base)]
    offset = tree.storage_offset() - base.storage_offset()
    return copies[id(base)].as_strided(tree.size(), tree.stride(), copies[id(base)].storage_offset() + offset)


class GraphedTask(VecTask):
    """Forwards to a CUDA task; after :data:`EAGER_STEPS` eager steps, every step replays one captured graph.

    If the capture fails (an old torch without graph-safe custom generators, say), the task keeps stepping eagerly
    and says so once on stderr: slower, never wrong.
    """

    def __init__(self, task: VecTask) -> None:
        if not task.graph_capturable or task.device.type != "cuda":
            raise ValueError(f"{type(task).__name__} on {task.device} cannot be captured as a CUDA graph")
        self.task = task
        self.cfg = task.cfg
        self.num_envs, self.device, self.num_actions = task.num_envs, task.device, task.num_actions
        self.observation_dims, self.max_episode_length = task.observation_dims, task.max_episode_length
        self.step_dt, self.is_finite_horizon = task.step_dt, task.is_finite_horizon
        self.compile_s, self.compiled_kernels = task.compile_s, task.compiled_kernels
        self._actions = torch.zeros(task.num_envs, task.num_actions, device=task.device)
        self._graph: torch.cuda.CUDAGraph | None = None
        self._outputs = None
        self._eager_steps = EAGER_STEPS
        """Eager steps left before the capture; -1 once it was attempted."""

    episode_length_buf = property(
        lambda self: self.task.episode_length_buf,
        lambda self, value: setattr(self.task, "episode_length_buf", value),
    )

    @property
    def captured(self) -> bool:
        """Whether steps now replay the graph."""
        return self._graph is not None

    def reset(self) -> tuple[Observations, dict]:
        return self.task.reset()  # eager: it updates the same buffers in place, so the graph stays valid

    def get_observations(self) -> Observations:
        return self.task.get_observations()

    def close(self) -> None:
        self.task.close()

    def check_physics(self) -> None:
        self.task.check_physics()

    def step(self, actions: torch.Tensor):
        if self._graph is None and self._eager_steps == 0:
            self._eager_steps = -1  # one capture attempt only
            self._capture()
        if self._graph is None:
            self._eager_steps = max(-1, self._eager_steps - 1)
            return self.task.step(actions)
        self._actions.copy_(actions)  # copy_ casts and moves whatever the library passes
        self._graph.replay()
        return _copy_out(self._outputs, {})

    def _capture(self) -> None:
        graph = torch.cuda.CUDAGraph()
        register = getattr(graph, "register_generator_state", None)
        generator = getattr(self.task, "generator", None)
        try:
            if generator is not None:
                if register is None:
                    raise RuntimeError("this torch cannot capture a custom generator in a CUDA graph")
                register(generator)
            torch.cuda.synchronize(self.device)
            with torch.cuda.graph(graph):
                self._outputs = self.task.step(self._actions)
        except RuntimeError as error:
            print(
                f"[rlscale] stepping {type(self.task).__name__} eagerly: CUDA graph capture failed ({error})",
                file=sys.stderr,
                flush=True,
            )
            self._outputs = None
            return
        self._graph = graph


def graphed_if_possible(task: VecTask, enabled: bool = True) -> VecTask:
    """The task wrapped in :class:`GraphedTask` when enabled, on CUDA and capturable; else the task itself."""
    if enabled and task.graph_capturable and task.device.type == "cuda":
        return GraphedTask(task)
    return task


def unwrapped(task: VecTask) -> VecTask:
    """The task a :class:`GraphedTask` replays, for what only that task has (a velocity task's ``set_commands``, say);
    any other task itself."""
    return task.task if isinstance(task, GraphedTask) else task


class TaskDoesNotFit(Exception):
    """The device ran out of memory while the task was built: too many envs for it."""


def out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is a device out of memory: torch's CUDA error or its CPU allocator's refusal, Python's
    ``MemoryError``, XLA's ``RESOURCE_EXHAUSTED`` (JAX), or Warp's failed allocation (MuJoCo Warp) outside a graph
    capture."""
    text = str(error)
    warp_allocation = text.startswith("Failed to allocate") and "graph capture" not in text
    return (
        type(error).__name__ == "OutOfMemoryError"
        or isinstance(error, MemoryError)
        or "RESOURCE_EXHAUSTED" in text
        or "out of memory" in text
        or "can't allocate memory" in text  # torch's DefaultCPUAllocator
        or warp_allocation
    )


def build_task(task_id: str, *, cuda_graph: bool, **cfg_overrides) -> VecTask:
    """The task as rlscale's runs and the peer baselines step it: built from its config, then graphed if possible.

    One function for both sides, so that ``benchmark --peer`` compares the same env step (see :func:`env_step_of`).

    Args:
        task_id: Registered task id.
        cuda_graph: Replay the step as one CUDA graph where the task and device allow it (``not --no_cuda_graph``).
        cfg_overrides: Task config fields (device, seed, num_envs, ...).

    Raises:
        TaskDoesNotFit: the device ran out of memory building it (or capturing its graph).
    """
    try:
        return graphed_if_possible(make_task(task_id, **cfg_overrides), enabled=cuda_graph)
    except Exception as error:
        if not out_of_memory(error):
            raise
        cause = str(error).strip().splitlines()[0][:160] if str(error).strip() else type(error).__name__
        where = f"--num_envs {cfg_overrides.get('num_envs')}: {cfg_overrides.get('device')} ran out of memory"
        raise TaskDoesNotFit(f"{where} building {task_id} ({cause}); use fewer envs") from error


def env_step_of(task: VecTask) -> str:
    """``cuda_graph`` if the task's steps replay a captured graph, else ``eager``; meaningful once it has stepped."""
    return "cuda_graph" if isinstance(task, GraphedTask) and task.captured else "eager"
