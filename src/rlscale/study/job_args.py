"""The command line of a ``scripts/`` launcher: its own options before ``--``, the cell's ``rlscale`` arguments after,
each read once into typed values (:class:`JobCell`, :class:`~rlscale.launch.ranks.NodeSplit`) for the stages."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlscale.argparsing import OneLineParser
from rlscale.launch.ranks import NodeSplit

DEVICES = ("cuda", "cpu")
"""Where a study job's ranks run (the study's ``device``, resolved)."""


@dataclass(frozen=True)
class JobCell:
    """What a study job runs: the ``rlscale`` arguments its rule wrote for the cell, with the values its stage reads.

    The arguments are passed on as written (the plan shows them, and a rerun of the same job compares them); the
    stage reads the cell's values from the fields, never from the arguments. The ``device`` comes from the launcher's
    own ``--device``: the stage adds it to the ``rlscale`` command (:meth:`argv`), so it is written once.
    """

    rlscale_args: tuple[str, ...]
    device: str
    task: str | None = None
    num_envs: int | None = None
    seeds: tuple[int, ...] = ()
    log_root: Path | None = None
    peer: bool = False
    unread_args: tuple[str, ...] = ()
    """The arguments without the ones above, for :meth:`per_seed_argv`."""

    def argv(self) -> list[str]:
        """The ``rlscale`` arguments of the cell: as the rule wrote them, then the device."""
        return [*self.rlscale_args, "--device", self.device]

    def per_seed_argv(self) -> list[list[str]]:
        """The arguments of each run of a benchmark cell: one with every seed, or with ``--peer`` one per seed.

        The peer baseline is a cold process of its own, so each of its figures stands beside one cold rlscale process
        (``rlscale benchmark`` refuses ``--peer`` with several seeds).
        """
        if not self.peer or not self.seeds:
            return [self.argv()]
        return [
            [
                *self.unread_args,
                *(["--task", self.task] if self.task else []),
                *([] if self.num_envs is None else ["--num_envs", str(self.num_envs)]),
                *("--seeds", str(seed), "--device", self.device, "--peer"),
                *([] if self.log_root is None else ["--log_root", str(self.log_root)]),
            ]
            for seed in self.seeds
        ]


def tracker_args(study: Mapping, stage: str) -> list[str]:
    """The tracker options of the study's runs of ``stage`` (train, benchmark, parity): with ``logger: wandb`` each
    run is grouped by the study's name, its job type the stage (rank 0 names and configures it after the cell); none
    with ``tensorboard``, so that the runs' arguments are the ones such a study always had."""
    if study["logger"] == "tensorboard":
        return []
    return [
        *("--logger", study["logger"], "--log_project_name", study["log_project_name"]),
        *("--log_group", study["study"], "--log_job_type", stage),
    ]


def cell_parser() -> OneLineParser:
    """The parser of the cell's values among the ``rlscale`` arguments (the others are passed on unread)."""
    parser = OneLineParser(prog="the job's rlscale arguments", allow_abbrev=False, add_help=False)
    parser.add_argument("--task")
    parser.add_argument("--num_envs", type=int)
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, dest="seeds", action="append")
    seeds.add_argument("--seeds", type=int, nargs="+")
    parser.add_argument("--log_root", type=Path)
    parser.add_argument("--peer", action="store_true")
    return parser


def read_cell(rlscale_args: Sequence[str], device: str) -> JobCell:
    """Read a job's cell from the ``rlscale`` arguments its rule wrote (after the launcher's ``--``)."""
    parser = cell_parser()
    values, unread = parser.parse_known_args(list(rlscale_args))
    if "--device" in unread:
        parser.error("--device is the launcher's own option: pass it before --, once")
    return JobCell(
        rlscale_args=tuple(rlscale_args),
        device=device,
        task=values.task,
        num_envs=values.num_envs,
        seeds=tuple(values.seeds or ()),
        log_root=values.log_root,
        peer=values.peer,
        unread_args=tuple(unread),
    )


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split a launcher's argv at the first ``--``: its own options before, the ``rlscale`` arguments after."""
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def job_parser(description: str, *, ranks: bool = True) -> OneLineParser:
    """Return the parser of a ``scripts/`` launcher, with the options every job shares (bad ones: one line, exit 2)."""
    parser = OneLineParser(description=description, allow_abbrev=False)
    parser.add_argument("--device", choices=DEVICES, required=True, help="where the ranks run")
    if ranks:
        parser.add_argument("--world_size", type=int, required=True, help="total ranks of the job")
        parser.add_argument("--nodes", type=int, default=1, help="nodes of the job (>1: one srun task per node)")
        parser.add_argument("--rdzv_port", type=int, default=29400, help="base port of a multi-node rendezvous")
    parser.add_argument(
        "--granted_gpus", type=int, help="the rule's resources.gpu as Snakemake granted it (single-node jobs)"
    )
    return parser


def parse_job_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[argparse.Namespace, JobCell]:
    """Parse a launcher's own options (before ``--``) and read the cell from the ``rlscale`` arguments after it.

    A rank-starting launcher's namespace has ``split``, the job's :class:`~rlscale.launch.ranks.NodeSplit`.
    """
    own, rest = split_argv(argv)
    args = parser.parse_args(own)
    if getattr(args, "nodes", 1) == 1 and args.granted_gpus is None:
        parser.error("--granted_gpus is required for a single-node job: pass the rule's {resources.gpu}")
    if hasattr(args, "world_size"):
        try:
            args.split = NodeSplit(args.world_size, args.nodes)
        except ValueError as error:
            parser.error(str(error))
    return args, read_cell(rest, args.device)
