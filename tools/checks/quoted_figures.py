"""The figures the docs quote from committed results, recomputed from the files under ``results/``.

Each :class:`Quote` is one figure (or one table row) computed from the committed bundles, console logs and CSVs and
written exactly as its document quotes it; ``tests/test_quoted_figures.py`` checks that every document still contains
its quotes, so that a figure and its source cannot drift apart. Change a figure here, by changing the data or the
computation, and the test names the sentence to update.

The parity figures come from ``tools/checks/quoted_parity.py``, docs/performance.md's lever comparisons from
``tools/checks/quoted_speed_levers.py``, docs/robots.md's from ``tools/checks/quoted_robots.py`` and its bake-off of
the engines from ``tools/checks/quoted_engines.py``, the scaling model's check against the Cartpole study from
``tools/checks/quoted_scaling_model.py``, and its prediction of the robots on 2, 4 and 8 GPUs from
``tools/checks/quoted_robots_scaling.py``.

Usage: python tools/checks/quoted_figures.py   (prints each document, what the figure is, and the quoted text)
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/checks/ is no package: its sibling modules
from quoted_common import LIBRARY_ROWS, PERFORMANCE, RESULTS_DOC, Quote, rate, span, with_interval  # noqa: E402
from quoted_engines import engine_quotes  # noqa: E402
from quoted_parity import parity_quotes  # noqa: E402
from quoted_robots import robot_quotes  # noqa: E402
from quoted_robots_scaling import robots_scaling_quotes  # noqa: E402
from quoted_scaling_model import scaling_model_quotes  # noqa: E402
from quoted_speed_levers import speed_lever_quotes  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
H200 = Path("results/h200x2")
CARTPOLE = "Isaac-Cartpole-Direct"
PEER_BUNDLES = (H200 / "peer" / "bundles", H200 / "benchmark" / "training")
"""Every committed bundle with a peer: the 2-GPU and five 1-GPU peer runs, and the study's 1-GPU training runs."""
TRAINING_BUNDLES = (H200 / "benchmark" / "training", H200 / "peer" / "bundles")
"""The Cartpole training benchmarks at both world sizes, with and without a peer (same workload and machine)."""
LIKE_FOR_LIKE_BUNDLES = H200 / "peer_like_for_like" / "bundles"
"""rlscale beside its peer on the same graphed env step, 4096 envs, 5 interleaved repeats."""
GRAPH_GAIN_BUNDLES = H200 / "graph_gain" / "bundles"
"""``<library>/{graph,eager}/repeatN.json``: rlscale's training benchmark with and without ``--no_cuda_graph``."""
VALIDATION_LOGS = {
    ("rsl_rl", 1): "1gpu_rsl_rl_torch.log",
    ("rl_games", 1): "1gpu_rl_games_torch.log",
    ("skrl (torch)", 1): "1gpu_skrl_torch.log",
    ("skrl (JAX)", 1): "1gpu_skrl_jax.log",
    ("rsl_rl", 2): "2gpu_rsl_rl_torch.log",
    ("rl_games", 2): "2gpu_rl_games_torch.log",
    ("skrl (torch)", 2): "2gpu_skrl_torch.log",
    ("skrl (JAX)", 2): "2gpu_skrl_jax.log",
}
"""Row of docs/validation.md's table (path, GPUs) → its console log in results/validation/h200x2/."""
VALIDATION_FROM_ITERATION = 10
"""The throughput column leaves the first nine iterations out (startup and the first updates)."""
ANT_RSL_RL_WINDOWS = ((0, 9), (50, 99), (250, 299), (550, 606))
"""Iteration windows of the Ant README's rsl_rl table, both ends included."""
ANT_LAST_POINTS = 10


def spaced(number: int) -> str:
    """Integers as the docs write them: 4096, 8935, 10 347, 65 536."""
    return f"{number:,}".replace(",", " ") if number >= 10_000 else str(number)


def read_bundles(root: Path, folders: Iterable[Path]) -> list[dict]:
    return [json.loads(path.read_text()) for folder in folders for path in sorted((root / folder).rglob("*.json"))]


