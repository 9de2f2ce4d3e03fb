"""The scaling model against the committed 2×H200 Cartpole study: ``rlscale benchmark predict`` run on each 1-rank
bundle, its 2-rank efficiency set beside the study's measured one (``scaling.csv``).

The study's probe timed one 1 MiB all-reduce per rank (``probe/ws2.txt``); the slower rank's time ``t`` is all the
link cost it tells. Every message of these policies is smaller than 1 MiB, so any latency and bandwidth that give ``t``
at 1 MiB cost them between two bounds: ``t`` all latency (``t / 2`` per ring step of 2 ranks, infinite bandwidth), or
``t`` all bandwidth (1 MiB / ``t``, no latency). The collectives per iteration come from 2-rank CPU runs of the same
libraries and policies (``scaling_model/collectives/``).

Usage: python tools/checks/quoted_scaling_model.py [--write]   (prints the table; --write rewrites check.csv)
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

from quoted_common import LIBRARY_ROWS, Quote, csv_text

from rlscale.cli import main as rlscale

ROOT = Path(__file__).resolve().parents[2]
H200 = Path("results/h200x2")
BUNDLES = H200 / "benchmark" / "training" / "Isaac-Cartpole-Direct"
MODEL = H200 / "scaling_model"
README = str(MODEL / "README.md")
BENCHMARKS_DOC = "docs/benchmarks.md"
ENVS = (4096, 65536)
SEEDS = (1, 2, 3)
BOUNDS = ("latency", "bandwidth")
COLUMNS = (
    "library",
    "envs_per_rank",
    "measured_efficiency",
    *(f"{b}_{f}" for b in BOUNDS for f in ("efficiency", "error")),
)


def probe_seconds(root: Path) -> float:
    """The slower rank's 1 MiB all-reduce in the study's 2-rank probe report."""
    times = re.findall(r"1 MiB all-reduce (\d+) us", (root / H200 / "probe" / "ws2.txt").read_text())
    return max(map(int, times)) * 1e-6


def cost_args(root: Path) -> dict[str, list[str]]:
    """``rlscale benchmark predict``'s cost options of each bound."""
    seconds = probe_seconds(root)
    return {
        "latency": ["--latency_us", f"{seconds / 2 * 1e6:g}", "--bandwidth_gbps", "inf"],
        "bandwidth": ["--latency_us", "0", "--bandwidth_gbps", f"{2**20 / seconds / 1e9:.3g}"],
    }


def predict_command(root: Path, library: str, envs: int, seed: int, bound: str) -> list[str]:
    bundle = BUNDLES / library / "ws1" / f"envs{envs}" / f"seed{seed}.json"
    collectives = MODEL / "collectives" / f"{library}.json"
    return [
        *("benchmark", "predict", "--bundle", str(bundle), "--collectives", str(collectives)),
        *cost_args(root)[bound],
        *("--gpus_per_node", "2"),
    ]


def predicted(root: Path, library: str, envs: int, seed: int, bound: str) -> dict:
    """The 2-rank prediction ``rlscale benchmark predict`` writes for one 1-rank bundle."""
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(root):
        output = Path(folder, "prediction.json")
        with contextlib.redirect_stdout(io.StringIO()):
            code = rlscale([*predict_command(root, library, envs, seed, bound), "--output", str(output)])
        if code != 0:
            raise RuntimeError(f"rlscale benchmark predict exited {code} for {library} {envs} seed {seed}")
        (two_ranks,) = [row for row in json.loads(output.read_text())["predictions"] if row["world_size"] == 2]
    return two_ranks


def measured_efficiency(root: Path) -> dict[tuple[str, int], float]:
    with (root / H200 / "scaling.csv").open() as table:
        rows = [row for row in csv.DictReader(table) if row["world_size"] == "2"]
    return {(row["rl_library"], int(row["num_envs_per_rank"])): float(row["efficiency"]) for row in rows}


