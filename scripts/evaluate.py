"""Launcher of the ``evaluate`` rules: ``rlscale evaluate`` of one train or parity run's checkpoints, in one process
on a leased GPU (or a CPU core); their results go to ``--output``.

Usage: evaluate.py --device D --granted_gpus {resources.gpu} --record MANIFEST [--every_checkpoint] --output FILE
       -- EVALUATE_ARGS (--num_envs N --seed S)
"""

import sys
from pathlib import Path

from rlscale.study.job_args import job_parser, parse_job_args
from rlscale.study.stages import evaluate

if __name__ == "__main__":
    parser = job_parser(__doc__.splitlines()[0], ranks=False)
    parser.add_argument("--record", type=Path, required=True, help="the run's manifest (its train or parity record)")
    parser.add_argument(
        "--every_checkpoint", action="store_true", help="every checkpoint the run saved, not only its final one"
    )
    parser.add_argument("--output", type=Path, required=True, help="the results, one per checkpoint (JSON)")
    args, cell = parse_job_args(parser, sys.argv[1:])
    sys.exit(
        evaluate(
            cell,
            record=args.record,
            every_checkpoint=args.every_checkpoint,
            granted=args.granted_gpus,
            output=args.output,
        )
    )
