"""Finding the processes a multi-process test started, by the unique tmp path in their command lines."""

from __future__ import annotations

import time

import psutil


def processes_mentioning(marker: str) -> list[psutil.Process]:
    """Live processes whose command line contains ``marker`` (each test's unique tmp path)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if marker in cmdline and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


def wait_for_no_process(marker: str, within: float) -> list[psutil.Process]:
    """Wait up to ``within`` seconds for every such process to end; return those still alive."""
    deadline = time.monotonic() + within
    while (alive := processes_mentioning(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive
