"""``rlscale nccl_probe``: the smallest job that proves the ranks can all-reduce, run before any long job.

Each rank all-reduces a 1 MiB tensor holding its rank + 1 and checks the sum; rank 0 gathers the results and prints
one ``rank R ok`` line per rank and a verdict, so the default rank-0 console filter still shows them all. Once its
process group has formed, a rank beats ``all_reduce`` for the launcher's hang watchdog, so ``--hang_timeout`` times its
collectives (the imports before are not timed). A ``probe_hang`` fault (:mod:`rlscale.faults`) blocks them there.
"""

from __future__ import annotations

import argparse
import sys
import time

from rlscale import heartbeat
from rlscale.argparsing import OneLineParser
from rlscale.device import Device
from rlscale.dist import rank_cuda_index, rank_info
from rlscale.faults import probe_fault_from_environment
from rlscale.run.rank import join_process_group

NUM_ELEMENTS = 256 * 1024
"""float32 elements all-reduced: 1 MiB, the size Isaac Lab's probe and the seed's measurements use."""


def parse_probe_args(argv: list[str], prog: str = "rlscale nccl_probe (rank)") -> argparse.Namespace:
    """Parse a rank's arguments (``--device cpu|cuda``, into a :class:`~rlscale.device.Device`); torch-free, so the
    launcher checks them before a launch."""
    parser = OneLineParser(prog=prog, allow_abbrev=False)
    parser.add_argument("--device", default="cuda", help="cpu (gloo) or cuda (NCCL, one GPU per local rank)")
    args = parser.parse_args(argv)
    try:
        args.device = Device.parse(args.device)
    except ValueError as error:
        parser.error(f"--device {error} (each rank uses its local GPU)")
    return args


def probe(argv: list[str]) -> int:
    import torch
    import torch.distributed as dist

    args = parse_probe_args(argv)
    rank = rank_info()
    fault = probe_fault_from_environment()
    on_cpu = not args.device.is_cuda
    device = torch.device("cpu") if on_cpu else torch.device("cuda", rank_cuda_index(rank, torch.cuda.device_count()))
    if not on_cpu:
        torch.cuda.set_device(device)
    join_process_group(rank, args.device)
    backend = dist.get_backend()
    tensor = torch.full((NUM_ELEMENTS,), float(rank.rank + 1), device=device)
    heartbeat.beat("all_reduce")
    if fault is not None:
        fault.trigger_if_due(rank.rank, rank.world_size)
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
    from rlscale.launch.worker import run_rank

    sys.exit(run_rank(probe, sys.argv[1:]))
