"""``rlscale nccl_probe``: the smallest job that proves the ranks can all-reduce, run before any long job.

Each rank all-reduces a 1 MiB tensor holding its rank + 1 and checks the sum; rank 0 gathers the results and prints
one ``rank R ok`` line per rank and a verdict, so the default rank-0 console filter still shows them all. Once its
process group has formed, a rank beats ``all_reduce`` for the launcher's hang watchdog, so ``--hang_timeout`` times its
collectives (the imports before are not timed). A ``probe_hang`` fault (:mod:`rlscale.faults`) blocks them there.

``--sizes`` sweeps message sizes instead: per size, one untimed all-reduce, then ``--repeats`` timed ones, each after a
barrier so that it times the transfer rather than ranks arriving apart. Rank 0 prints the slowest rank's median per
size and the fit of ``latency + size / bandwidth`` (:mod:`.probe_sweep`), and with ``--output`` writes the sweep.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from statistics import median

from rlscale import heartbeat
from rlscale.argparsing import OneLineParser
from rlscale.device import Device
from rlscale.dist import rank_cuda_index, rank_info
from rlscale.faults import probe_fault_from_environment
from rlscale.launch.probe_sweep import ELEMENT_BYTES, ProbeSweep, fit_sweep, parse_size, size_text, write_probe_sweep
from rlscale.run.rank import join_process_group

CHECK_BYTES = 1024**2
"""The default probe's message: 1 MiB, the size Isaac Lab's probe and the seed's measurements use."""


def parse_probe_args(
    argv: list[str], prog: str = "rlscale nccl_probe (rank)", other_options: tuple[str, ...] = ()
) -> argparse.Namespace:
    """Parse a rank's arguments (``--device cpu|cuda``, into a :class:`~rlscale.device.Device`; ``--sizes`` into
    bytes); torch-free, so the launcher checks them before a launch. ``other_options``: the launcher's own
    (:attr:`~rlscale.argparsing.OneLineParser.other_options`)."""
    parser = OneLineParser(prog=prog)
    parser.other_options = other_options
    parser.add_argument("--device", default="cuda", help="cpu (gloo) or cuda (NCCL, one GPU per local rank)")
    parser.add_argument(
        "--sizes",
        nargs="+",
        metavar="SIZE",
        help="sweep these message sizes (4KiB 64KiB 1MiB 16MiB 64MiB; bytes, KiB, MiB or GiB) instead of one 1 MiB "
        "all-reduce",
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed all-reduces per size of a sweep (default 5)")
    parser.add_argument("--output", type=Path, help="rank 0 writes the sizes and times here as JSON")
    args = parser.parse_args(argv)
    try:
        args.device = Device.parse(args.device)
    except ValueError as error:
        parser.error(f"--device {error} (each rank uses its local GPU)")
    try:
        args.sizes = sorted({parse_size(size) for size in args.sizes}) if args.sizes else None
    except ValueError as error:
        parser.error(f"--sizes: {error}")
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1 (got {args.repeats})")
    if args.output is not None and args.sizes is None:
        parser.error("--output writes a sweep: give --sizes too")
    if args.output is not None and args.output.is_dir():
        parser.error(f"--output {args.output} is a directory; name the file to write")
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
    heartbeat.beat("all_reduce")
    if fault is not None:
        fault.trigger_if_due(rank.rank, rank.world_size)
    expected = rank.world_size * (rank.world_size + 1) / 2
    sweep = args.sizes is not None
    sizes, repeats = (args.sizes, args.repeats) if sweep else ([CHECK_BYTES], 1)
    ok, medians = True, []
    for size in sizes:
        tensor = torch.empty(size // ELEMENT_BYTES, device=device)
        times = []
        for attempt in range(repeats + 1):  # the first is untimed: it may build the communicator or a buffer
            tensor.fill_(float(rank.rank + 1))
            dist.barrier()
            if not on_cpu:
                torch.cuda.synchronize(device)
            started = time.perf_counter()
            dist.all_reduce(tensor)
            if not on_cpu:
                torch.cuda.synchronize(device)
            if attempt:
                times.append(time.perf_counter() - started)
            ok = ok and bool(torch.all(tensor == expected).item())
        medians.append(median(times))
    results: list[dict | None] = [None] * rank.world_size
    dist.all_gather_object(results, {"ok": ok, "device": str(device), "seconds": medians})
    dist.destroy_process_group()
    if not rank.is_main:
        return 0 if ok else 1
    for index, result in enumerate(results):
        state = "ok" if result["ok"] else "FAILED (wrong sum)"
        timing = "" if sweep else f", 1 MiB all-reduce {result['seconds'][0] * 1e6:.0f} us"
        print(f"rank {index} {state}  {backend} on {result['device']}{timing}")
    if sweep:
        report_sweep(
            ProbeSweep(
                backend=backend,
                device=args.device.kind,
                world_size=rank.world_size,
                repeats=repeats,
                sizes_bytes=list(sizes),
                seconds=[max(result["seconds"][index] for result in results) for index in range(len(sizes))],
                seconds_per_rank=[[result["seconds"][index] for result in results] for index in range(len(sizes))],
            ),
            args.output,
        )
    failed = [index for index, result in enumerate(results) if not result["ok"]]
    print(f"nccl_probe: {'FAILED on rank(s) ' + str(failed) if failed else 'all ' + str(len(results)) + ' ranks ok'}")
    return 1 if failed else 0


def report_sweep(sweep: ProbeSweep, output: Path | None) -> None:
    """Print the sweep and its fit (or why there is none), and write it to ``output`` when given."""
    for size, seconds in zip(sweep.sizes_bytes, sweep.seconds, strict=True):
        print(f"all-reduce {size_text(size):>8}: {seconds * 1e6:10.1f} us (slowest rank, median of {sweep.repeats})")
    try:
        fit = fit_sweep(sweep)
        print(
            f"fit: {fit.latency_s * 1e6:.1f} us + size / {fit.bandwidth_bytes_per_s / 1e9:.3g} GB/s "
            f"(algorithm bandwidth; rms error {fit.rms_relative_error:.1%})"
        )
    except ValueError as error:
        print(f"no fit: {error}")
    if output is not None:
        write_probe_sweep(sweep, output)
        print(f"sweep written to {output}")


if __name__ == "__main__":
    from rlscale.launch.worker import run_rank

    sys.exit(run_rank(probe, sys.argv[1:]))
