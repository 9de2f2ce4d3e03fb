"""Peer baseline for skrl (PyTorch): skrl's own ``skrl.utils.runner.torch.Runner`` on an rlscale task, as written
without rlscale.

    python peer_skrl.py --task Isaac-Cartpole --num_envs 4096 --output peer.json
    torchrun --nproc_per_node 2 peer_skrl.py --task Isaac-Cartpole --num_envs 4096 --output peer.json

The agent config is rlscale's for the task, with skrl's TensorBoard writer and checkpoints off (``write_interval``
and ``checkpoint_interval`` 0) and the env's info left empty, so the trainer has no episode log to read back. skrl
creates the process group when it is imported (under torchrun), so it is imported inside :func:`main`. Global rank 0
writes ``--output`` (see :mod:`peer_clock`).
"""

from __future__ import annotations

import gymnasium
import numpy as np

from rlscale.benchmark.peer.peer_clock import RolloutClock, build_peer_task, finish_peer, start_peer
from rlscale.rl.agent_defaults import agent_cfg as load_agent_cfg  # the run's config: the task's own or the defaults


def wrap(task, clock: RolloutClock):
    """skrl's torch env contract over the task: reset once, then rely on the task's auto-reset."""
    from skrl.envs.wrappers.torch import Wrapper

    class TaskEnv(Wrapper):
        def __init__(self) -> None:
            super().__init__(task)
            self._observations = None
            self._obs_space = gymnasium.spaces.Box(-np.inf, np.inf, (task.observation_dims["policy"],), np.float32)
            self._act_space = gymnasium.spaces.Box(-1.0, 1.0, (task.num_actions,), np.float32)

        observation_space = property(lambda self: self._obs_space)
        action_space = property(lambda self: self._act_space)
        state_space = property(lambda self: None)

        def reset(self):
            if self._observations is None:
                self._observations, _ = task.reset()
            return self._observations["policy"], {}

        def step(self, actions):
            clock.step()
            self._observations, reward, terminated, truncated, _ = task.step(actions)
            return self._observations["policy"], reward.view(-1, 1), terminated.view(-1, 1), truncated.view(-1, 1), {}

        def state(self):
            return None

        def render(self, *args, **kwargs):
            return None

        def close(self) -> None:
            task.close()

    return TaskEnv()


def main() -> None:
    peer = start_peer("skrl (PyTorch)", "the agent config's timesteps / rollouts")
    args, device = peer.args, peer.device
    if device == "cpu":
        # Only for CPU ranks, and before skrl's import creates the process group with NCCL and cuda.set_device.
        from rlscale.rl.dist_compat import use_gloo_for_cpu_ranks

        use_gloo_for_cpu_ranks(device)
    from skrl.utils.runner.torch import Runner

    cfg = load_agent_cfg(args.task, "skrl")
    rollouts = cfg["agent"]["rollouts"]
    seed = cfg["seed"] if args.seed is None else args.seed
    iterations = args.max_iterations or cfg["trainer"]["timesteps"] // rollouts
    cfg["seed"] = seed  # skrl's set_seed adds the rank itself
    cfg["trainer"].update(timesteps=iterations * rollouts, headless=True, disable_progressbar=True)
    cfg["agent"]["experiment"].update(write_interval=0, checkpoint_interval=0)
    task = build_peer_task(peer, seed)

    clock = RolloutClock(rollouts)
    clock.start()
    Runner(wrap(task, clock), cfg).run("train")
    clock.stop()
    finish_peer(peer, clock, task, library="skrl", seed=seed, iterations=iterations)


if __name__ == "__main__":
    main()
