"""The parity figures docs/results.md and ``results/h200x2/parity/README.md`` quote, recomputed from the run records.

The records are every parity run's rank-0 manifest in ``results/h200x2/parity/records.tgz``, with its per-iteration
global env steps, elapsed wall time and metrics; the targets come from the overlay the runs used
(``config/studies/parity_h200x2.yaml``). Nothing is read from ``parity.csv``, the study's own table: the rules of
``docs/parity.md`` are restated here (the first iteration at the target, medians over seeds, the env-step ratio and
its 1.2 tolerance, the wall-time speedup with the range pairing one size's extremes with the other's).
``docs/parity.md`` quotes no figure of these runs. Used by ``tools/checks/quoted_figures.py``.
"""

from __future__ import annotations

import json
import statistics
import tarfile
from collections import defaultdict
from pathlib import Path

import yaml
from quoted_common import RESULTS_DOC, Quote

RESULTS = Path("results/h200x2/parity")
RECORDS = RESULTS / "records.tgz"
RUNS_IN_ARCHIVE = "results/parity_h200/parity/"
"""The parity runs' manifests in the archive (beside the validate jobs' and the logs)."""
OVERLAY = Path("config/studies/parity_h200x2.yaml")
TOLERANCE = 1.2
"""``learns as well``: N ranks need at most this many times one rank's env steps (the study's default)."""
CELLS = (
    ("Isaac-Cartpole-Direct", "rsl_rl", "Cartpole, rsl_rl", "rsl_rl"),
    ("Isaac-Cartpole-Direct", "rl_games", "Cartpole, rl_games", "rl_games"),
    ("Isaac-Cartpole-Direct", "skrl", "Cartpole, skrl", "skrl"),
    ("Rlscale-Ant", "rsl_rl", "Ant, rsl_rl", "Ant"),
)
"""Task, library, its row in the results README's table and its name in docs/results.md's sentence, in their order."""
PARITY_README = str(RESULTS / "README.md")


def runs(root: Path) -> dict[tuple[str, str, int], list[dict]]:
    """Each run's figures by (task, library, world size): env steps and wall time at the first iteration at the
    target, iterations up to it, and the run's mean seconds per iteration (last elapsed time over iterations)."""
    targets = yaml.safe_load((root / OVERLAY).read_text())["parity"]["target"]
    cells = defaultdict(list)
    with tarfile.open(root / RECORDS) as archive:
        for member in archive.getmembers():
            if not (member.name.startswith(RUNS_IN_ARCHIVE) and member.name.endswith(".json")):
                continue
            manifest = json.load(archive.extractfile(member))
            task, library = manifest["args"]["task"], manifest["args"]["rl_library"]
            target = targets[task]
            records = manifest["iterations"]

            def value(record: dict, metric: str = target["metric"]) -> float | None:
                return record[metric] if metric in record else record["metrics"].get(metric)

            reached = [index for index, record in enumerate(records) if (value(record) or 0) >= target["at_least"]]
            first = records[reached[0]] if reached else None
            cells[task, library, manifest["world_size"]].append(
                {
                    "reached": bool(reached),
                    "env_steps": first and first["env_steps"],
                    "wall_s": first and first["elapsed_s"],
                    "iterations": reached[0] + 1 if reached else None,
                    "s_per_iteration": records[-1]["elapsed_s"] / len(records),
                }
            )
    return cells


def spread(values: list[float], scale: float = 1.0) -> str:
    """``median [min–max]`` with two decimals."""
    return f"{statistics.median(values) / scale:.2f} [{min(values) / scale:.2f}–{max(values) / scale:.2f}]"


def parity_quotes(root: Path) -> list[Quote]:
    """Each quoted parity figure."""
    cells = runs(root)
    quotes, speedups, step_ratios, sentence = [], [], [], []
    for task, library, row, name in CELLS:
        one, two = cells[task, library, 1], cells[task, library, 2]
        steps = [[run["env_steps"] for run in side] for side in (one, two)]
        walls = [[run["wall_s"] for run in side] for side in (one, two)]
        step_ratio = statistics.median(steps[1]) / statistics.median(steps[0])
        speedup = statistics.median(walls[0]) / statistics.median(walls[1])
        low, high = min(walls[0]) / max(walls[1]), max(walls[0]) / min(walls[1])
        speedup_text = f"{speedup:.2f} [{low:.2f}–{high:.2f}]"
        speedups.append(speedup)
        step_ratios.append(step_ratio)
        sentence.append(f"{name} {speedup_text}")
        for size, label in ((1, f"| {row} | 1 |"), (2, "| | 2 |")):
            text = f"{label} {spread(steps[size - 1], 1e6)} | {spread(walls[size - 1])} |"
            if size == 2:
                learns = "yes" if step_ratio <= TOLERANCE else "no"
                text += f" {step_ratio:.2f} | {learns} | {speedup_text} |"
            quotes.append(Quote(PARITY_README, f"table, {row} at {size} GPU(s)", text))
    every = [run for cell in cells.values() for run in cell]
    reached = sum(run["reached"] for run in every)
    iterations = [run["iterations"] for run in every if run["reached"]]
    fastest, slowest = min(speedups), max(speedups)
    longer = f"{round((1 / slowest - 1) * 100)}–{round((1 / fastest - 1) * 100)} %"
    rsl_rl = [[run["s_per_iteration"] for run in cells["Isaac-Cartpole-Direct", "rsl_rl", size]] for size in (1, 2)]
    for text, what in (
        (f"All {reached} runs reached their target.", "runs that reached the target"),
        (f"{fastest:.2f}–{slowest:.2f} × as fast as one GPU's (that is, {longer} longer)", "speedup range"),
        (f"2 GPUs needed {min(step_ratios):.2f}–{max(step_ratios):.2f} × the env steps", "env-step ratio range"),
        (
            f"rsl_rl on Cartpole: {statistics.median(rsl_rl[0]):.2f} s per iteration at 1 GPU, "
            f"{statistics.median(rsl_rl[1]):.2f} s at 2",
            "rsl_rl's seconds per iteration",
        ),
        (f"the targets are reached within {min(iterations)}–{max(iterations)} iterations", "iterations to target"),
        (
            "in every cell the median was slower" if slowest < 1 else "in some cell the median was faster",
            "every cell slower",
        ),
        (
            'none of the four cells "learns as well"' if min(step_ratios) > TOLERANCE else "a cell learns as well",
            "learns as well",
        ),
    ):
        quotes.append(Quote(PARITY_README, what, text))
    readme = [
        (f"all {reached} runs reaching the target", "parity: runs that reached the target"),
        (
            f"was {fastest:.2f}–{slowest:.2f} × as fast as on one ({', '.join(sentence)};",
            "parity: speedups with their ranges",
        ),
        (f"2 GPUs needed {min(step_ratios):.2f}–{max(step_ratios):.2f} × the env steps", "parity: env-step ratios"),
        (f"targets reached in {min(iterations)}–{max(iterations)} iterations", "parity: iterations to target"),
    ]
    none_learns = min(step_ratios) > TOLERANCE
    readme.append(('so none "learns as well"' if none_learns else "a cell learns as well", "parity: learns as well"))
    quotes += [Quote(RESULTS_DOC, what, text) for text, what in readme]
    return quotes
