"""Launcher of the ``parity`` rules: one parity run, ``rlscale train_multigpu`` from scratch on leased GPUs (or CPU
ranks) or, with ``--nodes`` > 1, as one srun task per node; the run's manifest is copied to ``--output``.

Usage: parity.py --world_size N --device D [--granted_gpus G | --nodes M --rdzv_port P] --output FILE
       -- TRAIN_ARGS (with --log_root DIR, emptied before the run)
"""

import sys
from pathlib import Path

from rlscale.study.job_args import job_parser, parse_job_args
from rlscale.study.stages import parity

if __name__ == "__main__":
    parser = job_parser(__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True, help="where the run's manifest is copied")
    args, cell = parse_job_args(parser, sys.argv[1:])
    sys.exit(parity(cell, output=args.output, split=args.split, granted=args.granted_gpus, rdzv_port=args.rdzv_port))
