"""``rlscale parity_so_far``: the parity tables and plots of the runs a study has finished so far, as its
``parity_aggregate`` rule writes them once every run is done, for a study stopped part-way.

RESULTS is the study's ``results/<study>`` folder (or a copy of it); the runs found under its ``parity/`` are matched
to the cells of the study's plan: its config files merged in order, as ``snakemake --configfile A B`` merges them, and
``device`` set as the study ran (on CPU the plan leaves the robots out). Run it from the checkout, whose
``workflow/schemas/config.schema.yaml`` fills the defaults.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from rlscale.argparsing import OneLineParser
from rlscale.study.config import StudyConfigError, validated_config
from rlscale.study.parity import parity_cells
from rlscale.study.summary import write_parity_outputs

SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"


def merged(paths: Sequence[Path]) -> dict:
    """The config files merged in order, mappings key by key, as Snakemake merges ``--configfile`` files."""
    from snakemake.utils import update_config

    config: dict = {}
    for path in paths:
        update_config(config, yaml.safe_load(path.read_text()))
    return config


def main(argv: Sequence[str]) -> int:
    parser = OneLineParser(
        prog="rlscale parity_so_far",
        description="Write parity.csv, parity_runs.csv and the parity plots of the parity runs a study has finished.",
    )
    parser.add_argument("results", type=Path, help="the study's results/<study> folder")
    parser.add_argument("out", type=Path, help="where parity.csv, parity_runs.csv and the plots go")
    parser.add_argument(
        "--config", type=Path, nargs="+", default=[Path("config/config.yaml")], help="the study's config files"
    )
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="the study's device (default: cuda)")
    parser.add_argument("--schema", type=Path, default=SCHEMA, help=f"the study's config schema (default {SCHEMA})")
    args = parser.parse_args(argv)
    try:
        config = merged(args.config)
        # Planned as on the host it ran on, not this one: a node's GPUs visible, a core per rank.
        node = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, range(config.get("gpus_per_node", 8))))}
        ranks = max(config.get("world_sizes", [1]))
        study = validated_config({**config, "device": args.device}, args.schema, node, cpu_count=lambda: ranks)
    except (OSError, yaml.YAMLError, StudyConfigError) as error:
        parser.error(" ".join(str(error).split()))  # a YAML error spans lines
    prefix = f"results/{study['study']}/"
    cells = parity_cells(study, [entry["name"] for entry in study["libraries"]])
    finished = [cell for cell in cells if (args.results / cell["path"].removeprefix(prefix)).exists()]
    if not finished:
        parser.error(f"{args.results}: none of the plan's {len(cells)} parity runs is there")
    args.out.mkdir(parents=True, exist_ok=True)
    write_parity_outputs(
        records=[args.results / cell["path"].removeprefix(prefix) for cell in finished],
        cells=finished,
        tolerance=study["parity"]["tolerance"],
        checkpoints=study["parity"]["checkpoints"],
        parity_csv=args.out / "parity.csv",
        runs_csv=args.out / "parity_runs.csv",
        plots={name: args.out / f"parity_{name}.png" for name in ("env_steps", "wall_time")},
    )
    print(f"{len(finished)} of the plan's {len(cells)} parity runs: {args.out}")
    return 0
