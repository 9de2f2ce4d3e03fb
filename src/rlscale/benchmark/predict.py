"""``rlscale benchmark predict``: the scaling model (:mod:`.scaling_model`) on a 1-rank training bundle, printed as a
table per world size and optionally written as JSON.

Every input is checked before anything is written: a bad one is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict
from pathlib import Path

from rlscale.argparsing import OneLineParser
from rlscale.benchmark.bundle import validation_errors, without_nan
from rlscale.benchmark.scaling_model import CostModel, LinkCost, Prediction, predict_shapes, stated_link
from rlscale.benchmark.scaling_profile import measured_collectives, profile_of, same_workload, stated_all_reduce
from rlscale.launch.probe_sweep import fit_sweep, read_probe_sweep
from rlscale.paths import write_atomic

PROG = "rlscale benchmark predict"


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog=PROG,
        description="Predict iteration time, throughput and weak-scaling efficiency at N ranks from a 1-rank "
        "training bundle and the collectives' cost (docs/benchmarks.md, 'Predicting larger jobs').",
    )
    parser.add_argument("--bundle", type=Path, required=True, help="a completed 1-rank training bundle")
    volume = parser.add_argument_group("what the ranks exchange per iteration (one of)")
    volume.add_argument(
        "--collectives",
        type=Path,
        help="a training bundle of 2 ranks or more, same task and library: the calls and bytes of its `ranks`",
    )
    volume.add_argument("--allreduce_bytes", type=float, help="bytes all-reduced per iteration, all calls together")
    volume.add_argument("--allreduce_calls", type=float, help="all-reduce calls per iteration")
    link = parser.add_argument_group("the collectives' cost within a node (one of)")
    link.add_argument("--probe", type=Path, help="a sweep written by `rlscale nccl_probe --sizes ... --output`")
    link.add_argument("--latency_us", type=float, help="latency per ring step, microseconds")
    link.add_argument("--bandwidth_gbps", type=float, help="bus bandwidth, GB/s (10^9 bytes/s; inf: latency alone)")
    between = parser.add_argument_group("between nodes (needed for --nodes above 1)")
    between.add_argument("--inter_node_bandwidth_gbps", type=float, help="bus bandwidth between nodes, GB/s")
    between.add_argument(
        "--inter_node_latency_us", type=float, help="latency per ring step between nodes (default: the intra-node one)"
    )
    parser.add_argument("--nodes", type=int, default=1, help="nodes of the largest job (default 1)")
    parser.add_argument("--gpus_per_node", type=int, required=True, help="ranks per node of the largest job")
    parser.add_argument("--output", type=Path, help="also write the inputs and predictions here as JSON")
    return parser


def _read_bundle(parser: OneLineParser, option: str, path: Path) -> dict:
    try:
        bundle = json.loads(path.read_text())
    except (OSError, ValueError) as error:  # ValueError: not JSON, or not text at all
        parser.error(f"{option} {path} is no bundle: {error}")
    errors = validation_errors(bundle)
    if errors:
        parser.error(f"{option} {path} is no valid bundle: {errors[0]}")
    return bundle


def _cost_model(parser: OneLineParser, args: argparse.Namespace) -> tuple[CostModel, str]:
    """The cost model and where its intra-node figures came from."""
    stated = args.latency_us is not None or args.bandwidth_gbps is not None
    if (args.probe is None) == (not stated):
        parser.error("give the collectives' cost: --probe FILE, or --latency_us and --bandwidth_gbps (not both)")
    try:
        if args.probe is not None:
            sweep = read_probe_sweep(args.probe)
            intra, source = LinkCost.from_fit(fit_sweep(sweep)), f"probe sweep {args.probe}"
        elif args.latency_us is None or args.bandwidth_gbps is None:
            parser.error("--latency_us and --bandwidth_gbps go together")
        else:
            intra, source = stated_link(args.latency_us, args.bandwidth_gbps), "stated"
        inter = None
        if args.inter_node_bandwidth_gbps is not None:
            latency_us = args.inter_node_latency_us if args.inter_node_latency_us is not None else intra.latency_s * 1e6
            inter = stated_link(latency_us, args.inter_node_bandwidth_gbps)
        elif args.inter_node_latency_us is not None:
            parser.error("--inter_node_latency_us needs --inter_node_bandwidth_gbps")
    except ValueError as error:
        parser.error(str(error))
    if args.nodes > 1 and inter is None:
        parser.error(f"--nodes {args.nodes} needs --inter_node_bandwidth_gbps: the ring runs at its slowest link")
    return CostModel(intra, inter), source


def _collectives(parser: OneLineParser, args: argparse.Namespace, bundle: dict) -> tuple[tuple, str]:
    """The collectives per iteration and where they came from."""
    stated = args.allreduce_bytes is not None or args.allreduce_calls is not None
    if (args.collectives is None) == (not stated):
        parser.error(
            "give what the ranks exchange: --collectives BUNDLE (2 ranks or more), or --allreduce_bytes and "
            "--allreduce_calls (not both); a 1-rank bundle calls no collective"
        )
    try:
        if args.collectives is None:
            if args.allreduce_bytes is None or args.allreduce_calls is None:
                parser.error("--allreduce_bytes and --allreduce_calls go together")
            return stated_all_reduce(args.allreduce_bytes, args.allreduce_calls), "stated"
        measured = _read_bundle(parser, "--collectives", args.collectives)
        mismatch = same_workload(bundle, measured)
        if mismatch is not None:
            parser.error(f"--collectives {args.collectives} is another workload: {mismatch}")
        return measured_collectives(measured), f"measured in {args.collectives}"
    except ValueError as error:
        parser.error(f"--collectives {args.collectives}: {error}")


def table_lines(predictions: list[Prediction]) -> list[str]:
    header = (
        f"{'nodes':>5} {'gpus/node':>9} {'ranks':>5} {'iteration ms':>12} {'comm ms':>9} {'comm share':>10} "
        f"{'env steps/s':>13} {'speedup':>8} {'efficiency':>10}"
    )
    rows = [
        f"{p.nodes:>5} {p.gpus_per_node:>9} {p.world_size:>5} {p.iteration_s * 1e3:>12.2f} "
        f"{p.communication_s * 1e3:>9.3f} {p.communication_share:>10.1%} {p.throughput:>13,.0f} {p.speedup:>8.2f} "
        f"{p.efficiency:>10.3f}"
        for p in predictions
    ]
    return [header, *rows]


def _link_text(link: LinkCost) -> str:
    bandwidth = "inf" if math.isinf(link.bandwidth_bytes_per_s) else f"{link.bandwidth_bytes_per_s / 1e9:.3g}"
    return f"{link.latency_s * 1e6:.3g} us per ring step, {bandwidth} GB/s"


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.gpus_per_node < 1:
        parser.error(f"--nodes and --gpus_per_node must be at least 1 (got {args.nodes} and {args.gpus_per_node})")
    if args.output is not None and args.output.is_dir():
        parser.error(f"--output {args.output} is a directory; name the file to write")
    bundle = _read_bundle(parser, "--bundle", args.bundle)
    cost, cost_source = _cost_model(parser, args)
    collectives, volume_source = _collectives(parser, args, bundle)
    try:
        profile = profile_of(bundle, collectives)
    except ValueError as error:
        parser.error(f"--bundle {args.bundle} {error}")
    predictions = predict_shapes(profile, cost, args.nodes, args.gpus_per_node)
    exchanged = ", ".join(f"{v.kind} {v.calls:g} calls {v.bytes:,.0f} B" for v in collectives) or "none"
    print(
        f"profile ({args.bundle}): collection {profile.collection_s * 1e3:.2f} ms + update "
        f"{profile.update_s * 1e3:.2f} ms per iteration, {profile.steps_per_iteration:,} env steps per rank"
    )
    print(f"collectives per iteration ({volume_source}): {exchanged}")
    print(f"within a node ({cost_source}): {_link_text(cost.intra_node)}")
    if cost.inter_node is not None:
        print(f"between nodes (stated): {_link_text(cost.inter_node)}")
    print("\n".join(table_lines(predictions)))
    if args.output is not None:
        report = {
            "bundle": str(args.bundle),
            "profile": asdict(profile),
            "collectives_source": volume_source,
            "cost_source": cost_source,
            "cost": asdict(cost),
            "predictions": [asdict(prediction) for prediction in predictions],
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(args.output, json.dumps(without_nan(report), indent=2) + "\n")
    return 0
