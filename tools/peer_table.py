"""rlscale ÷ peer table of training bundles made with ``benchmark training[_multigpu] --peer`` (issue 6).

Every bundle holds both measurements of one run: rlscale's and the hand-written torchrun + library script's, each
the median of its per-iteration total FPS. Per cell: the median ratio with its exact order-statistic interval over
its runs and that interval's coverage (``rlscale.benchmark.stats.median_interval``: the range, with less than 95 %,
for fewer than 6 runs), and the extremes. Bundles without a peer are skipped and counted.

Usage: python tools/peer_table.py BUNDLE_OR_DIR... > table.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from rlscale.benchmark.stats import median_interval
from rlscale.study.aggregate import bundle_record, read_bundle


def peer_rows(paths: list[Path]) -> tuple[pd.DataFrame, int]:
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


def main(arguments: list[str]) -> None:
    paths = []
    for argument in map(Path, arguments):
        paths += sorted(argument.rglob("*.json")) if argument.is_dir() else [argument]
    frame, skipped = peer_rows(paths)
    cell = ["rl_library", "world_size", "num_envs_per_rank"]
    table = frame.groupby(cell).agg(
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
    print(table.reset_index().to_markdown(index=False, floatfmt=".2f"))
    print(f"\n{len(frame)} bundles with a peer; {skipped} without one skipped.")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
