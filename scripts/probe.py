"""Launcher of the ``probe`` rules: ``rlscale nccl_probe`` at a world size, on leased GPUs (or CPU ranks) or,
with ``--nodes`` > 1, as one srun task per node.

Usage: probe.py --world_size N --device D [--granted_gpus {resources.gpu} | --nodes M --rdzv_port P] --output FILE
"""

import sys
from pathlib import Path

from rlscale.study.job_args import job_parser, parse_job_args
from rlscale.study.stages import probe

if __name__ == "__main__":
    parser = job_parser(__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True, help="the probe's report")
    args, _ = parse_job_args(parser, sys.argv[1:])
    sys.exit(
        probe(
            split=args.split,
            device=args.device,
            granted=args.granted_gpus,
            output=args.output,
            rdzv_port=args.rdzv_port,
        )
    )
