"""torchrun (``python -m torch.distributed.run``, the same CLI) minus a traceback that says nothing.

When a rank fails, torchrun raises ``ChildFailedError`` and prints it as a traceback with a root-cause report. For a
rank that ended with a ``SystemExit`` (rlscale's one-line errors: bad input, a full disk) there is nothing to report:
the rank left no error file (``error_file: <N/A>``), printed its own line, and the launcher's summary names it. So when
no failed rank left an error file this exits with the first failure's exit code instead; when one did (a crash under
``record``), the report is kept, since it can be the only place a hidden rank's traceback appears.
"""

from __future__ import annotations

import sys

from torch.distributed import run
from torch.distributed.elastic.multiprocessing.errors import _NOT_AVAILABLE, ChildFailedError


def main(args: list[str] | None = None) -> None:
    """Run torchrun on ``args`` (default: this process's arguments)."""
    try:
        run.main(args)
    except ChildFailedError as failed:
        if any(failure.error_file != _NOT_AVAILABLE for failure in failed.failures.values()):
            raise
        _, first = failed.get_first_failure()
        sys.exit(first.exitcode if first.exitcode >= 1 else 1)  # killed by a signal: a negative exit code


if __name__ == "__main__":
    main()
