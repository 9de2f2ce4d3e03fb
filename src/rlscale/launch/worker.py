"""Per-rank entry point: torchrun (or skrl's JAX launcher) runs this file once per rank.

``record`` hands a failing rank's traceback to torchrun, which prints it as the root cause even when the console shows
only local rank 0. skrl's JAX launcher exits 0 whatever its children do, so each rank also leaves its exit status in
``$RLSCALE_STATUS_DIR`` for the launcher to read.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from torch.distributed.elastic.multiprocessing.errors import record

from rlscale.dist import STATUS_DIR_ENV, rank_info


def run_rank(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run one rank's main under ``record`` and leave its exit status where the launcher looks."""
    status = {"exit_code": 1, "error": None}
    try:
        status["exit_code"] = record(main)(argv)
        return status["exit_code"]
    except SystemExit as exit_:
        status["exit_code"] = exit_.code if isinstance(exit_.code, int) else 1
        raise
    except BaseException as error:
        status["error"] = f"{type(error).__name__}: {error}"
        raise
    finally:
        status_dir = os.environ.get(STATUS_DIR_ENV)
        if status_dir:
            Path(status_dir, f"rank_{rank_info().rank}.json").write_text(json.dumps(status))


if __name__ == "__main__":
    from rlscale.train import main as train_main

    sys.exit(run_rank(train_main, sys.argv[1:]))
