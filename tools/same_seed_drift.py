"""How far two builds of a task with one seed drift apart under the same actions, step by step, and how far a build
with another seed starts; run it with and without ``XLA_FLAGS=--xla_gpu_deterministic_ops=true`` to see what XLA's
GPU kernels add (results/h200x2/check_task/: Rlscale-Ant, 256 envs, on CUDA).

Usage: python tools/same_seed_drift.py [--task TASK] [--device DEVICE] [--num_envs N] [--steps N]
"""

from __future__ import annotations

import argparse
import os

import torch

from rlscale.tasks import make_task

ACTION_SEED = 7


def observations(task_id: str, device: str, num_envs: int, steps: int, seed: int) -> list[torch.Tensor]:
    """The policy observations at reset and after each of ``steps`` steps of seeded random actions in [-1, 1]."""
    task = make_task(task_id, num_envs=num_envs, device=device, seed=seed)
    seen = [task.reset()[0]["policy"].clone()]
    actions = torch.Generator(device=device).manual_seed(ACTION_SEED)
    for _ in range(steps):
        action = torch.rand((num_envs, task.num_actions), generator=actions, device=device) * 2 - 1
        seen.append(task.step(action)[0]["policy"].clone())
    return seen


def largest_differences(first: list[torch.Tensor], second: list[torch.Tensor]) -> list[str]:
    return [f"{(a - b).abs().max().item():.1e}" for a, b in zip(first, second, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="Rlscale-Ant")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--num_envs", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    build = [args.task, args.device, args.num_envs, args.steps]
    first, again, other = observations(*build, seed=0), observations(*build, seed=0), observations(*build, seed=1)
    print("XLA_FLAGS", os.environ.get("XLA_FLAGS"))
    print("same seed max|d| per step:", largest_differences(first, again))
    print("other seed max|d| per step:", largest_differences(first, other)[:6])


if __name__ == "__main__":
    main()
