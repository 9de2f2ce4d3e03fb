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
reports it.
"""

from __future__ import annotations

import sys

from torch.distributed import run
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import _NOT_AVAILABLE, ChildFailedError


def main(args: list[str] | None = None) -> None:
    """Run torchrun on ``args`` (default: this process's arguments)."""
    try:
        run.main(args)
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