def check_rows(root: Path = ROOT) -> list[dict]:
    """Per library and envs per rank: the measured efficiency, and each bound's predicted efficiency (the median over
    the three 1-rank seeds) with its error, (predicted − measured) / measured."""
    measured = measured_efficiency(root)
    rows = []
    for library, _ in LIBRARY_ROWS:
        for envs in ENVS:
            row = {"library": library, "envs_per_rank": envs, "measured_efficiency": measured[library, envs]}
            for bound in BOUNDS:
                predictions = [predicted(root, library, envs, seed, bound) for seed in SEEDS]
                efficiency = statistics.median(prediction["efficiency"] for prediction in predictions)
                row[f"{bound}_efficiency"] = efficiency
                row[f"{bound}_error"] = (efficiency - row["measured_efficiency"]) / row["measured_efficiency"]
                row[f"{bound}_communication_s"] = predictions[0]["communication_s"]  # the same for every seed
            rows.append(row)
    return rows


def table_row(row: dict) -> str:
    cells = [row["library"], f"{row['envs_per_rank']:,}".replace(",", " "), f"{row['measured_efficiency']:.2f}"]
    for bound in BOUNDS:
        cells += [f"{row[f'{bound}_efficiency']:.2f}", f"{row[f'{bound}_error']:+.0%}".replace("%", " %")]
    return "| " + " | ".join(cells) + " |"


def error_span(rows: list[dict], bound: str) -> str:
    errors = [row[f"{bound}_error"] for row in rows]
    return f"{min(errors):+.0%} to {max(errors):+.0%}".replace("%", " %")


def exchange_text(root: Path) -> str:
    """What the ranks exchange per iteration, per library, as the README words it."""
    parts = []
    for library, _ in LIBRARY_ROWS:
        bundle = json.loads((root / MODEL / "collectives" / f"{library}.json").read_text())
        kinds = bundle["ranks"]["per_rank"][0]["collectives"]
        reduces = f"{kinds['all_reduce']['calls']} all-reduces ({kinds['all_reduce']['bytes'] / 1e3:.0f} kB)"
        broadcasts = f" and {kinds['broadcast']['calls']} broadcasts" if "broadcast" in kinds else ""
        parts.append(f"{reduces}{broadcasts} with {library}")
    return f"{', '.join(parts[:-1])}, and {parts[-1]}"


def scaling_model_quotes(root: Path = ROOT) -> list[Quote]:
    rows = check_rows(root)
    seconds = probe_seconds(root)
    slowest = max(row["bandwidth_communication_s"] for row in rows)
    quotes = [
        Quote(README, "the collectives per iteration", exchange_text(root)),
        Quote(README, "the bandwidth bound's exchange", f"the exchange is under {slowest * 1e3:.1f} ms per iteration"),
        Quote(README, "the bounds' costs", f"`--latency_us {seconds / 2 * 1e6:g} --bandwidth_gbps inf`"),
        Quote(README, "the bounds' costs", f"`--latency_us 0 --bandwidth_gbps {2**20 / seconds / 1e9:.3g}`"),
    ]
    quotes += [
        Quote(README, f"the check's row of {row['library']}, {row['envs_per_rank']} envs", table_row(row))
        for row in rows
    ]
    quotes += [
        Quote(str(MODEL / "check.csv"), "a line of the check", line) for line in csv_text(rows, COLUMNS).splitlines()
    ]
    for document in (README, BENCHMARKS_DOC):
        quotes += [
            Quote(document, "the probe's 1 MiB all-reduce", f"{seconds * 1e6:.0f} µs"),
            Quote(document, "the latency bound's errors", f"latency bound: {error_span(rows, 'latency')}"),
            Quote(document, "the bandwidth bound's errors", f"bandwidth bound: {error_span(rows, 'bandwidth')}"),
        ]
    return quotes


def main(argv: list[str]) -> int:
    rows = check_rows()
    if "--write" in argv:
        (ROOT / MODEL / "check.csv").write_text(csv_text(rows, COLUMNS))
    print("\n".join(table_row(row) for row in rows))
    print(f"latency bound: {error_span(rows, 'latency')}; bandwidth bound: {error_span(rows, 'bandwidth')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
