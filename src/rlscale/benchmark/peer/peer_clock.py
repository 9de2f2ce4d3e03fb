"""What the three peer scripts share: their command line and ranks, a rollout-boundary clock and the result file.

Shared so that the peers are started and timed alike by construction; each script imports nothing else from rlscale
but the task registry, :func:`rlscale.tasks.graph.build_task`, which builds the task exactly as rlscale's runs do,
:mod:`rlscale.dist` for the rank's place and GPU (and, on CPU ranks only, :mod:`rlscale.rl.dist_compat`).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from rlscale.dist import RankInfo, global_env_steps, rank_cuda_index, rank_info
from rlscale.paths import write_atomic
from rlscale.tasks.base import VecTask
from rlscale.tasks.graph import build_task, env_step_of


@dataclass
class PeerRank:
    """The peer's arguments and this process's place in the torchrun job."""

    args: argparse.Namespace
    place: RankInfo
    """Torchrun's rank variables, read once."""
    device: str
    """``cuda:<rank_cuda_index>`` or ``cpu``."""

    @property
    def rank(self) -> int:
        return self.place.rank

    @property
    def world_size(self) -> int:
        return self.place.world_size


def start_peer(library: str, iterations_default: str) -> PeerRank:
    """Parse the peer's command line, read torchrun's rank variables and, on a GPU, pin the rank's device.

    Args:
        library: Named in ``--help``.
        iterations_default: Where ``--max_iterations`` defaults from, for ``--help``.
    """
    parser = argparse.ArgumentParser(description=f"{library} PPO on an rlscale task (peer baseline)")
    parser.add_argument("--task", required=True)
    parser.add_argument("--num_envs", type=int, help="per rank (default: the task's)")
    parser.add_argument("--max_iterations", type=int, help=f"default: {iterations_default}")
    parser.add_argument("--seed", type=int, help="base seed, rank r uses seed + r (default: the agent config's)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no_cuda_graph", action="store_true", help="step the task eagerly, as rlscale's flag does")
    parser.add_argument("--output", required=True, help="result JSON, written by global rank 0")
    args = parser.parse_args()
    rank = rank_info()
    device = f"cuda:{rank_cuda_index(rank, torch.cuda.device_count())}" if args.device == "cuda" else "cpu"
    if device != "cpu":
        torch.cuda.set_device(device)  # before any CUDA work, so that no rank opens a context on GPU 0
    return PeerRank(args, rank, device)


def build_peer_task(peer: PeerRank, seed: int) -> VecTask:
    """The task of this rank, seeded ``seed + rank``, built and graphed as rlscale's run builds it."""
    args = peer.args
    cfg = {"device": peer.device, "seed": seed + peer.rank} | ({"num_envs": args.num_envs} if args.num_envs else {})
    return build_task(args.task, cuda_graph=not args.no_cuda_graph, **cfg)


def finish_peer(peer: PeerRank, clock: RolloutClock, task: VecTask, *, library: str, seed: int, iterations: int):
    """Global rank 0 writes the result; every rank leaves the process group the library created."""
    if peer.rank == 0:
        write_result(
            peer.args.output,
            clock,
            library=library,
            task=peer.args.task,
            device=peer.args.device,
            seed=seed,
            world_size=peer.world_size,
            num_envs_per_rank=task.num_envs,
            max_iterations=iterations,
            cuda_graph=not peer.args.no_cuda_graph,
            env_step=env_step_of(task),
        )
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


class RolloutClock:
    """Iteration times from ``time.perf_counter()`` alone, at rollout boundaries: no device sync, no extra kernel.

    The definition of rlscale's ``TrackedTask.iteration_s``: an iteration runs from the first env step of its rollout
    to the first env step of the next one, and the last one ends when the library's training call returns.

    Args:
        rollout_length: Env steps per rollout (per iteration), from the agent config.
    """

    def __init__(self, rollout_length: int) -> None:
        self.rollout_length = rollout_length
        self.rollout_starts: list[float] = []
        self.steps = 0
        self.train_started = self.train_returned = 0.0

    def start(self) -> None:
        """Call right before handing the env to the library (runner construction included)."""
        self.train_started = time.perf_counter()

    def step(self) -> None:
        """Call first thing in every env step."""
        if self.steps % self.rollout_length == 0:
            self.rollout_starts.append(time.perf_counter())
        self.steps += 1

    def stop(self) -> None:
        """Call as soon as the library's training call returns."""
        self.train_returned = time.perf_counter()

    def iteration_s(self) -> list[float]:
        ends = [*self.rollout_starts[1:], self.train_returned]
        return [end - start for start, end in zip(self.rollout_starts, ends, strict=True)]


def process_wall_time_s() -> float | None:
    """Seconds since this interpreter started, from the kernel's start time (Linux); None elsewhere."""
    try:
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        return time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def write_result(
    path: str | Path,
    clock: RolloutClock,
    *,
    library: str,
    task: str,
    device: str,
    seed: int,
    world_size: int,
    num_envs_per_rank: int,
    max_iterations: int,
    cuda_graph: bool,
    env_step: str,
) -> None:
    """Write the peer's result JSON atomically (global rank 0 only): the workload, then the clock's times.

    ``steps_per_iteration`` is global, rollout length x envs per rank x world size, as in rlscale's bundle.
    ``cuda_graph`` is the setting the task was built with, ``env_step`` what its steps were in the end
    (:func:`rlscale.tasks.graph.env_step_of`).
    """
    result = {
        "library": library,
        "task": task,
        "device": device,
        "seed": seed,
        "world_size": world_size,
        "num_envs_per_rank": num_envs_per_rank,
        "max_iterations": max_iterations,
        "cuda_graph": cuda_graph,
        "env_step": env_step,
        "rollout_length": clock.rollout_length,
        "steps_per_iteration": global_env_steps(clock.rollout_length, num_envs_per_rank, world_size),
        "iteration_s": clock.iteration_s(),
        "train_s": clock.train_returned - clock.train_started,
        "process_wall_time_s": process_wall_time_s(),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(result, indent=2) + "\n")
