"""Launcher of the ``plan`` rule: save the command ``rlscale train_multigpu --dry_run`` resolves.

Usage: plan.py --visible_gpus N --output FILE -- LAUNCHER_AND_TRAIN_ARGS
"""

import argparse
import sys
from pathlib import Path

from rlscale.study.job_args import split_argv
from rlscale.study.stages import plan

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--visible_gpus", type=int, default=0, help="GPUs assumed visible on the job's node")
    parser.add_argument("--output", type=Path, required=True, help="text file for the resolved command")
    own, launcher_args = split_argv(sys.argv[1:])
    args = parser.parse_args(own)
    sys.exit(plan(launcher_args, args.output, args.visible_gpus))
