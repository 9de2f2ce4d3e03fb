"""rsl-rl-lib 5.x adapter: a ``VecEnv`` over a task and the library's own ``OnPolicyRunner``."""

from __future__ import annotations

import contextlib
import inspect
import io
import re
from collections.abc import Callable
from pathlib import Path

import torch
from rsl_rl.algorithms import PPO
from rsl_rl.env import VecEnv
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.utils.wandb_log_writer import WandbLogWriter
from tensordict import TensorDict
from torch.utils.tensorboard import SummaryWriter

from rlscale.dist import RankInfo
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
from rlscale.rl.dist_compat import configure_rsl_rl_runner
from rlscale.rl.rank_scaling import learning_rate_factor
from rlscale.rl.tracking import TrackerRun
from rlscale.tasks.base import VecTask

RUN_SETTINGS = ("seed", "max_iterations", "experiment_name")
"""Keys of rlscale's rsl_rl YAML that are run settings, not part of rsl_rl's ``train_cfg``."""


def scale_learning_rate(train_cfg: dict, factor: float) -> None:
    """Multiply the learning rate rsl_rl starts from (its adaptive schedule moves it from there)."""
    train_cfg["algorithm"]["learning_rate"] *= factor


def rollout_length(agent_cfg: dict) -> int:
    return LIBRARIES["rsl_rl"].rollout_length(agent_cfg)  # the record holds where the config keeps it


def default_iterations(agent_cfg: dict) -> int:
    return int(agent_cfg["max_iterations"])


SPEED_LEVERS = ("optimizer", "use_mixed_precision", "grad_reduce_bucket_mb")
"""``algorithm`` keys that change how fast rsl_rl's PPO updates, not what it learns (besides the optimizer)."""


def speed_levers(agent_cfg: dict) -> dict:
    """The speed settings rsl_rl trains with: ``torch_compile_mode`` (``PPO.compile`` of actor and critic),
    ``check_for_nan`` (the runner's per-step NaN check) and :data:`SPEED_LEVERS`, each as the config sets it, else
    rsl_rl's own default."""
    defaults = inspect.signature(PPO).parameters
    algorithm = agent_cfg["algorithm"]
    levers = {name: algorithm.get(name, defaults[name].default) for name in SPEED_LEVERS}
    runner = {
        "torch_compile_mode": agent_cfg.get("torch_compile_mode"),
        "check_for_nan": agent_cfg.get("check_for_nan", True),
    }
    return runner | levers


