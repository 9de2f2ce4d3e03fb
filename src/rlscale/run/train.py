"""``rlscale train``: one training run of a task with one library, on one device or as one rank of a job.

A rank of ``train_multigpu`` runs the spec its launcher resolved (:func:`rlscale.run.spec.spec_from_environment`);
any other process resolves its own from its command line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rlscale.device import Device
from rlscale.paths import one_line_on_full_disk
from rlscale.resume import continue_command, start_over_note
from rlscale.run.args import build_parser, parse_command_line
from rlscale.run.phases import execute
from rlscale.run.rank import isolate_gpu_if_task_asks
from rlscale.run.spec import RunSpec, spec_from_args, spec_from_environment
from rlscale.run.stop_signals import REQUEUE_EXIT_CODE, asks_requeue
from rlscale.run.task_errors import one_line_if_the_task_does_not_fit
from rlscale.tasks import UnknownTaskError, resolve_task_id

PROGRAM = "rlscale train"


def main(argv: list[str] | None = None) -> int:
    spec = launched = spec_from_environment()
    if spec is None:
        spec = resolve_own_spec(argv)
        if spec.resume is None and (note := start_over_note(Path(spec.log_root), spec.identity, PROGRAM, argv or [])):
            print(note, file=sys.stderr)
    else:  # before anything asks CUDA
        isolate_gpu_if_task_asks(spec.task, spec.device, spec.ml_framework)
    with one_line_on_full_disk("rlscale train"), one_line_if_the_task_does_not_fit("rlscale train"):
        outcome = execute(spec)
    if outcome.status == "interrupted" and launched is None:  # a launcher says it for its ranks
        print(f"[rlscale] to continue this run: {continue_command(PROGRAM, argv or [])}", file=sys.stderr)
        if asks_requeue(outcome.stop_signal, os.environ):
            return REQUEUE_EXIT_CODE
    if outcome.status == "completed" and outcome.context.rank.is_main:
        from rlscale.rl.progress import episode_statistic  # imports torch, which must wait for the GPU's isolation

        recorded = outcome.manifest.recorded()
        total, first = outcome.result.iterations_completed, recorded.segments[-1].first_iteration
        if first == 0:
            done = f"{total} iterations"
        else:  # a continuation: this invocation's iterations, numbered from 1 as the progress lines number them
            done = f"iteration {total}" if total == first + 1 else f"iterations {first + 1}-{total}"
            done += f" of {total}"
        print(
            f"[rlscale] completed {done} in {outcome.wall_time_s:.1f}s; "
            f"mean episode length {episode_statistic(recorded.final_mean_episode_length, 1)}; "
            f"ranks in sync ({len(recorded.rank_param_digests)}); run directory {outcome.context.log_dir}"
        )
    return outcome.exit_code


def resolve_own_spec(argv: list[str] | None) -> RunSpec:
    """The spec of a process no launcher resolved one for; a rank of a torchrun line run by hand has its GPU isolated
    first, since resolving the device asks CUDA."""
    parser = build_parser()
    args = parse_command_line(parser, argv)
    try:
        task_id = resolve_task_id(args.task)
        device = None if args.device is None else Device.parse(args.device)
    except (UnknownTaskError, ValueError):
        pass  # resolving refuses them, in one line
    else:
        try:
            isolate_gpu_if_task_asks(task_id, device, args.ml_framework)
        except ValueError as error:
            parser.error(f"--task {task_id}: {error}")
    return spec_from_args(parser, args)
