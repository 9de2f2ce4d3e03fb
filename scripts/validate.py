"""Launcher of the ``validate`` rule: a short single-device ``rlscale train``, judged by
``rlscale.study.verdict.VALIDATION_CRITERION``; the verdict is written only if the run passes.

Usage: validate.py --device D --iterations N --gpus G --granted_gpus {resources.gpu} --run_root DIR --output FILE
       -- TRAIN_ARGS
"""

import sys
from pathlib import Path

from rlscale.study.job_args import job_parser, parse_job_args
from rlscale.study.stages import validate

if __name__ == "__main__":
    parser = job_parser(__doc__.splitlines()[0], ranks=False)
    parser.add_argument("--iterations", type=int, required=True, help="PPO iterations of the run")
    parser.add_argument("--gpus", type=int, required=True, help="GPUs the run needs (1 on cuda, 0 on cpu)")
    parser.add_argument("--run_root", type=Path, required=True, help="log root of the run (recreated)")
    parser.add_argument("--output", type=Path, required=True, help="verdict JSON")
    args, cell = parse_job_args(parser, sys.argv[1:])
    sys.exit(
        validate(
            cell,
            iterations=args.iterations,
            gpus=args.gpus,
            granted=args.granted_gpus,
            run_root=args.run_root,
            output=args.output,
        )
    )
