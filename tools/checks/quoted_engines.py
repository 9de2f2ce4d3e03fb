"""docs/robots.md's bake-off of MJX against MuJoCo Warp, recomputed from each card's committed comparison
(``results/<card>/engines_interleaved/``: ``physics_<robot>.json`` from ``tools/engines/physics_speed.py``, and the
training comparisons of ``config/compare/robots_engines.yaml`` in ``training*/``, whose completed runs are pooled), for
tools/checks/quoted_figures.py."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd
from quoted_common import Quote, rate

ROBOTS_DOC = "docs/robots.md"
BAKE_OFFS = {"H100": Path("results/h100/engines_interleaved"), "H200": Path("results/h200/engines_interleaved")}
"""Each card's bake-off folder, by the card's name in the table."""
ROBOTS = (("G1", "g1"), ("Go1", "go1"))


def bake_off_row(folder: Path, card: str, robot: str, name: str) -> str:
    """One robot's row: the engines' physics-alone and training medians, MJX then MuJoCo Warp, and Warp's gain."""
    physics = json.loads((folder / f"physics_{name}.json").read_text())["median_control_steps_per_s"]
    runs = pd.concat(pd.read_csv(table) for table in sorted(folder.glob("training*/comparison.csv")))
    runs = runs[runs.status == "completed"]
    training = {
        engine: statistics.median(runs[runs.variant == f"{name}_{engine}"].throughput) for engine in ("mjx", "warp")
    }
    cells = []
    for medians in (physics, training):
        cells += [rate(medians["mjx"]), rate(medians["warp"]), f"{medians['warp'] / medians['mjx']:.2f}×"]
    return f"| {card} | {robot} | {' | '.join(cells)} |"


def engine_quotes(root: Path) -> list[Quote]:
    return [
        Quote(ROBOTS_DOC, f"bake-off on the {card}, {robot}", bake_off_row(root / folder, card, robot, name))
        for card, folder in BAKE_OFFS.items()
        for robot, name in ROBOTS
    ]
