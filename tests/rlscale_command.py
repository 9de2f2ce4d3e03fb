"""``python -m rlscale ARGS`` in a child process, as every test that drives the command line runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def rlscale(
    *args: str,
    env: Mapping[str, str | None] | None = None,
    pythonpath: str | Path | None = None,
    cwd: str | Path | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    """Run ``python -m rlscale ARGS`` with this interpreter and return it exited, its stdout and stderr captured as
    text; past ``timeout`` seconds it is killed and subprocess.TimeoutExpired raised.

    The child has this process's environment with one OpenMP thread (each CPU rank keeps to its core), then ``env``
    over it, where None unsets a variable; ``pythonpath`` goes first on its PYTHONPATH."""
    environment = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    if pythonpath is not None:
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, (str(pythonpath), environment.get("PYTHONPATH"))))
    environment = {name: value for name, value in environment.items() if value is not None}
    command = [sys.executable, "-m", "rlscale", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment, cwd=cwd)
