"""Launcher of the ``check_task`` rule: ``rlscale check_task`` on the study's device; the report is kept only if the
task conforms.

Usage: check_task.py --device D --num_envs N --gpus G --granted_gpus {resources.gpu} --output FILE -- --task TASK
"""

import sys
from pathlib import Path

from rlscale.study.job_args import job_parser, parse_job_args
from rlscale.study.stages import check_task

if __name__ == "__main__":
    parser = job_parser(__doc__.splitlines()[0], ranks=False)
    parser.add_argument("--num_envs", type=int, required=True, help="envs of the check")
    parser.add_argument("--gpus", type=int, required=True, help="GPUs the check needs (1 on cuda, 0 on cpu)")
    parser.add_argument("--output", type=Path, required=True, help="the check's report")
    args, cell = parse_job_args(parser, sys.argv[1:])
    sys.exit(
        check_task(
            str(cell.task),
            device=args.device,
            num_envs=args.num_envs,
            gpus=args.gpus,
            granted=args.granted_gpus,
            output=args.output,
        )
    )
