"""skrl 2.1.1 adapter, PyTorch and JAX: skrl's own ``skrl.utils.runner`` Runner, on the env wrappers of
:mod:`rlscale.rl.skrl_envs`.

skrl creates the torch process group (or initialises ``jax.distributed``) when it is imported, so this module must be
imported only after :func:`rlscale.rl.dist_compat.use_gloo_for_cpu_ranks`, and only in the skrl code path.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rlscale.paths import atomic_path, move_into_place
from rlscale.rl import LIBRARIES
from rlscale.rl.common import (
    StopAtBoundary,
    TorchPolicyParameters,
    TrainContext,
    TrainResult,
    library_console,
    on_checkpoint_loaded,
)
from rlscale.rl.rank_scaling import learning_rate_factor, moments_syncs
from rlscale.rl.skrl_envs import jax_env, torch_env
from rlscale.rl.tracking import TrackerRun, start_run, sync_tensorboard_scalars
from rlscale.tasks.base import VecTask

AUTO_INTERVALS = {"write_interval": 1, "checkpoint_interval": 50}
"""Iterations between TensorBoard writes and between checkpoints where the agent config's ``experiment`` says
``auto``, as rsl_rl and rl_games write (every iteration) and save (their generic configs' 50). skrl's own ``auto``
(timesteps / 100 and / 10) writes nothing in a run of under 100 timesteps and saves mid-rollout; an explicit value is
skrl's, in timesteps."""


def scale_learning_rate(cfg: dict, factor: float) -> None:
    """Multiply skrl's ``agent.learning_rate``: one rate, or a policy and a value rate."""
    rate = cfg["agent"]["learning_rate"]
    cfg["agent"]["learning_rate"] = [r * factor for r in rate] if isinstance(rate, list | tuple) else rate * factor


def rollout_length(agent_cfg: dict) -> int:
    return LIBRARIES["skrl"].rollout_length(agent_cfg)  # the record holds where the config keeps it


def default_iterations(agent_cfg: dict) -> int:
    return int(agent_cfg["trainer"]["timesteps"]) // rollout_length(agent_cfg)


def speed_levers(agent_cfg: dict) -> dict:
    """skrl's one speed setting, ``agent.mixed_precision`` (autocast in the PyTorch PPO; off by default, and refused
    on JAX, whose PPO has none). Its optimizer is a plain Adam that the config cannot change."""
    return {"mixed_precision": agent_cfg["agent"].get("mixed_precision", False)}


class _JaxWithCachedPmap:
    """The ``jax`` module as skrl's JAX PPO sees it, except that ``pmap`` reuses one compiled function per lambda.

    skrl 2.1.1 all-reduces with ``jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")`` written inline, so every
    call passes a new function object and JAX retraces and recompiles it: twice per mini-batch, which made a 2-GPU
    iteration take about 6 s instead of a fraction of one. Keyed by the lambda's code, the computation is unchanged.
    """

    def __init__(self, jax_module) -> None:
        self._jax = jax_module
        self._compiled: dict = {}

    def __getattr__(self, name: str):
        return getattr(self._jax, name)

    def pmap(self, fun, **kwargs):
        if fun.__closure__ is not None:  # a closure may capture changing values: compile it as skrl asked
            return self._jax.pmap(fun, **kwargs)
        key = (fun.__code__, tuple(sorted(kwargs.items())))
        if key not in self._compiled:
            self._compiled[key] = self._jax.pmap(fun, **kwargs)
        return self._compiled[key]


def _cache_skrl_jax_pmaps() -> None:
    import jax
    import skrl.agents.jax.ppo.ppo as ppo_module
    import skrl.models.jax.base as model_module

    patched = _JaxWithCachedPmap(jax)
    model_module.jax = ppo_module.jax = patched


def build_runner(
    task: VecTask,
    cfg: dict,
    ml_framework: str,
    distributed: bool = False,
    before_agent: Callable[[], None] | None = None,
):
    """skrl's Runner of ``ml_framework`` over ``task``, built from ``cfg`` (a copy of the agent config, completed
    here), and the task wrapped as its env; ``before_agent`` runs once skrl is imported (its process group formed)
    and before the Runner makes the agent."""
    cfg["trainer"].update(headless=True, disable_progressbar=True)
    cfg["trainer"]["close_environment_at_exit"] = False  # rlscale closes the task itself
    rollouts = rollout_length(cfg)
    if ml_framework == "jax":
        if cfg["agent"].pop("mixed_precision", False):  # skrl's JAX PPO has no such key
            raise ValueError("agent.mixed_precision: skrl's JAX PPO has no mixed precision; use --ml_framework torch")
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave the GPU's memory to the torch task
        import jax.experimental.multihost_utils  # noqa: F401  skrl 2.1.1 uses it in broadcast_parameters unimported
        from skrl.utils.runner.jax import Runner

        if distributed:
            _cache_skrl_jax_pmaps()
        env = jax_env(task, rollouts)
    else:
        from skrl.utils.runner.torch import Runner

        env = torch_env(task, rollouts)
    if before_agent is not None:
        before_agent()
    return Runner(env, cfg), env


def train(task: VecTask, agent_cfg: dict, ctx: TrainContext) -> TrainResult:
    """Train with skrl's Runner; skrl's ``set_seed`` adds the rank to the seed itself."""
    cfg = copy.deepcopy(agent_cfg)
    rollouts = rollout_length(cfg)
    start = checkpoint_iteration(ctx.resume, cfg) if ctx.resume else 0
    cfg["seed"] = ctx.seed
    cfg["trainer"]["timesteps"] = ctx.max_iterations * rollouts
    experiment = cfg["agent"]["experiment"]
    experiment.update(directory=str(ctx.log_dir.parent), experiment_name=ctx.log_dir.name)
    for key, iterations in AUTO_INTERVALS.items():
        if experiment.get(key, "auto") == "auto":  # skrl's default is auto too
            experiment[key] = iterations * rollouts
    scale_learning_rate(cfg, learning_rate_factor(ctx.lr_scaling, ctx.rank.world_size))
    sync_normalizers = ctx.normalizer_sync and ctx.rank.distributed
    if sync_normalizers and ctx.ml_framework == "jax":
        raise ValueError("--sync_normalizer: rlscale syncs skrl's torch preprocessors only; use --ml_framework torch")
    if ctx.checkpoint_interval is not None:
        experiment["checkpoint_interval"] = ctx.checkpoint_interval * rollouts
    with library_console(ctx):
        tracker = ctx.tracker
        track = None if tracker is None else lambda: _track_with_wandb(experiment, tracker, ctx.ml_framework)
        runner, _ = build_runner(task, cfg, ctx.ml_framework, ctx.rank.distributed, before_agent=track)
        agent = runner.agent
        if ctx.ml_framework == "jax":
            ctx.policy_probe.read = _JaxPolicyParameters(agent.policy)
            _checkpoint_live_jax_training_state(agent)
        else:
            ctx.policy_probe.read = TorchPolicyParameters(agent.policy)
        resumed = None
        if ctx.resume is not None:
            # skrl's load restores the models, the preprocessors and (torch) the optimizer, whose param groups hold the
            # KL-adaptive learning rate; the JAX gaps are closed above, and the timestep count continues below.
            agent.load(str(ctx.resume))
            resumed = on_checkpoint_loaded(ctx, agent)
        if sync_normalizers:
            _sync_preprocessors_after_each_update(agent)  # after the load, whose statistics every rank shares
        _continue_timestep_count(agent, timesteps_before=start * rollouts)
        _write_checkpoints_atomically(agent)
        try:
            runner.run("train")
        except StopAtBoundary as stop:
            if ctx.rank.is_main and stop.iterations > start:
                stop.checkpoint = _save(agent, stop.iterations * rollouts, ctx)
            raise
    iterations = start + ctx.max_iterations
    checkpoint = None
    if ctx.rank.is_main:
        # skrl names periodic checkpoints by timestep and does not save the final state; save it under that scheme.
        checkpoint = _save(agent, iterations * rollouts, ctx)
        if ctx.tracker is not None and hasattr(agent, "writer"):  # skrl makes none with write_interval 0
            agent.writer.flush()  # the TensorBoard events on disk before the tracker run ends
    return TrainResult(
        start_iteration=start, iterations_completed=iterations, checkpoint=checkpoint, resumed_param_digest=resumed
    )


def _save(agent, timestep: int, ctx: TrainContext) -> Path:
    """Save the agent's state as skrl names its checkpoint at ``timestep`` (from an iteration boundary or the end)."""
    checkpoint = Path(ctx.log_dir, "checkpoints", f"agent_{timestep}{_suffix(ctx.ml_framework)}")
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(checkpoint) as temporary:
        agent.save(str(temporary))
    return checkpoint


def _track_with_wandb(experiment: dict, tracker: TrackerRun, ml_framework: str) -> None:
    """Open the W&B run on rank 0, after ``import skrl`` formed the process group (or started JAX's distributed
    runtime), syncing TensorBoard. With torch, skrl's own W&B support opens it, in its agent's init, with the tracker
    entry as its ``wandb_kwargs``; its JAX agent's fails in skrl 2.1.1 (its config dump reads the models' torch-only
    ``_modules``), so with JAX rlscale opens it here, before the agent exists.

    W&B syncs TensorBoard by replacing TensorBoard's ``EventFileWriter`` class (:func:`sync_tensorboard_scalars`);
    skrl 2.1.1's writer imported that class by name long before, so none of its events would reach the run. Its writer
    looks the class up when it is made instead.
    """
    import skrl.utils.tensorboard as skrl_tensorboard
    from tensorboard.summary.writer import event_file_writer

    skrl_tensorboard.EventFileWriter = lambda *args, **kwargs: event_file_writer.EventFileWriter(*args, **kwargs)
    if ml_framework == "jax":
        start_run(tracker)
    else:
        sync_tensorboard_scalars()
        experiment.update(wandb=True, wandb_kwargs=tracker.init_kwargs())


def _suffix(ml_framework: str) -> str:
    return ".pickle" if ml_framework == "jax" else ".pt"


def _sync_preprocessors_after_each_update(agent) -> None:
    """Make the agent's ``update`` (once per rollout) end by pooling the ranks' ``RunningStandardScaler`` statistics,
    which skrl 2.1.1 keeps per rank; they are found among the agent's public ``checkpoint_modules``."""
    from skrl.resources.preprocessors.torch import RunningStandardScaler

    modules = agent.checkpoint_modules.values()
    syncs = moments_syncs(modules, RunningStandardScaler, "running_mean", "running_variance", "current_count")
    update = agent.update

    def update_then_sync(*, timestep: int, timesteps: int) -> None:
        update(timestep=timestep, timesteps=timesteps)
        for sync in syncs:
            sync()

    agent.update = update_then_sync


def _continue_timestep_count(agent, timesteps_before: int) -> None:
    """Make the agent see the run's timestep count, not this invocation's.

    skrl's trainer counts timesteps from 0 in every invocation and hands its count to each agent call; the agent
    names checkpoints, places TensorBoard points, times checkpoint intervals and evaluates timestep-based learning-rate
    schedules by it. Adding the timesteps before the resume makes a resumed run continue all of those.
    """
    if timesteps_before == 0:  # a fresh run: leave the per-step calls unwrapped
        return
    for name in ("pre_interaction", "act", "record_transition", "post_interaction"):
        setattr(agent, name, functools.partial(_shift_timestep, getattr(agent, name), timesteps_before))


def _shift_timestep(method, offset: int, *args, timestep: int, timesteps: int, **kwargs):
    return method(*args, timestep=timestep + offset, timesteps=timesteps + offset, **kwargs)


def _write_checkpoints_atomically(agent) -> None:
    """Make the agent's periodic checkpoints atomic.

    skrl writes them straight under ``<experiment>/checkpoints/``, where a kill mid-write would leave a truncated file
    under a checkpoint's name. The wrapper points ``write_checkpoint`` at a staging directory beside it and moves each
    finished file into place with a rename.
    """
    write = agent.write_checkpoint
    staging = Path(agent.experiment_dir, ".checkpoints_staging")

    def write_checkpoint(*, timestep: int, timesteps: int) -> None:
        shutil.rmtree(staging, ignore_errors=True)  # what a killed write left behind
        (staging / "checkpoints").mkdir(parents=True)
        final = Path(agent.experiment_dir, "checkpoints")
        agent.experiment_dir = str(staging)
        try:
            write(timestep=timestep, timesteps=timesteps)
        finally:
            agent.experiment_dir = str(final.parent)
        final.mkdir(exist_ok=True)
        for written in (staging / "checkpoints").iterdir():
            move_into_place(written, final / written.name)
        shutil.rmtree(staging)

    agent.write_checkpoint = write_checkpoint


class _JaxPolicyParameters:
    """The parameters of a skrl JAX policy; JAX arrays are immutable, so a nudge replaces the model's params."""

    def __init__(self, policy) -> None:
        self.policy = policy

    def __call__(self) -> dict:
        import jax

        leaves = jax.tree_util.tree_leaves_with_path(self.policy.state_dict.params)
        return {jax.tree_util.keystr(path): leaf for path, leaf in leaves}

    def nudge(self, delta: float) -> None:
        import jax

        params = jax.tree_util.tree_map(lambda leaf: leaf + delta, self.policy.state_dict.params)
        self.policy.state_dict = self.policy.state_dict.replace(params=params)


@dataclass(frozen=True)
class _Params:
    """What skrl's JAX checkpointing reads from ``module.state_dict``."""

    params: Any

    def replace(self, params):  # skrl's load assigns ``module.state_dict.replace(params=loaded)``
        return params


class _AgentAttribute:
    """One agent attribute, presented to skrl's JAX checkpointing as a module: ``state_dict.params`` reads it and
    assigning ``state_dict`` sets it (the interface of skrl's own JAX ``RunningStandardScaler``)."""

    def __init__(self, agent, name: str) -> None:
        self._agent, self._name = agent, name

    @property
    def state_dict(self) -> _Params:
        return _Params(getattr(self._agent, self._name))

    @state_dict.setter
    def state_dict(self, value) -> None:
        setattr(self._agent, self._name, value)


def _checkpoint_live_jax_training_state(agent) -> None:
    """Make skrl's JAX checkpoints save and load the optimizers' live state and the learning rates.

    skrl 2.1.1's JAX PPO registers each optimizer for checkpointing once, but every update step replaces the optimizer
    object, so checkpoints hold the initial Adam state (step count 0, zero moments), and its ``load`` skips optimizers
    altogether. The learning rates a KL-adaptive scheduler sets live in plain attributes that no checkpoint holds.
    Registered as attribute views, all of them travel through skrl's own ``save``, ``write_checkpoint`` and ``load``;
    the optimizers keep skrl's serialised layout.
    """
    for name in ("policy_optimizer", "value_optimizer", "policy_learning_rate", "value_learning_rate"):
        agent.checkpoint_modules[name] = _AgentAttribute(agent, name)


def inference_policy(
    task: VecTask, agent_cfg: dict, checkpoint: Path, device: str, ml_framework: str
) -> Callable[[dict], torch.Tensor]:
    """The deterministic policy of a checkpoint as skrl evaluates it, a function of the task's observation groups.

    skrl's own agent loads the checkpoint (its models and preprocessors, the ``RunningStandardScaler`` statistics
    included) and acts in evaluation mode; the action is the policy's ``mean_actions``, as skrl's trainers evaluate
    (clipped only where the policy's ``clip_mean_actions`` says). A JAX policy runs in JAX; its actions reach torch
    through DLPack, as in training. ``device`` is the task's: skrl places the agent on its env's device.
    """
    cfg = copy.deepcopy(agent_cfg)
    cfg["agent"]["experiment"].update(write_interval=0, checkpoint_interval=0, wandb=False)  # write nothing
    runner, env = build_runner(task, cfg, ml_framework)
    agent = runner.agent
    if ml_framework == "jax":
        _checkpoint_live_jax_training_state(agent)  # the layout rlscale's JAX checkpoints have
    agent.load(str(checkpoint))
    agent.enable_training_mode(False, apply_to_models=True)

    def policy(observations: dict[str, torch.Tensor]) -> torch.Tensor:
        inputs, states = env.agent_inputs(observations)
        with torch.no_grad():
            actions, outputs = agent.act(inputs, states, timestep=0, timesteps=0)
        return env.task_actions(outputs.get("mean_actions", actions))

    return policy


def checkpoint_iteration(path: Path, agent_cfg: dict) -> int:
    """Iterations a checkpoint had finished, from skrl's ``agent_<timestep>.pt`` naming."""
    match = re.fullmatch(r"agent_(\d+)\.(pt|pickle)", Path(path).name)
    if match is None:
        raise ValueError(f"cannot tell the iteration of skrl checkpoint {path}: expected agent_<timestep>.pt|.pickle")
    return int(match.group(1)) // rollout_length(agent_cfg)


def find_checkpoints(run_dir: Path, agent_cfg: dict, ml_framework: str) -> list[tuple[int, Path]]:
    """skrl's whole-agent checkpoints of this framework, ``checkpoints/agent_<timestep>.pt|.pickle``, with the
    iterations each had finished; ``best_agent`` records no timestep, so it is not a point to continue from."""
    pattern = re.compile(rf"agent_\d+{re.escape(_suffix(ml_framework))}")
    paths = Path(run_dir, "checkpoints").glob("agent_*")
    return [(checkpoint_iteration(path, agent_cfg), path) for path in paths if pattern.fullmatch(path.name)]
