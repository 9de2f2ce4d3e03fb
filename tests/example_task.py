"""The example task package (examples/pendulum_task), installed as a user installs theirs: its own distribution."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

EXAMPLE_TASK = Path(__file__).resolve().parents[1] / "examples" / "pendulum_task"
DISTRIBUTION = "rlscale-pendulum-task"


def ensure_example_installed() -> None:
    """Install the example into this interpreter's environment unless `make setup` did (offline: its only build
    requirement, setuptools, is rlscale's too)."""
    try:
        importlib.metadata.distribution(DISTRIBUTION)
        return
    except importlib.metadata.PackageNotFoundError:
        pass
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", EXAMPLE_TASK]
    subprocess.run([str(part) for part in command], check=True, timeout=300)
    importlib.invalidate_caches()