def cell(bundle: dict) -> tuple[str, int, int]:
    return bundle["run"]["framework"], bundle["extra"]["world_size"], bundle["extra"]["num_envs_per_rank"]


def memory_quotes(root: Path) -> list[Quote]:
    """docs/performance.md's memory target, at 4096 envs per rank: NVML's whole-device peaks, rank 0's RSS peaks
    (``resources``, sampled during rlscale's own run) and torch's own peak from the profile runs."""
    by_size = defaultdict(lambda: {"gpu": [], "rss": []})
    for bundle in read_bundles(root, TRAINING_BUNDLES):
        if bundle["run"]["task"] == CARTPOLE and bundle["extra"]["num_envs_per_rank"] == 4096:
            resources = by_size[bundle["extra"]["world_size"]]
            resources["gpu"] += [device["mem_gb"]["peak"] for device in bundle["resources"]["devices"].values()]
            resources["rss"].append(bundle["resources"]["ram_gb"]["peak"])
    torch_peak = max(
        json.loads(path.read_text())["max_memory_allocated_gib"]
        for path in (root / H200 / "profile").glob("*_4096*/rank*_summary.json")
    )
    text = (
        f"GPU {span(by_size[1]['gpu'])} GB per device at 1 GPU, {span(by_size[2]['gpu'])} GB at 2 (NVML, whole "
        f"device, peak), torch's own peak {torch_peak:.2f} GiB; rank-0 RSS peak {span(by_size[1]['rss'])} GB at 1 "
        f"GPU, {span(by_size[2]['rss'])} GB at 2"
    )
    return [Quote("docs/performance.md", "memory at 4096 envs per rank (targets table)", text)]


CONSOLE_LINE = re.compile(r"^\[rlscale\] it (\d+)/\d+\s+([\d,]+) steps/s .*ep_len (\S+)", re.MULTILINE)
"""``[rlscale] it I/N  R steps/s  return X  ep_len L ...``: rank 0's progress line of each iteration."""
COMPLETED_LINE = re.compile(
    r"^\[rlscale\] completed \d+ iterations in ([\d.]+)s; .*ranks in sync \((\d+)\)", re.MULTILINE
)


def validation_row(log: str) -> str:
    """A row of docs/validation.md's table after its first two cells: final and first-≥ 290 episode length, wall
    time, the median rate from :data:`VALIDATION_FROM_ITERATION` and the rank digests' verdict."""
    iterations = [
        (int(it), float(rate.replace(",", "")), float(length)) for it, rate, length in CONSOLE_LINE.findall(log)
    ]
    median = statistics.median(r for it, r, _ in iterations if it >= VALIDATION_FROM_ITERATION)
    first_290 = next(it for it, _, length in iterations if length >= 290)  # NaN, no episode ended, compares False
    wall, ranks = COMPLETED_LINE.search(log).groups()
    digests = "–" if ranks == "1" else "equal"  # the run fails instead when the ranks' digests differ
    return f"| {iterations[-1][2]:.1f} | {first_290} | {wall} s | {rate(median)} | {digests} |"


def validation_quotes(root: Path) -> list[Quote]:
    """docs/validation.md's table, from the runs' console logs."""
    document = "docs/validation.md"
    quotes = [Quote(document, "throughput column header", f"median env-steps/s (it ≥ {VALIDATION_FROM_ITERATION})")]
    for (path, gpus), name in VALIDATION_LOGS.items():
        row = validation_row((root / "results" / "validation" / "h200x2" / name).read_text())
        quotes.append(Quote(document, f"{path} on {gpus} GPU(s)", f"| {path} | {gpus} {row}"))
    return quotes


