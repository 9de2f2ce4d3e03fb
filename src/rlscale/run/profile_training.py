"""``rlscale profile_training``: a few iterations of ``rlscale train`` under the torch profiler, to see where an
iteration's time goes.

    rlscale profile_training --out DIR [--first 3 --count 3] -- <rlscale train arguments>

One rank, or each rank of a job under torchrun. Writes, per rank, ``DIR/rank<r>_table.txt`` (operators by host and
device time), ``DIR/rank<r>_trace.json`` (a Chrome trace) and ``DIR/rank<r>_summary.json``: per profiled iteration
the wall time, the collection and update split, the host time inside ``env.step`` and the device's busy time, plus
kernel launches per iteration. A GPU busy for a small share of the wall time with many launches per step means the
loop is launch-bound on the host.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from rlscale.argparsing import OneLineParser


def main(argv: Sequence[str]) -> int:
    parser = OneLineParser(
        prog="rlscale profile_training",
        description="Profile iterations of `rlscale train` (its arguments after --) with the torch profiler.",
    )
    parser.add_argument("--out", type=Path, required=True, help="where the tables, traces and summaries go")
    parser.add_argument("--first", type=int, default=3, help="first profiled iteration, at least 1 (default 3)")
    parser.add_argument("--count", type=int, default=3, help="profiled iterations (default 3)")
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    own, train_argv = parser.parse_args(argv[:cut]), argv[cut + 1 :]
    if own.first < 1 or own.count < 1:
        parser.error(f"--first and --count must be at least 1 (got {own.first} and {own.count})")
    if not train_argv:
        parser.error("give the `rlscale train` arguments after -- (e.g. -- --task Isaac-Cartpole --device cuda)")

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    from rlscale.dist import rank_info
    from rlscale.run.phases import execute
    from rlscale.run.train import resolve_own_spec

    spec = resolve_own_spec(train_argv)
    on_cuda = spec.device is not None and spec.device.is_cuda
    rank = rank_info().rank
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    profiler = profile(
        activities=activities, schedule=schedule(wait=own.first - 1, warmup=1, active=own.count, repeat=1)
    )
    env_step_s: dict[int, float] = {}
    current = {"iteration": -1}

    def on_tracking(tracked) -> None:
        inner_step, library_start = tracked.task.step, tracked.on_iteration_start

        def timed_step(actions):
            started = time.perf_counter()
            with record_function("env.step"):
                result = inner_step(actions)
            it = current["iteration"]
            env_step_s[it] = env_step_s.get(it, 0.0) + time.perf_counter() - started
            return result

        def on_iteration_start(iteration: int) -> None:
            if current["iteration"] >= 0:
                profiler.step()
            current["iteration"] = iteration
            library_start(iteration)

        tracked.task.step = timed_step
        tracked.on_iteration_start = on_iteration_start

    profiler.start()
    outcome = execute(spec, on_tracking=on_tracking)
    profiler.stop()

    own.out.mkdir(parents=True, exist_ok=True)
    averages = profiler.key_averages()
    sort = "self_cuda_time_total" if on_cuda else "self_cpu_time_total"
    table = averages.table(sort_by=sort, row_limit=40) + "\n\n" + averages.table(sort_by="cpu_time_total", row_limit=40)
    (own.out / f"rank{rank}_table.txt").write_text(table)
    profiler.export_chrome_trace(str(own.out / f"rank{rank}_trace.json"))
    launches = sum(event.count for event in averages if event.key in ("cudaLaunchKernel", "cuLaunchKernel"))
    device_busy_us = sum(getattr(event, "self_device_time_total", 0) for event in averages)
    profiled = [record for record in outcome.records if own.first <= record.iteration < own.first + own.count]
    summary = {
        "argv": train_argv,
        "status": outcome.status,
        "profiled_iterations": [
            {
                "iteration": record.iteration,
                "iteration_s": record.iteration_s,
                "collection_s": record.collection_s,
                "update_s": record.iteration_s - record.collection_s,
                "env_step_host_s": env_step_s.get(record.iteration),
            }
            for record in profiled
        ],
        "kernel_launches_per_iteration": launches / max(1, own.count),
        "device_busy_s_per_iteration": device_busy_us / 1e6 / max(1, own.count),
        "median_iteration_s_all": statistics.median_high(r.iteration_s for r in outcome.records[1:])
        if len(outcome.records) > 1
        else None,
        "max_memory_allocated_gib": torch.cuda.max_memory_allocated() / 2**30 if on_cuda else None,
    }
    (own.out / f"rank{rank}_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0
