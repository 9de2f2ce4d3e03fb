"""``rlscale nccl_probe``: the smallest job that proves the ranks can all-reduce, run before any long job.

Each rank all-reduces a 1 MiB tensor holding its rank + 1 and checks the sum; rank 0 gathers the results and prints
one ``rank R ok`` line per rank and a verdict, so the default rank-0 console filter still shows them all.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.distributed as dist

from rlscale.dist import rank_info
from rlscale.launch.worker import run_rank

NUM_ELEMENTS = 256 * 1024
"""float32 elements all-reduced: 1 MiB, the size Isaac Lab's probe and the seed's measurements use."""


def probe(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rlscale nccl_probe (rank)")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    rank = rank_info()
    on_cpu = args.device == "cpu"
    device = torch.device("cpu") if on_cpu else torch.device("cuda", rank.local_rank % torch.cuda.device_count())
    if not on_cpu:
        torch.cuda.set_device(device)
    backend = "gloo" if on_cpu else "nccl"
    dist.init_process_group(backend, rank=rank.rank, world_size=rank.world_size)
    tensor = torch.full((NUM_ELEMENTS,), float(rank.rank + 1), device=device)
    dist.all_reduce(tensor)  # warm-up: the first collective also builds the communicator
    tensor.fill_(float(rank.rank + 1))
    started = time.perf_counter()
    dist.all_reduce(tensor)
    if not on_cpu:
        torch.cuda.synchronize(device)
    elapsed_us = (time.perf_counter() - started) * 1e6
    expected = rank.world_size * (rank.world_size + 1) / 2
    ok = bool(torch.all(tensor == expected).item())
    results: list[dict | None] = [None] * rank.world_size
    dist.all_gather_object(results, {"ok": ok, "device": str(device), "us": elapsed_us})
    dist.destroy_process_group()
    if rank.is_main:
        for index, result in enumerate(results):
            state = "ok" if result["ok"] else "FAILED (wrong sum)"
            print(f"rank {index} {state}  {backend} on {result['device']}, 1 MiB all-reduce {result['us']:.0f} us")
        failed = [index for index, result in enumerate(results) if not result["ok"]]
        print(
            f"nccl_probe: {'FAILED on rank(s) ' + str(failed) if failed else 'all ' + str(len(results)) + ' ranks ok'}"
        )
        return 1 if failed else 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_rank(probe, sys.argv[1:]))
