"""The Go1's evaluation falls against its training iteration, with its model's 1 solver iteration per physics step
and with the task's 3: one line per run, from committed ``rlscale evaluate`` results.

A standalone plot (nothing in rlscale imports it). Each run folder holds ``eval_model_<N>.json`` files and its
``manifest.json``, whose ``env_overrides`` say the solver iterations (absent: the model's 1).

    python tools/engines/falls_by_iteration.py results/h100/warp_learning/go1_seed* \\
        results/h200/warp_learning/go1_seed[0-9] --output results/h200/warp_learning/go1_falls.png
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODEL_ITERATIONS = 1
COLOURS = {1: "tab:red", 3: "tab:blue"}


def run_falls(folder: Path) -> tuple[int, list[tuple[int, float]]]:
    """The run's solver iterations and its (training iteration, fall rate) points, in order."""
    manifest = json.loads((folder / "manifest.json").read_text())
    solver = int(manifest["args"].get("env_overrides", {}).get("solver_iterations", MODEL_ITERATIONS))
    points = [
        (int(re.fullmatch(r"eval_model_(\d+)\.json", path.name)[1]), json.loads(path.read_text())["summary"])
        for path in folder.glob("eval_model_*.json")
    ]
    return solver, sorted((iteration, summary["fall_rate"]) for iteration, summary in points)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders with eval_model_<N>.json and manifest.json")
    parser.add_argument("--output", type=Path, required=True, help="the figure (.png or .svg)")
    args = parser.parse_args()
    figure, axes = plt.subplots(figsize=(7, 4))
    labelled: set[int] = set()
    for folder in args.runs:
        solver, points = run_falls(folder)
        iterations, falls = zip(*points, strict=True)
        label = None if solver in labelled else f"{solver} solver iteration{'s' if solver > 1 else ''}"
        labelled.add(solver)
        axes.plot(iterations, [100 * fall for fall in falls], marker="o", color=COLOURS.get(solver), label=label)
    axes.axhline(5, color="grey", linestyle="--", linewidth=1, label="target: under 5 %")
    axes.set(xlabel="training iteration (16 384 envs)", ylabel="evaluation episodes that fell (%)", ylim=(0, 100))
    axes.set_title("Go1 on MuJoCo Warp: falls of the deterministic policy, one line per seed")
    axes.legend()
    figure.tight_layout()
    figure.savefig(args.output, dpi=110)


if __name__ == "__main__":
    main()