def ant_learning_quotes(root: Path) -> list[Quote]:
    """results/h200x2/ant/README.md: rsl_rl's window means, and rl_games' and skrl's last logged points."""
    curves = pd.read_csv(root / H200 / "ant" / "learning" / "curves.csv")
    document = "results/h200x2/ant/README.md"
    rsl_rl = curves[curves["library"] == "rsl_rl"].reset_index(drop=True)  # one row per iteration, from 0
    quotes = []
    for first, last in ANT_RSL_RL_WINDOWS:
        window = rsl_rl.iloc[first : last + 1]
        mean_return = window["mean_return"].mean()
        mean_return = f"{mean_return:.1f}" if abs(mean_return) >= 1 else f"{mean_return:.2f}"  # two digits at least
        text = f"| {first}–{last} | {mean_return.replace('-', '−')} | {window['forward_speed'].mean():.2f} |"
        quotes.append(Quote(document, f"rsl_rl, iterations {first}–{last}", text))
    returns = {library: curves[curves["library"] == library]["mean_return"] for library in ("rl_games", "skrl")}
    text = (
        f"rl_games raises the return to {returns['rl_games'].tail(ANT_LAST_POINTS).mean():.1f} and skrl to "
        f"{returns['skrl'].tail(ANT_LAST_POINTS).mean():.1f} (means of their last {ANT_LAST_POINTS} logged points; "
        f"rl_games' had peaked at {returns['rl_games'].max():.1f})"
    )
    quotes.append(Quote(document, "rl_games and skrl returns", text))
    speed = curves[curves["library"] == "skrl"]["forward_speed"]
    text = (
        f"({speed.head(ANT_LAST_POINTS).mean():.2f} m/s over its first {ANT_LAST_POINTS} logged points, "
        f"{speed.tail(ANT_LAST_POINTS).mean():.2f} over its last {ANT_LAST_POINTS})"
    )
    quotes.append(Quote(document, "skrl's forward speed", text))
    return quotes


def peer_cells(root: Path) -> dict[tuple[str, int, int], list[dict]]:
    """Cartpole bundles with a peer section, by (library, world size, envs per rank)."""
    cells = defaultdict(list)
    for bundle in read_bundles(root, PEER_BUNDLES):
        if bundle["runtime"].get("peer"):
            cells[cell(bundle)].append(bundle["runtime"]["peer"])
    return cells


def single_ratios(peers: dict[tuple[str, int, int], list[dict]]) -> list[float]:
    return [peer["ratio_total_fps_median"] for cell_peers in peers.values() for peer in cell_peers]


def readme_quotes(root: Path) -> list[Quote]:
    """docs/results.md's study table (medians over seeds of each bundle's effective rate, from ``scaling.csv``) with its
    peer ratios, and the rlscale medians of the 2-GPU peer bundles; the README shows rsl_rl's rows."""
    table = pd.read_csv(root / H200 / "scaling.csv").set_index(["rl_library", "num_envs_per_rank", "world_size"])
    peers = peer_cells(root)
    quotes, rlscale_medians = [], []
    for library, name in LIBRARY_ROWS:
        for count in (4096, 65536):
            one, two = table.loc[(library, count, 1)], table.loc[(library, count, 2)]
            ratios = [
                statistics.median(peer["ratio_total_fps_median"] for peer in peers[(library, size, count)])
                for size in (1, 2)
            ]
            text = (
                f"| {name} | {spaced(count)} | {rate(one['global_fps_median'])} ({rate(one['global_fps_iqr'])}) | "
                f"{rate(two['global_fps_median'])} ({rate(two['global_fps_iqr'])}) | {two['efficiency']:.2f} | "
                f"{ratios[0]:.2f} | {ratios[1]:.2f} |"
            )
            documents = (RESULTS_DOC, "README.md") if library == "rsl_rl" else (RESULTS_DOC,)
            quotes += [Quote(document, f"study table, {library} at {count} envs", text) for document in documents]
            medians = [peer["rlscale_total_fps_median"] for peer in peers[(library, 2, count)]]
            rlscale_medians.append(rate(statistics.median(medians)))
    text = f"{', '.join(rlscale_medians[:-1])} and {rlscale_medians[-1]} env-steps/s down the rows"
    quotes.append(Quote(RESULTS_DOC, "rlscale's own medians in the 2-GPU peer bundles", text))
    quotes.append(Quote(RESULTS_DOC, "single-run ratio range", f"single runs range {span(single_ratios(peers))}"))
    return quotes


