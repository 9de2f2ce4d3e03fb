"""rl-games 1.6.5 adapter: an ``IVecEnv`` registered with ``vecenv``/``env_configurations``, and rl_games' Runner."""

from __future__ import annotations

import contextlib
import copy
import io
import re
from collections.abc import Callable
from pathlib import Path

import gymnasium
import numpy as np
import torch
from rl_games.algos_torch.running_mean_std import RunningMeanStd
from rl_games.common import env_configurations, vecenv
from rl_games.common.algo_observer import AlgoObserver
from rl_games.common.ivecenv import IVecEnv
from rl_games.torch_runner import Runner
from tensorboardX import SummaryWriter

from rlscale.paths import atomic_path
from rlscale.rl import LIBRARIES
from rlscale.rl.common import (
    StopAtBoundary,
    TorchPolicyParameters,
    TrainContext,
    TrainResult,
    library_console,
    on_checkpoint_loaded,
)
from rlscale.rl.dist_compat import CpuPinnedConfig
from rlscale.rl.rank_scaling import RunningMomentsSync, learning_rate_factor, moments_syncs
from rlscale.rl.tracking import TrackerRun, start_run
from rlscale.tasks.base import VecTask

ENV_NAME = "rlscale"
"""Name under which the task is registered with rl_games (``config.env_name``)."""


def scale_learning_rate(config: dict, factor: float) -> None:
    """Multiply the learning rate of rl_games' ``params.config`` (its adaptive schedule starts from it)."""
    config["learning_rate"] *= factor


def rollout_length(agent_cfg: dict) -> int:
    return LIBRARIES["rl_games"].rollout_length(agent_cfg)  # the record holds where the config keeps it


def default_iterations(agent_cfg: dict) -> int:
    return int(agent_cfg["params"]["config"]["max_epochs"])


def speed_levers(agent_cfg: dict) -> dict:
    """The speed settings rl_games trains with, as ``params.config`` sets them, else rl_games' defaults:
    ``mixed_precision`` (bfloat16 autocast in the update) and ``torch_compile`` (false; true or a mode compiles the
    model, and rl_games compiles when the key is absent). Its Adam is always fused."""
    config = agent_cfg["params"]["config"]
    return {"mixed_precision": config.get("mixed_precision", False), "torch_compile": config.get("torch_compile", True)}


class RlGamesVecEnv(IVecEnv):
    """rl_games' env contract, as Isaac Lab's ``RlGamesVecEnvWrapper``: ``obs`` (+ ``states`` for a critic group),
    observations clipped to ``clip_observations``, ``dones = terminated | truncated`` and ``time_outs`` in infos."""

    def __init__(self, task: VecTask, clip_observations: float, clip_actions: float) -> None:
        self.task = task
        self.clip_observations = clip_observations
        self.clip_actions = clip_actions
        self.observation_space = gymnasium.spaces.Box(
            -clip_observations, clip_observations, (task.observation_dims["policy"],), np.float32
        )
        self.action_space = gymnasium.spaces.Box(-clip_actions, clip_actions, (task.num_actions,), np.float32)
        critic_dim = task.observation_dims.get("critic")
        self.state_space = (
            gymnasium.spaces.Box(-clip_observations, clip_observations, (critic_dim,), np.float32)
            if critic_dim
            else None
        )

    def convert(self, observations: dict[str, torch.Tensor]):
        """The task's observation groups as rl_games reads them."""
        policy = observations["policy"].clamp(-self.clip_observations, self.clip_observations)
        if self.state_space is None:
            return policy
        critic = observations["critic"].clamp(-self.clip_observations, self.clip_observations)
        return {"obs": policy, "states": critic}

    def clip(self, actions: torch.Tensor) -> torch.Tensor:
        """rl_games' actions as the task gets them."""
        return actions.clamp(-self.clip_actions, self.clip_actions)

    def step(self, actions: torch.Tensor):
        observations, reward, terminated, truncated, extras = self.task.step(self.clip(actions))
        infos = {"episode": extras.get("log", {})}
        if not self.task.is_finite_horizon:
            infos["time_outs"] = truncated
        return self.convert(observations), reward, terminated | truncated, infos

    def reset(self):
        observations, _ = self.task.reset()
        return self.convert(observations)

    def get_number_of_agents(self) -> int:
        return 1

    def get_env_info(self) -> dict:
        info = {"observation_space": self.observation_space, "action_space": self.action_space, "agents": 1}
        if self.state_space is not None:
            info["state_space"] = self.state_space
        return info


