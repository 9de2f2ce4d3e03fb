"""torchrun (``python -m torch.distributed.run``, the same CLI) minus a traceback that says nothing.

When a rank fails, torchrun raises ``ChildFailedError`` and prints it as a traceback with a root-cause report. For a
rank that ended with a ``SystemExit`` (rlscale's one-line errors: bad input, a full disk) there is nothing to report:
the rank left no error file (``error_file: <N/A>``), printed its own line, and the launcher's summary names it. So when
no failed rank left an error file and the first one exited with a code, this exits with that code instead. The
report is kept when a rank left an error file (a crash under ``record``: it can be the only place a hidden rank's
traceback appears) and when a signal killed the first (the report names the signal, e.g. the OOM killer's SIGKILL;
the rank wrote no status for the launcher's summary).

A signal to torchrun itself (Ctrl-C, Snakemake or SLURM stopping the job) is no failure to report either: torchrun
has stopped its workers by then, each rank said it was interrupted, and this exits 128 + the signal, as a shell
reports it. torchrun stops its workers on the first signal (the same one to them, SIGKILL 30 s later) and starts over
with SIGTERM on each further one, even one that arrives while it waits for them; a stop delivered twice (torchrun's
own and the launcher's forward, when a batch system signals every process) would cut that wait short and SIGTERM the
ranks while they record their interrupt. So repeats of one burst (:mod:`rlscale.run.stop_signals`) are dropped before
torchrun's handler sees them; a later signal still reaches it.

A one-node launch that names no rendezvous (no ``--master_port``, ``--rdzv_*`` or ``--standalone``) rendezvouses on a
free port of localhost, whatever the torch version: torch 2.13 does so itself, but torch 2.11 listens on port 29500,
where two jobs of one host (a study's jobs sharing a GPU, two 1-GPU jobs on two GPUs) collide.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import uuid
from collections.abc import Iterator
from types import FrameType

from torch.distributed import run
from torch.distributed.elastic.multiprocessing import api as elastic_api
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import _NOT_AVAILABLE, ChildFailedError, record

from rlscale.run.stop_signals import Arrival, StopSignals


@contextlib.contextmanager
def one_shutdown_per_burst() -> Iterator[None]:
    """While inside, torchrun's termination handler (installed when it starts its workers, looked up by name then)
    ignores the repeats of a burst of signals."""
    handler = elastic_api._terminate_process_handler
    stops = StopSignals()

    def terminate(signum: int, frame: FrameType | None) -> None:
        if stops.arrive() is not Arrival.REPEAT:
            handler(signum, frame)

    elastic_api._terminate_process_handler = terminate
    try:
        yield
    finally:
        elastic_api._terminate_process_handler = handler


MASTER_PORT_FLAGS = ("--master-port", "--master_port")


def names_a_master_port(args: list[str], training_script: str) -> bool:
    """Whether torchrun's own options (those before the training script) or its environment name a master port.

    The parsed value cannot tell: torch 2.11 defaults it to 29500, torch 2.13 to ``None``.
    """
    launcher_args = args[: args.index(training_script)] if training_script in args else args
    named = any(arg.split("=", 1)[0] in MASTER_PORT_FLAGS for arg in launcher_args)
    return named or "PET_MASTER_PORT" in os.environ


def rendezvous_on_a_free_port(parsed: argparse.Namespace, args: list[str]) -> None:
    """Give a one-node launch that names no rendezvous a c10d one on a free localhost port, as torch 2.13 does."""
    unnamed = parsed.rdzv_backend == "static" and not parsed.rdzv_endpoint
    unnamed = unnamed and not names_a_master_port(args, parsed.training_script)
    if unnamed and not parsed.standalone and run.parse_min_max_nnodes(parsed.nnodes)[1] == 1:
        parsed.rdzv_backend, parsed.rdzv_endpoint, parsed.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())


@record
def launch(args: list[str] | None) -> None:
    """torchrun's own ``main`` (its ``record`` decorator included), with :func:`rendezvous_on_a_free_port`."""
    args = sys.argv[1:] if args is None else args
    parsed = run.parse_args(args)
    rendezvous_on_a_free_port(parsed, args)
    run.run(parsed)


def main(args: list[str] | None = None) -> None:
    """Run torchrun on ``args`` (default: this process's arguments)."""
    try:
        with one_shutdown_per_burst():
            launch(args)
    except ChildFailedError as failed:
        _, first = failed.get_first_failure()
        left_a_report = any(failure.error_file != _NOT_AVAILABLE for failure in failed.failures.values())
        if left_a_report or first.exitcode < 0:  # a negative exit code: killed by that signal
            raise
        sys.exit(first.exitcode)  # the ranks torchrun then stopped (SIGTERM) are the symptom, not the cause
    except SignalException as stopped:
        sys.exit(128 + stopped.sigval)


if __name__ == "__main__":
    main()