def performance_peer_quotes(root: Path) -> list[Quote]:
    """docs/performance.md's rlscale ÷ peer table: median (min–max) per cell, and the 2-GPU medians in k."""
    peers = peer_cells(root)
    quotes = []
    for library, _ in LIBRARY_ROWS:
        for count in (4096, 65536):
            spreads = []
            for size in (1, 2):
                ratios = [peer["ratio_total_fps_median"] for peer in peers[(library, size, count)]]
                spreads.append(f"{statistics.median(ratios):.2f} ({span(ratios)})")
            two = peers[(library, 2, count)]
            kfps = [
                round(statistics.median(peer[key] for peer in two) / 1e3)
                for key in ("rlscale_total_fps_median", "total_fps_median")
            ]
            kfps_text = " / ".join(spaced(value) for value in kfps)
            text = f"| {library} | {spaced(count)} | {spreads[0]} | {spreads[1]} | {kfps_text} |"
            quotes.append(Quote("docs/performance.md", f"peer table, {library} at {count} envs", text))
    cell_medians = {
        size: [
            statistics.median(peer["ratio_total_fps_median"] for peer in cell_peers)
            for (_, world_size, _), cell_peers in peers.items()
            if world_size == size
        ]
        for size in (1, 2)
    }
    text = f"medians {span(cell_medians[1])} at 1 GPU and {span(cell_medians[2])} at 2"
    quotes.append(Quote("docs/performance.md", "range of the cells' median ratios", text))
    singles = single_ratios(peers)
    below = [ratio for ratio in singles if ratio < 1]
    text = f"Single runs fall to {span(below)} in {len(below)} of the {len(singles)}"
    quotes.append(Quote("docs/performance.md", "single runs below 1", text))
    peer_rsl_rl = [
        rate(statistics.median(peer["total_fps_median"] for peer in peers[("rsl_rl", size, 4096)])) for size in (1, 2)
    ]
    text = f"({peer_rsl_rl[0]} on 1 GPU, {peer_rsl_rl[1]} on 2, median)"
    quotes.append(Quote("docs/performance.md", "the peer's own rsl_rl rates at 4096 envs", text))
    return quotes


def graph_gain_quotes(root: Path) -> list[Quote]:
    """docs/performance.md's CUDA graph vs eager env step: the profile runs' median iteration times (Isaac-Cartpole,
    4096 envs, 1 GPU, one run each way)."""

    def median_iteration_s(run: str) -> float:
        summary = root / H200 / "profile" / run / "rank0_summary.json"
        return json.loads(summary.read_text())["median_iteration_s_all"]

    document = "docs/performance.md"
    quotes, gains = [], {}
    for library, label in (("rsl_rl", "rsl_rl iteration, 4096 envs, 1 GPU"), ("rl_games", "rl_games iteration"),
                           ("skrl", "skrl iteration")):  # fmt: skip
        eager, graphed = median_iteration_s(f"{library}_1gpu_4096_eager"), median_iteration_s(f"{library}_1gpu_4096")
        gains[library] = f"{(eager / graphed - 1) * 100:.0f} %"
        throughput = " throughput" if library == "rsl_rl" else ""
        text = f"| {label} | {eager:.3f} s | {graphed:.3f} s (+{gains[library]}{throughput}) |"
        quotes.append(Quote(document, f"{library}: iteration eager against graphed", text))
    text = f"+{gains['rsl_rl']} rsl_rl, +{gains['rl_games']} rl_games, +{gains['skrl']} skrl throughput"
    quotes.append(Quote(document, "CUDA graph vs eager env step", text))
    text = f"by {gains['rsl_rl']} for rsl_rl, {gains['rl_games']} for rl_games and {gains['skrl']} for skrl"
    quotes.append(Quote(document, "the graph's gain beside the peer ratios", text))
    return quotes