class _KeepAgent(AlgoObserver):
    """Keeps the agent (``Runner.run`` returns nothing) and, unlike rl_games' default observer, adds no per-step
    host copy of the done indices; makes its saves atomic and completes its restore."""

    def __init__(self, ctx: TrainContext) -> None:
        self.agent = None
        self.ctx = ctx
        self.resumed_param_digest: str | None = None

    def after_init(self, algo) -> None:
        self.agent = algo
        if self.ctx.tracker is not None:
            _open_tracker_run(algo, self.ctx.tracker)
        self.ctx.policy_probe.read = TorchPolicyParameters(algo.model)
        save, restore = algo.save, algo.restore
        sync_normalizers = self.ctx.normalizer_sync and self.ctx.rank.distributed
        syncs = _sync_normalizers_after_each_update(algo) if sync_normalizers else []

        def save_atomically(filename: str) -> None:  # rl_games appends ".pth" to the name it is given
            with atomic_path(f"{filename}.pth") as temporary:
                save(str(temporary.with_suffix("")))

        def restore_with_learning_rate(filename: str, set_epoch: bool = True) -> None:
            restore(filename, set_epoch)
            # rl_games restores the optimizer, whose param groups hold the adapted learning rate, but its schedulers
            # step from ``last_lr``, which stays at the config's rate: the first update would drop the adapted one.
            algo.last_lr = algo.optimizer.param_groups[0]["lr"]
            for sync in syncs:  # every rank loaded the same statistics
                sync.remember_shared_state()
            self.resumed_param_digest = on_checkpoint_loaded(self.ctx, algo)

        algo.save, algo.restore = save_atomically, restore_with_learning_rate


def _open_tracker_run(algo, tracker: TrackerRun) -> None:
    """Open the W&B run, syncing TensorBoard as rl_games' own runner script does (rl_games has no W&B writer), once
    rl_games has formed the process group: in its agent's init, which ``after_init`` follows. The TensorBoard writer it
    made in that init, before the run could hook TensorBoard's writers, is reopened so that the sync sees it."""
    start_run(tracker)
    algo.writer.close()
    algo.writer = SummaryWriter(algo.summaries_dir)


def _sync_normalizers_after_each_update(algo) -> list[RunningMomentsSync]:
    """Make ``algo.train_epoch`` (one rollout and its update) end by averaging the ranks' normalizer statistics.

    rl_games 1.6.5 keeps its input and value ``RunningMeanStd`` per rank (a sync came after that release,
    https://github.com/Denys88/rl_games/pull/363); this uses only public attributes: the modules of ``algo.model``
    and their buffers.
    """
    syncs = moments_syncs(algo.model.modules(), RunningMeanStd, "running_mean", "running_var", "count")
    train_epoch = algo.train_epoch

    def train_epoch_then_sync():
        result = train_epoch()
        for sync in syncs:
            sync()
        return result

    algo.train_epoch = train_epoch_then_sync
    return syncs


def runner_params(task: VecTask, agent_cfg: dict, device: str) -> tuple[dict, RlGamesVecEnv]:
    """rl_games' ``params`` of a run over ``task`` on ``device``, and the task wrapped as its env, registered under
    :data:`ENV_NAME`: the config's ``env`` section (Isaac Lab's clipping) goes to the wrapper, not to rl_games."""
    params = copy.deepcopy(agent_cfg["params"])
    env_clip = params.pop("env", {})
    wrapped = RlGamesVecEnv(task, env_clip.get("clip_observations", np.inf), env_clip.get("clip_actions", 1.0))
    vecenv.register(ENV_NAME, lambda config_name, num_actors, **kwargs: wrapped)
    env_configurations.register(ENV_NAME, {"vecenv_type": ENV_NAME, "env_creator": lambda **kwargs: wrapped})
    params["config"].update(env_name=ENV_NAME, num_actors=task.num_envs, device=device, device_name=device)
    params["torch_threads"] = 0  # leave torch's thread count alone: rlscale's worker sets it per rank
    return params, wrapped


