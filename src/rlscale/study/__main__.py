"""The one entry point of the study's rules: ``python -m rlscale.study run JOB [--granted_gpus N]`` runs a job, and
``python -m rlscale.study plan JOB --output FILE`` saves the command a train job will run.

``JOB`` is the job's :class:`~rlscale.study.job.Job` record as JSON, which the rule takes from the study's plan
(:meth:`rlscale.study.plan.StudyPlan.job`). A bad option or record is one line and exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rlscale.argparsing import OneLineParser
from rlscale.study.job import Job


def parser() -> OneLineParser:
    parser = OneLineParser(prog="python -m rlscale.study", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a study job")
    run.add_argument("job", type=job_record, help="the job's record (JSON)")
    run.add_argument("--granted_gpus", type=int, help="the rule's resources.gpu as Snakemake granted it (one node)")
    plan = commands.add_parser("plan", help="save the command a train job will run")
    plan.add_argument("job", type=job_record, help="the train job's record (JSON)")
    plan.add_argument("--output", type=Path, required=True, help="text file for the resolved command")
    for command in (run, plan):
        command.error = parser.error  # One line and exit 2, as the parent's.
    return parser


def job_record(text: str) -> Job:
    try:
        return Job.from_json(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main(argv: Sequence[str] | None = None) -> int:
    from rlscale.study import stages
    from rlscale.study.job_runner import requeue_if_asked, restore_restart_count

    command_line = parser()
    args = command_line.parse_args(argv)
    if args.command == "plan":
        return stages.plan(args.job, args.output)
    if args.job.nodes == 1 and args.granted_gpus is None:
        command_line.error("--granted_gpus is required for a single-node job: pass the rule's {resources.gpu}")
    restore_restart_count(os.environ)
    return requeue_if_asked(stages.STAGES[args.job.stage](args.job, args.granted_gpus), os.environ)


if __name__ == "__main__":
    sys.exit(main())
