"""The command line of a ``scripts/`` launcher: its own options before ``--``, the ``rlscale`` arguments after."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split a launcher's argv at the first ``--``: its own options before, the ``rlscale`` arguments after."""
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def job_parser(description: str, *, ranks: bool = True) -> argparse.ArgumentParser:
    """Return the parser of a ``scripts/`` launcher, with the options every rank-starting job shares."""
    parser = argparse.ArgumentParser(description=description, allow_abbrev=False)
    if ranks:
        parser.add_argument("--world_size", type=int, required=True, help="total ranks of the job")
        parser.add_argument("--device", choices=("cuda", "cpu"), required=True, help="where the ranks run")
        parser.add_argument("--nodes", type=int, default=1, help="nodes of the job (>1: one srun task per node)")
        parser.add_argument("--rdzv_port", type=int, default=29400, help="base port of a multi-node rendezvous")
    parser.add_argument(
        "--granted_gpus", type=int, help="the rule's resources.gpu as Snakemake granted it (single-node jobs)"
    )
    return parser


def parse_job_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """Parse a launcher's own options (before ``--``) and return them with the ``rlscale`` arguments after it."""
    own, rest = split_argv(argv)
    args = parser.parse_args(own)
    if getattr(args, "nodes", 1) == 1 and args.granted_gpus is None:
        parser.error("--granted_gpus is required for a single-node job: pass the rule's {resources.gpu}")
    return args, rest