class RslRlVecEnv(VecEnv):
    """rsl_rl's env contract: TensorDict observations, ``dones`` as long, and ``extras["time_outs"]``."""

    def __init__(self, task: VecTask) -> None:
        self.task = task
        self.num_envs, self.num_actions, self.device = task.num_envs, task.num_actions, task.device
        self.max_episode_length = task.max_episode_length
        self.cfg = task.cfg

    # The runner assigns to this (init_at_random_ep_len), so it must be the task's own buffer.
    episode_length_buf = property(
        lambda self: self.task.episode_length_buf,
        lambda self, value: setattr(self.task, "episode_length_buf", value),
    )

    def _as_tensordict(self, observations: dict[str, torch.Tensor]) -> TensorDict:
        return TensorDict(observations, batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        return self._as_tensordict(self.task.get_observations())

    def step(self, actions: torch.Tensor):
        observations, reward, terminated, truncated, extras = self.task.step(actions)
        extras = {"log": extras.get("log", {})}
        if not self.task.is_finite_horizon:
            extras["time_outs"] = truncated
        return self._as_tensordict(observations), reward, (terminated | truncated).long(), extras


class _Runner(OnPolicyRunner):
    def __init__(self, rank: RankInfo, *args, **kwargs) -> None:
        self.rank_place = rank  # set first: OnPolicyRunner's __init__ calls _configure_multi_gpu
        super().__init__(*args, **kwargs)

    def _configure_multi_gpu(self) -> None:
        if str(self.device).startswith("cpu"):
            configure_rsl_rl_runner(self, self.rank_place)
        else:
            super()._configure_multi_gpu()

    def save(self, path: str, infos: dict | None = None) -> None:
        with atomic_path(path) as temporary:
            super().save(str(temporary), infos)


class TrackedWandbLogWriter(WandbLogWriter):
    """rsl_rl's W&B writer (every scalar to TensorBoard and W&B, the configs and checkpoints uploaded), its run opened
    with the whole tracker entry: rsl_rl's own init gives W&B only a project and a name, so a study's group, job type
    and a resumed run's id would be lost. rsl-rl-lib is pinned, so the writer state this sets is the pinned one's."""

    def __init__(self, log_dir: str, init_kwargs: dict) -> None:
        import wandb

        SummaryWriter.__init__(self, log_dir, flush_secs=10)
        wandb.init(**init_kwargs)
        self.logged_videos: set[str] = set()

    def stop(self) -> None:
        """Leave the run open: rlscale ends it once it knows how the whole run ended, the ranks' final sync audit
        included."""
        self.flush()


def logger_cfg(tracker: TrackerRun | None) -> str | dict:
    """rsl_rl's ``logger`` entry: its TensorBoard writer, or with a tracker run :class:`TrackedWandbLogWriter`, which
    rsl_rl builds in ``learn`` once the process group has formed and the parameters are broadcast."""
    if tracker is None:
        return "tensorboard"
    return {"class_name": f"{__name__}:{TrackedWandbLogWriter.__name__}", "init_kwargs": tracker.init_kwargs()}


def build_runner(task: VecTask, agent_cfg: dict, ctx: TrainContext) -> OnPolicyRunner:
    """rsl_rl's runner over ``task``, built from the run's config (its algorithm, compiled as ``torch_compile_mode``
    asks, included); only rank 0 passes a log dir, so only it writes."""
    train_cfg = {key: value for key, value in agent_cfg.items() if key not in RUN_SETTINGS}
    if ctx.checkpoint_interval is not None:
        train_cfg["save_interval"] = ctx.checkpoint_interval
    train_cfg["logger"] = logger_cfg(ctx.tracker)  # --logger decides, whatever the agent config says
    train_cfg["algorithm"] = dict(train_cfg["algorithm"])  # scaled below: leave the caller's config as it was
    scale_learning_rate(train_cfg, learning_rate_factor(ctx.lr_scaling, ctx.rank.world_size))
    # ctx.normalizer_sync needs nothing here: rsl_rl's EmpiricalNormalization all-reduces its statistics itself
    # whenever torch.distributed is initialised, so they are synced with or without it.
    # rsl_rl seeds nothing, so add the rank here as rl_games and skrl do themselves; rank 0's weights are broadcast.
    torch.manual_seed(ctx.seed + ctx.rank.rank)
    log_dir = str(ctx.log_dir) if ctx.rank.is_main else None
    return _Runner(ctx.rank, RslRlVecEnv(task), train_cfg, log_dir=log_dir, device=ctx.device)


def train(task: VecTask, agent_cfg: dict, ctx: TrainContext) -> TrainResult:
    """Train with rsl_rl's ``OnPolicyRunner`` (:func:`build_runner`)."""
    task.reset()  # rsl_rl never calls reset itself
    # rsl_rl prints its models and a multi-line block per iteration; rlscale prints its own line instead.
    with library_console(ctx):
        runner = build_runner(task, agent_cfg, ctx)
        ctx.policy_probe.read = TorchPolicyParameters(runner.alg.get_policy())
        resumed = None
        if ctx.resume is not None:
            # rsl_rl 5.5.1's load restores everything training continues from: the models with their observation
            # normalizers, the optimizer, and the adaptive learning rate (from the optimizer's param groups).
            runner.load(str(ctx.resume), map_location=ctx.device)
            runner.current_learning_iteration += 1  # the checkpoint's "iter" is the last iteration it finished
            resumed = on_checkpoint_loaded(ctx, runner)
        start = runner.current_learning_iteration
        try:
            runner.learn(ctx.max_iterations, init_at_random_ep_len=True)
        except StopAtBoundary as stop:
            if ctx.rank.is_main and stop.iterations > start:
                # At the boundary rsl_rl's counter holds the last finished iteration's index, as its own saves name it.
                stop.checkpoint = Path(ctx.log_dir, f"model_{runner.current_learning_iteration}.pt")
                runner.save(str(stop.checkpoint))
            raise
    checkpoint = Path(ctx.log_dir, f"model_{runner.current_learning_iteration}.pt") if ctx.rank.is_main else None
    return TrainResult(
        start_iteration=start,
        iterations_completed=runner.current_learning_iteration + 1,
        checkpoint=checkpoint,
        resumed_param_digest=resumed,
    )


def inference_policy(
    task: VecTask, agent_cfg: dict, checkpoint: Path, device: str, ml_framework: str
) -> Callable[[dict], torch.Tensor]:
    """The deterministic policy (the action distribution's mean, its observations normalised as the actor's restored
    normaliser does) of a checkpoint, as a function of the task's observation groups."""
    train_cfg = {key: value for key, value in agent_cfg.items() if key not in RUN_SETTINGS}
    with contextlib.redirect_stdout(io.StringIO()):  # the runner prints its models
        runner = OnPolicyRunner(RslRlVecEnv(task), train_cfg, log_dir=None, device=device)
    runner.load(str(checkpoint), load_cfg={"actor": True}, map_location=device)
    policy = runner.get_inference_policy(device)
    return lambda observations: policy(TensorDict(observations, batch_size=[task.num_envs]))


def checkpoint_iteration(path: Path, agent_cfg: dict) -> int:
    """Iterations a checkpoint had finished (rsl_rl stores the last iteration's index)."""
    return int(torch.load(path, map_location="cpu", weights_only=True)["iter"]) + 1


def find_checkpoints(run_dir: Path, agent_cfg: dict, ml_framework: str) -> list[tuple[int, Path]]:
    """rsl_rl's checkpoints in a run directory, with the iterations each had finished: ``model_<index>.pt``."""
    found = []
    for path in run_dir.glob("model_*.pt"):
        match = re.fullmatch(r"model_(\d+)\.pt", path.name)
        if match:
            found.append((int(match.group(1)) + 1, path))
    return found
