"""Launcher of the ``benchmark`` rules: ``rlscale benchmark <workflow>_multigpu`` on leased GPUs (or CPU ranks)
or, with ``--nodes`` > 1, as one srun task per node. Global rank 0 writes the bundle (``--output_path``).

Usage: benchmark.py --workflow W --world_size N --device D [--granted_gpus G | --nodes M --rdzv_port P]
       -- BENCHMARK_ARGS
"""

import sys

from rlscale.benchmark.workflows import WORKFLOWS
from rlscale.study.job_args import job_parser, parse_job_args
from rlscale.study.stages import benchmark

if __name__ == "__main__":
    parser = job_parser(__doc__.splitlines()[0])
    parser.add_argument("--workflow", choices=tuple(WORKFLOWS), required=True)
    args, cell = parse_job_args(parser, sys.argv[1:])
    sys.exit(benchmark(args.workflow, cell, split=args.split, granted=args.granted_gpus, rdzv_port=args.rdzv_port))