def like_for_like_quotes(root: Path) -> list[Quote]:
    """docs/performance.md's like-for-like peer table: per library and world size, the ratio with its interval and
    the medians of rlscale's and the peer's median per-iteration rates."""
    cells = defaultdict(list)
    for bundle in read_bundles(root, (LIKE_FOR_LIKE_BUNDLES,)):
        cells[cell(bundle)].append(bundle["runtime"]["peer"])
    quotes = []
    for library, _ in LIBRARY_ROWS:
        columns = []
        for size in (1, 2):
            peers = cells[(library, size, 4096)]
            kfps = [
                round(statistics.median(peer[key] for peer in peers) / 1e3)
                for key in ("rlscale_total_fps_median", "total_fps_median")
            ]
            columns += [with_interval(peer["ratio_total_fps_median"] for peer in peers), f"{kfps[0]} / {kfps[1]}"]
        text = f"| {library} | {' | '.join(columns)} |"
        quotes.append(Quote("docs/performance.md", f"like-for-like peer row, {library}", text))

    def medians(library: str, *sizes: int) -> str:
        return span([statistics.median(peer["ratio_total_fps_median"] for peer in cells[(library, size, 4096)])
                     for size in sizes])  # fmt: skip

    summary = (
        f"{medians('rl_games', 1, 2)} for rl_games, {medians('rsl_rl', 2)} for rsl_rl at 2 GPUs, but "
        f"{medians('rsl_rl', 1)} for rsl_rl at 1 GPU and {medians('skrl', 1, 2)} for skrl"
    )
    quotes += [Quote(document, "like-for-like peer medians", summary) for document in (RESULTS_DOC, PERFORMANCE)]
    return quotes


def measured_graph_gain_quotes(root: Path) -> list[Quote]:
    """docs/performance.md's interleaved graph-vs-eager table: graph ÷ eager of each repeat's effective rate."""
    quotes, median_gains = [], []
    for library, _ in LIBRARY_ROWS:
        rates = {
            step: [
                json.loads(path.read_text())["runtime"]["total_fps"]["mean"]
                for path in sorted((root / GRAPH_GAIN_BUNDLES / library / step).glob("repeat*.json"))
            ]
            for step in ("graph", "eager")
        }
        gains = [graph / eager for graph, eager in zip(rates["graph"], rates["eager"], strict=True)]
        kfps = " / ".join(str(round(statistics.median(rates[step]) / 1e3)) for step in ("graph", "eager"))
        text = f"| {library} | {with_interval(gains)} | {kfps} |"
        quotes.append(Quote(PERFORMANCE, f"measured graph gain, {library}", text))
        median_gains.append(statistics.median(gains))
    quotes.append(Quote(RESULTS_DOC, "range of the measured graph gains", f"gain (×{span(median_gains)})"))
    return quotes


def check_task_replay_quotes(root: Path) -> list[Quote]:
    """docs/tasks.md's contract-check times, replayed and eager, from the H100's console output."""
    log = (root / "results/h100/check_task_replay/check_task_cuda.txt").read_text()
    seconds = {
        (robot, mode): float(value) for robot, mode, value in re.findall(r"Rlscale-(\w+)-Flat (\w+): ([\d.]+) s", log)
    }
    text = (
        f"from {seconds['Go1', 'eager']:.0f} s (Go1) and {seconds['G1', 'eager']:.0f} s (G1) eager to "
        f"{seconds['Go1', 'replayed']:.0f} and {seconds['G1', 'replayed']:.0f} s"
    )
    return [Quote("docs/tasks.md", "check_task replayed and eager", text)]


def all_quotes(root: Path = ROOT) -> list[Quote]:
    return [
        *memory_quotes(root),
        *validation_quotes(root),
        *check_task_replay_quotes(root),
        *ant_learning_quotes(root),
        *readme_quotes(root),
        *performance_peer_quotes(root),
        *graph_gain_quotes(root),
        *like_for_like_quotes(root),
        *measured_graph_gain_quotes(root),
        *speed_lever_quotes(root),
        *parity_quotes(root),
        *robot_quotes(root),
        *engine_quotes(root),
        *scaling_model_quotes(root),
        *robots_scaling_quotes(root),
    ]


def main() -> None:
    for quote in all_quotes():
        print(f"{quote.document}: {quote.what}: {quote.text}")


if __name__ == "__main__":
    sys.exit(main())
