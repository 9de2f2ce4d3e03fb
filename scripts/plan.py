"""Launcher of the ``plan`` rule: save the command ``rlscale train_multigpu --dry_run`` resolves.

Usage: plan.py --visible_gpus N --device D --output FILE -- LAUNCHER_AND_TRAIN_ARGS
"""

import sys
from pathlib import Path

from rlscale.argparsing import OneLineParser
from rlscale.study.job_args import DEVICES, read_cell, split_argv
from rlscale.study.stages import plan

if __name__ == "__main__":
    parser = OneLineParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--visible_gpus", type=int, default=0, help="GPUs assumed visible on the job's node")
    parser.add_argument("--device", choices=DEVICES, required=True, help="where the ranks run")
    parser.add_argument("--output", type=Path, required=True, help="text file for the resolved command")
    own, launcher_args = split_argv(sys.argv[1:])
    args = parser.parse_args(own)
    sys.exit(plan(read_cell(launcher_args, args.device), args.output, args.visible_gpus))
