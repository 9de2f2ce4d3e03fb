"""What a robot earns, term by term, while random actions of a given std drive it: the reward ledger of PPO's first
iterations, measured on CPU (docs/robots.md cites it for the G1's initial action noise).

Each std runs the task's envs for --seconds under actions drawn from N(0, std²) (std 0: zero actions, the default
pose), with a fixed command; it prints falls (``base_contact``) per env-second, the median time to the first fall,
the base's mean |yaw rate| (what ``Metrics/base_velocity/error_vel_yaw`` reads), the RMS of each policy observation
term, and each reward term per second of episode, weighted as training weighs it, the termination penalty included.

Usage: python tools/g1_exploration_ledger.py [--task Rlscale-G1-Flat] [--std 0 0.5 1] [--num_envs 16] [--seconds 4]
    [env.FIELD=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from rlscale.tasks import make_task  # noqa: E402
from rlscale.tasks.overrides import parse_value  # noqa: E402

BASE_TERMS = (("base_lin_vel", 3), ("base_ang_vel", 3), ("projected_gravity", 3), ("command", 3))
JOINT_TERMS = ("joint_pos", "joint_vel", "last_action")


def ledger(task, std: float, seconds: float, command: tuple[float, float, float], seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
    task.reset()
    task.set_commands(torch.tensor([command] * task.num_envs))
    steps, names = round(seconds / task.step_dt), task.reward_terms
    sums, previous = np.zeros(len(names)), np.zeros((task.num_envs, len(names)))
    falls, yaw_rates, first_fall, squares = 0, [], np.full(task.num_envs, np.nan), 0.0
    for step in range(steps):
        actions = torch.randn(task.num_envs, task.num_actions, generator=generator) * std
        observations, _, terminated, truncated, _ = task.step(actions)
        squares = squares + (observations["policy"].numpy() ** 2).mean(axis=0)
        episode_sums = np.asarray(task._state["ep_sums"])
        increment = episode_sums - previous  # a reset env's last step is lost: the termination penalty is counted below
        increment[(terminated | truncated).numpy()] = 0.0
        sums, previous = sums + increment.sum(axis=0), episode_sums
        fell = terminated.numpy()
        falls += int(fell.sum())
        first_fall[np.isnan(first_fall) & fell] = step * task.step_dt
        yaw_rates.append(float(np.abs(np.asarray(task._state["data"].qvel)[:, 5]).mean()))
    env_seconds = task.num_envs * seconds
    per_second = dict(zip(names, (sums / env_seconds).round(3).tolist(), strict=True))
    if "termination_penalty" in per_second:
        per_second["termination_penalty"] = round(
            falls * task.cfg.rewards.termination_penalty * task.step_dt / env_seconds, 3
        )
    sizes = [*BASE_TERMS, *((name, task.num_actions) for name in JOINT_TERMS)]
    ends = np.cumsum([size for _, size in sizes])
    rms = {
        name: round(float(np.sqrt(squares[end - size : end].mean() / steps)), 2)
        for (name, size), end in zip(sizes, ends, strict=True)
    }
    return {
        "std": std,
        "falls_per_env_s": round(falls / env_seconds, 3),
        "first_fall_median_s": None if np.isnan(first_fall).all() else round(float(np.nanmedian(first_fall)), 2),
        "base_yaw_rate_radps": round(float(np.mean(yaw_rates)), 2),
        "observation_rms": rms,
        "reward_per_s": round(sum(per_second.values()), 3),
        "terms_per_s": per_second,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="Rlscale-G1-Flat")
    parser.add_argument("--std", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    parser.add_argument("--num_envs", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--command", type=float, nargs=3, default=[0.5, 0.0, 0.0], metavar=("VX", "VY", "WZ"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("overrides", nargs="*", metavar="env.FIELD=VALUE")
    args = parser.parse_args()
    overrides = {}
    for item in args.overrides:
        key, _, text = item.removeprefix("env.").partition("=")
        overrides[key] = parse_value(text)
    task = make_task(args.task, num_envs=args.num_envs, seed=0, device="cpu", **overrides)
    for std in args.std:
        print(json.dumps(ledger(task, std, args.seconds, tuple(args.command), args.seed)), flush=True)


if __name__ == "__main__":
    main()
