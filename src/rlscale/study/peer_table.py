"""``rlscale peer_table``: the rlscale ÷ peer table of training bundles made with ``benchmark training[_multigpu]
--peer``.

Every such bundle holds both measurements of one run: rlscale's and the hand-written torchrun + library script's, each
the median of its per-iteration total FPS. Per cell: the median ratio with its exact order-statistic interval over
its runs and that interval's coverage (:func:`rlscale.benchmark.stats.median_interval`: the range, with less than
95 %, for fewer than 6 runs), and the extremes. Bundles without a peer are skipped and counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from rlscale.argparsing import OneLineParser
from rlscale.benchmark.stats import median_interval
from rlscale.study.aggregate import bundle_record, read_bundle

CELL = ["rl_library", "world_size", "num_envs_per_rank"]


def peer_rows(paths: Sequence[Path]) -> tuple[pd.DataFrame, int]:
    """One record per bundle with a peer (its cell, seed, ratio and both medians), and how many had none."""
    rows, skipped = [], 0
    for path in paths:
        bundle = read_bundle(path)
        peer = bundle["runtime"].get("peer")
        if not peer:
            skipped += 1
            continue
        record = bundle_record(bundle, path)
        record.update(rlscale_fps=peer["rlscale_total_fps_median"], peer_fps=peer["total_fps_median"])
        rows.append(record)
    return pd.DataFrame(rows), skipped


def peer_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per cell: runs, seeds, the median ratio with its interval and coverage, its extremes, both medians (k/s)."""
    table = frame.groupby(CELL).agg(
        runs=("peer_ratio", "size"),
        seeds=("seed", lambda seeds: ",".join(map(str, sorted(seeds)))),
        rlscale_fps_median=("rlscale_fps", "median"),
        peer_fps_median=("peer_fps", "median"),
        ratio_median=("peer_ratio", "median"),
        ratio_ci_low=("peer_ratio", lambda ratios: median_interval(list(ratios)).low),
        ratio_ci_high=("peer_ratio", lambda ratios: median_interval(list(ratios)).high),
        ratio_ci_coverage=("peer_ratio", lambda ratios: median_interval(list(ratios)).coverage),
        ratio_min=("peer_ratio", "min"),
        ratio_max=("peer_ratio", "max"),
    )
    for column in ("rlscale_fps_median", "peer_fps_median"):  # thousands of env-steps/s
        table[column.replace("fps", "kfps")] = table.pop(column).div(1e3).round().astype(int)
    return table.reset_index()


def main(argv: Sequence[str]) -> int:
    parser = OneLineParser(
        prog="rlscale peer_table",
        description="Tabulate rlscale ÷ peer per cell (library, world size, envs per rank) of benchmark bundles made "
        "with --peer, as Markdown on stdout.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="BUNDLE_OR_DIR", help="bundles, or folders of them")
    args = parser.parse_args(argv)
    paths = []
    for argument in args.paths:
        if not argument.exists():
            parser.error(f"{argument} does not exist")
        paths += sorted(argument.rglob("*.json")) if argument.is_dir() else [argument]
    frame, skipped = peer_rows(paths)
    if frame.empty:
        parser.error(f"none of the {len(paths)} bundle(s) holds a peer measurement (made with --peer)")
    print(peer_table(frame).to_markdown(index=False, floatfmt=".2f"))
    print(f"\n{len(frame)} bundles with a peer; {skipped} without one skipped.")
    return 0
