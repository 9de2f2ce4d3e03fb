"""Peer baseline for rsl_rl: rsl_rl's own ``OnPolicyRunner`` on an rlscale task, as written without rlscale.

    python peer_rsl_rl.py --task Isaac-Cartpole --num_envs 4096 --output peer.json
    torchrun --nproc_per_node 2 peer_rsl_rl.py --task Isaac-Cartpole --num_envs 4096 --output peer.json

The agent config is rlscale's for the task; no TensorBoard writer, no checkpoint (``log_dir=None``). Global rank 0
writes ``--output`` (see :mod:`peer_clock`).
"""

from __future__ import annotations

import torch
from rsl_rl.env import VecEnv
from rsl_rl.runners import OnPolicyRunner
from tensordict import TensorDict

from rlscale.benchmark.peer.peer_clock import RolloutClock, build_peer_task, finish_peer, start_peer
from rlscale.dist import RankInfo
from rlscale.rl.agent_defaults import agent_cfg as load_agent_cfg  # the run's config: the task's own or the defaults

RUN_SETTINGS = ("seed", "max_iterations", "experiment_name")
"""Keys of the task's rsl_rl YAML that are run settings, not part of rsl_rl's ``train_cfg``."""


class TaskVecEnv(VecEnv):
    """rsl_rl's env contract over the task; ``clock`` sees every step."""

    def __init__(self, task, clock: RolloutClock) -> None:
        self.task, self.clock = task, clock
        self.num_envs, self.num_actions, self.device = task.num_envs, task.num_actions, task.device
        self.max_episode_length = task.max_episode_length
        self.cfg = task.cfg

    # The runner assigns to this (init_at_random_ep_len), so it must be the task's own buffer.
    episode_length_buf = property(
        lambda self: self.task.episode_length_buf,
        lambda self, value: setattr(self.task, "episode_length_buf", value),
    )

    def get_observations(self) -> TensorDict:
        return TensorDict(self.task.get_observations(), batch_size=[self.num_envs], device=self.device)

    def step(self, actions: torch.Tensor):
        self.clock.step()
        observations, reward, terminated, truncated, _ = self.task.step(actions)
        extras = {} if self.task.is_finite_horizon else {"time_outs": truncated}
        observations = TensorDict(observations, batch_size=[self.num_envs], device=self.device)
        return observations, reward, (terminated | truncated).long(), extras


class CpuRunner(OnPolicyRunner):
    """Only for CPU ranks: rsl_rl insists on NCCL and ``cuda:LOCAL_RANK``, so its process-group setup uses gloo."""

    def __init__(self, rank: RankInfo, *args, **kwargs) -> None:
        self.rank_place = rank  # set first: OnPolicyRunner's __init__ calls _configure_multi_gpu
        super().__init__(*args, **kwargs)

    def _configure_multi_gpu(self) -> None:
        from rlscale.rl.dist_compat import configure_rsl_rl_runner

        configure_rsl_rl_runner(self, self.rank_place)


def main() -> None:
    peer = start_peer("rsl_rl", "the agent config's")
    args, rank, device = peer.args, peer.rank, peer.device

    agent_cfg = load_agent_cfg(args.task, "rsl_rl")
    seed = agent_cfg["seed"] if args.seed is None else args.seed
    iterations = args.max_iterations or agent_cfg["max_iterations"]
    train_cfg = {key: value for key, value in agent_cfg.items() if key not in RUN_SETTINGS}
    torch.manual_seed(seed + rank)  # rsl_rl seeds nothing; rank 0's initial weights are broadcast
    task = build_peer_task(peer, seed)
    task.reset()  # rsl_rl never resets the env itself

    clock = RolloutClock(train_cfg["num_steps_per_env"])
    clock.start()
    env = TaskVecEnv(task, clock)
    if device == "cpu":
        runner = CpuRunner(peer.place, env, train_cfg, log_dir=None, device=device)
    else:
        runner = OnPolicyRunner(env, train_cfg, log_dir=None, device=device)
    runner.learn(iterations, init_at_random_ep_len=True)
    clock.stop()
    finish_peer(peer, clock, task, library="rsl_rl", seed=seed, iterations=iterations)


if __name__ == "__main__":
    main()