def train(task: VecTask, agent_cfg: dict, ctx: TrainContext) -> TrainResult:
    """Train with rl_games' Runner; with ``multi_gpu`` rl_games adds the global rank to the seed itself."""
    params, _ = runner_params(task, agent_cfg, ctx.device)
    start = checkpoint_iteration(ctx.resume, agent_cfg) if ctx.resume else 0
    config = params["config"]
    config.update(
        multi_gpu=ctx.rank.distributed,
        # Checkpoints and summaries land in ctx.log_dir: rl_games writes <train_dir>/<full_experiment_name>/.
        train_dir=str(ctx.log_dir.parent),
        full_experiment_name=ctx.log_dir.name,
        max_epochs=start + ctx.max_iterations,
    )
    if ctx.checkpoint_interval is not None:
        config["save_frequency"] = ctx.checkpoint_interval
    scale_learning_rate(config, learning_rate_factor(ctx.lr_scaling, ctx.rank.world_size))
    if str(ctx.device).startswith("cpu"):
        params["config"] = CpuPinnedConfig(config)
    params["seed"] = ctx.seed
    observer = _KeepAgent(ctx)
    runner = Runner(algo_observer=observer)
    with library_console(ctx):
        runner.load({"params": params})
        try:
            runner.run({"train": True, "play": False, "checkpoint": str(ctx.resume or ""), "sigma": None})
        except StopAtBoundary as stop:
            if ctx.rank.is_main and stop.iterations > start:
                stop.checkpoint = save_at_boundary(observer.agent, stop.iterations, ctx.log_dir)
            raise
        agent = observer.agent
        iterations = int(agent.epoch_num)
        checkpoint = None
        if ctx.rank.is_main:
            # rl_games puts the reward into its checkpoint names; this one has a predictable name.
            checkpoint = Path(ctx.log_dir, "nn", f"model_{iterations}.pth")
            agent.save(str(checkpoint.with_suffix("")))
            agent.writer.flush()  # the TensorBoard events on disk before the tracker run ends
    return TrainResult(
        start_iteration=start,
        iterations_completed=iterations,
        checkpoint=checkpoint,
        resumed_param_digest=observer.resumed_param_digest,
    )


def inference_policy(
    task: VecTask, agent_cfg: dict, checkpoint: Path, device: str, ml_framework: str
) -> Callable[[dict], torch.Tensor]:
    """The deterministic policy of a checkpoint as rl_games plays it, a function of the task's observation groups.

    rl_games' own player (``Runner.create_player``, ``set_weights``, ``get_action``) runs it: observations clipped as
    in training, then normalised by the restored running mean and std when ``normalize_input`` is set; the action is
    the mean, clamped to [-1, 1] and rescaled to the action space when ``clip_actions`` is (rl_games' default), then
    clipped by the env wrapper as in training.
    """
    params, wrapped = runner_params(task, agent_cfg, device)
    params["config"]["env_info"] = wrapped.get_env_info()  # the player takes the spaces from here, builds no env
    runner = Runner()
    with contextlib.redirect_stdout(io.StringIO()):  # rl_games prints its seed and the player's setup
        runner.load({"params": params})
        player = runner.create_player()
    # What the player's restore loads, read onto the policy's device: restore has no map_location, so a GPU run's
    # checkpoint would not load on a host without one.
    player.set_weights(torch.load(checkpoint, map_location=device, weights_only=True))
    if player.is_rnn:  # its hidden state would need the task's episode ends, which a policy of observations lacks
        raise ValueError(f"{checkpoint}: rlscale plays rl_games' feed-forward policies, not a network.rnn one")
    player.has_batch_dimension = True  # one observation per env (rl_games' run() sets it from the first batch)

    def policy(observations: dict[str, torch.Tensor]) -> torch.Tensor:
        actions = player.get_action(player.obs_to_torch(wrapped.convert(observations)), is_deterministic=True)
        return wrapped.clip(actions)

    return policy


def save_at_boundary(agent, epochs: int, log_dir: Path) -> Path:
    """Save the agent after ``epochs`` finished epochs, from the first step of the next one's rollout: rl_games counts
    an epoch when it starts it, so its counter is one ahead there, and the checkpoint records the finished ones."""
    checkpoint = Path(log_dir, "nn", f"model_{epochs}.pth")
    agent.epoch_num = epochs
    agent.save(str(checkpoint.with_suffix("")))
    return checkpoint


def checkpoint_iteration(path: Path, agent_cfg: dict) -> int:
    """Iterations (rl_games epochs) a checkpoint had finished."""
    return int(torch.load(path, map_location="cpu", weights_only=True)["epoch"])


def find_checkpoints(run_dir: Path, agent_cfg: dict, ml_framework: str) -> list[tuple[int, Path]]:
    """rl_games' checkpoints in ``nn/``, with the epochs each had finished.

    Periodic and final ones carry the epoch in their name (``last_<name>_ep_<epoch>_rew_<reward>.pth``, rlscale's
    ``model_<epoch>.pth``); the best-reward one (``<name>.pth``) does not, so its epoch is read from the file, and it
    is left out if it cannot be read.
    """
    found = []
    for path in Path(run_dir, "nn").glob("*.pth"):
        if path.name.startswith("."):  # an unfinished atomic write
            continue
        match = re.search(r"(?:^model_|_ep_)(\d+)(?:_rew_|\.pth$)", path.name)
        if match:
            found.append((int(match.group(1)), path))
            continue
        with contextlib.suppress(Exception):  # damaged or no rl_games checkpoint: nothing to continue from
            found.append((checkpoint_iteration(path, agent_cfg), path))
    return found
