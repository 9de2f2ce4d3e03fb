"""The scaling model's prediction of the robots' scaling study (config/studies/robots_scaling.yaml) at 1, 2, 4 and 8
GPUs of one host: ``rlscale benchmark predict`` on each committed 1-rank H200 training bundle of each robot, with the
collectives counted on two CPU ranks (``results/predictions/robots_scaling/collectives/``) and the two bounds of the
2×H200 link of ``tools/checks/quoted_scaling_model.py`` (latency alone, bandwidth alone, from the study's 1 MiB
all-reduce). Each figure is the median over the five repeats of a robot's profile.

Usage: python tools/checks/quoted_robots_scaling.py [--write]   (prints the table; --write rewrites predictions.csv)
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import sys
import tempfile
from pathlib import Path

from quoted_common import Quote, csv_text
from quoted_scaling_model import BOUNDS, cost_args

from rlscale.cli import main as rlscale

ROOT = Path(__file__).resolve().parents[2]
FOLDER = Path("results/predictions/robots_scaling")
README = str(FOLDER / "README.md")
WARP = Path("results/h200/warp_learning")
PROFILES = {
    "G1": ("Rlscale-G1-Flat", WARP / "g1_training" / "e16384_m8"),
    "Go1": ("Rlscale-Go1-Flat", WARP / "go1_training" / "iterations_3"),
}
"""Per robot: its task and the folder of its 1-rank profile's repeats."""
REPEATS = range(5)
GPUS_PER_NODE = 8
FIGURES = ("iteration_s", "throughput", "efficiency")
COLUMNS = ("robot", "world_size", *(f"{bound}_{figure}" for bound in BOUNDS for figure in FIGURES))


def predict_command(root: Path, robot: str, repeat: int, bound: str) -> list[str]:
    task, profile = PROFILES[robot]
    return [
        *("benchmark", "predict", "--bundle", str(profile / f"repeat{repeat}.json")),
        *("--collectives", str(FOLDER / "collectives" / f"{task}.json")),
        *cost_args(root)[bound],
        *("--gpus_per_node", str(GPUS_PER_NODE)),
    ]


def predicted(root: Path, robot: str, repeat: int, bound: str) -> list[dict]:
    """The rows (1, 2, 4 and 8 ranks) ``rlscale benchmark predict`` writes for one repeat of a robot's profile."""
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(root):
        output = Path(folder, "prediction.json")
        with contextlib.redirect_stdout(io.StringIO()):
            code = rlscale([*predict_command(root, robot, repeat, bound), "--output", str(output)])
        if code != 0:
            raise RuntimeError(f"rlscale benchmark predict exited {code} for the {robot}, repeat {repeat}")
        return json.loads(output.read_text())["predictions"]


def prediction_rows(root: Path = ROOT) -> list[dict]:
    """Per robot and world size: each bound's iteration time, global env steps/s and efficiency, each the median over
    the profile's repeats."""
    runs = {
        (robot, bound): [predicted(root, robot, repeat, bound) for repeat in REPEATS]
        for robot in PROFILES
        for bound in BOUNDS
    }
    rows = []
    for robot in PROFILES:
        for index, size in enumerate(row["world_size"] for row in runs[robot, BOUNDS[0]][0]):
            row = {"robot": robot, "world_size": size}
            for bound in BOUNDS:
                for figure in FIGURES:
                    row[f"{bound}_{figure}"] = statistics.median(run[index][figure] for run in runs[robot, bound])
            rows.append(row)
    return rows


def table_row(row: dict) -> str:
    cells = [row["robot"], str(row["world_size"])]
    for bound in BOUNDS:
        cells += [
            f"{row[f'{bound}_iteration_s'] * 1e3:.0f}",
            f"{row[f'{bound}_throughput'] / 1e3:,.0f}".replace(",", " "),
            f"{row[f'{bound}_efficiency']:.2f}",
        ]
    return "| " + " | ".join(cells) + " |"


def exchange_text(root: Path, robot: str) -> str:
    """A robot's all-reduces per iteration, as the README words them."""
    task, _ = PROFILES[robot]
    bundle = json.loads((root / FOLDER / "collectives" / f"{task}.json").read_text())
    reduces = bundle["ranks"]["per_rank"][0]["collectives"]["all_reduce"]
    return f"{reduces['calls']} all-reduces ({reduces['bytes'] / 1e6:.1f} MB"


def robots_scaling_quotes(root: Path = ROOT) -> list[Quote]:
    rows = prediction_rows(root)
    quotes = [Quote(README, f"the {robot}'s collectives", exchange_text(root, robot)) for robot in PROFILES]
    quotes += [
        Quote(README, f"the prediction of the {row['robot']} at {row['world_size']} GPUs", table_row(row))
        for row in rows
    ]
    lines = csv_text(rows, COLUMNS).splitlines()
    quotes += [Quote(str(FOLDER / "predictions.csv"), "a line of the prediction", line) for line in lines]
    return quotes


def main(argv: list[str]) -> int:
    rows = prediction_rows()
    if "--write" in argv:
        (ROOT / FOLDER / "predictions.csv").write_text(csv_text(rows, COLUMNS))
    print("\n".join(table_row(row) for row in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
