"""Host time per env step, eager against the CUDA-graph replay, at several env counts (issue 6's profiling).

Usage: python tools/step_timing.py [--task Isaac-Cartpole] [--num_envs 4096 65536 ...] [--steps 500]
Prints one JSON line per (num_envs, mode): median and p90 of per-step wall time with the device synchronised around
each step, and the pipelined rate (steps queued back to back, one synchronisation at the end).
"""

import argparse
import json
import statistics
import time

import torch

from rlscale.tasks.graph import build_task


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="Isaac-Cartpole")
    parser.add_argument("--num_envs", type=int, nargs="+", default=[4096, 65536])
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args()
    for num_envs in args.num_envs:
        for graphed in (False, True):
            task = build_task(args.task, cuda_graph=graphed, device="cuda", num_envs=num_envs)
            actions = torch.zeros(num_envs, task.num_actions, device="cuda")
            for _ in range(10):
                task.step(actions)
            torch.cuda.synchronize()
            durations = []
            for _ in range(args.steps):
                started = time.perf_counter()
                task.step(actions)
                torch.cuda.synchronize()
                durations.append(time.perf_counter() - started)
            started = time.perf_counter()
            for _ in range(args.steps):
                task.step(actions)
            torch.cuda.synchronize()
            pipelined = (time.perf_counter() - started) / args.steps
            durations.sort()
            print(
                json.dumps(
                    {
                        "num_envs": num_envs,
                        "cuda_graph": graphed,
                        "synced_step_ms_median": 1e3 * statistics.median(durations),
                        "synced_step_ms_p90": 1e3 * durations[int(0.9 * len(durations))],
                        "pipelined_step_ms": 1e3 * pipelined,
                        "pipelined_env_steps_per_s": num_envs / pipelined,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
