"""Peer baseline for rl_games: rl_games' own ``Runner`` on an rlscale task, as written without rlscale.

    python peer_rl_games.py --task Isaac-Cartpole --num_envs 4096 --output peer.json
    torchrun --nproc_per_node 2 peer_rl_games.py --task Isaac-Cartpole --num_envs 4096 --output peer.json

The agent config is rlscale's for the task. rl_games insists on a ``train_dir`` and writes its summaries and the
config's checkpoints there on rank 0: a temporary folder, removed at the end. Its observer is the no-op base class
(the default one copies the done indices to the host every step, to log scores). Global rank 0 writes ``--output``
(see :mod:`peer_clock`).
"""

from __future__ import annotations

import tempfile

import gymnasium
import numpy as np
import torch
from rl_games.common import env_configurations, vecenv
from rl_games.common.algo_observer import AlgoObserver
from rl_games.common.ivecenv import IVecEnv
from rl_games.torch_runner import Runner

from rlscale.benchmark.peer.peer_clock import RolloutClock, build_peer_task, finish_peer, start_peer
from rlscale.rl.agent_defaults import agent_cfg as load_agent_cfg  # the run's config: the task's own or the defaults

ENV_NAME = "peer_task"


class TaskVecEnv(IVecEnv):
    """rl_games' env contract over the task: clipped policy observations, ``dones`` and ``time_outs``."""

    def __init__(self, task, clock: RolloutClock, clip_observations: float, clip_actions: float) -> None:
        self.task, self.clock = task, clock
        self.clip_observations, self.clip_actions = clip_observations, clip_actions
        self.observation_space = gymnasium.spaces.Box(
            -clip_observations, clip_observations, (task.observation_dims["policy"],), np.float32
        )
        self.action_space = gymnasium.spaces.Box(-clip_actions, clip_actions, (task.num_actions,), np.float32)

    def step(self, actions: torch.Tensor):
        self.clock.step()
        observations, reward, terminated, truncated, _ = self.task.step(
            actions.clamp(-self.clip_actions, self.clip_actions)
        )
        infos = {} if self.task.is_finite_horizon else {"time_outs": truncated}
        policy = observations["policy"].clamp(-self.clip_observations, self.clip_observations)
        return policy, reward, terminated | truncated, infos

    def reset(self):
        observations, _ = self.task.reset()
        return observations["policy"].clamp(-self.clip_observations, self.clip_observations)

    def get_number_of_agents(self) -> int:
        return 1

    def get_env_info(self) -> dict:
        return {"observation_space": self.observation_space, "action_space": self.action_space, "agents": 1}


def main() -> None:
    peer = start_peer("rl_games", "the agent config's max_epochs")
    args, device = peer.args, peer.device
    if device == "cpu":
        # Only for CPU ranks: rl_games hard-codes NCCL, cuda.set_device and config["device"] = cuda:LOCAL_RANK.
        from rlscale.rl.dist_compat import use_gloo_for_cpu_ranks

        use_gloo_for_cpu_ranks(device)

    params = load_agent_cfg(args.task, "rl_games")["params"]
    env_clip = params.pop("env", {})
    config = params["config"]
    seed = params["seed"] if args.seed is None else args.seed
    iterations = args.max_iterations or config["max_epochs"]
    task = build_peer_task(peer, seed)
    clock = RolloutClock(config["horizon_length"])
    env = TaskVecEnv(task, clock, env_clip.get("clip_observations", np.inf), env_clip.get("clip_actions", 1.0))
    vecenv.register(ENV_NAME, lambda config_name, num_actors, **kwargs: env)
    env_configurations.register(ENV_NAME, {"vecenv_type": ENV_NAME, "env_creator": lambda **kwargs: env})

    with tempfile.TemporaryDirectory(prefix="peer_rl_games-") as train_dir:
        config.update(
            env_name=ENV_NAME,
            num_actors=task.num_envs,
            device=device,
            device_name=device,
            multi_gpu=peer.world_size > 1,
            train_dir=train_dir,
            full_experiment_name="peer",
            max_epochs=iterations,
        )
        params["seed"] = seed  # rl_games adds the global rank itself
        if device == "cpu":
            from rlscale.rl.dist_compat import CpuPinnedConfig

            params["config"] = CpuPinnedConfig(config)
        clock.start()
        runner = Runner(algo_observer=AlgoObserver())
        runner.load({"params": params})
        runner.run({"train": True, "play": False, "checkpoint": None, "sigma": None})
        clock.stop()
    finish_peer(peer, clock, task, library="rl_games", seed=seed, iterations=iterations)


if __name__ == "__main__":
    main()
