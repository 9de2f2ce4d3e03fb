"""MuJoCo Warp's kernels as a task loads them: what it says before the silence of a first compile, and which modules
the load compiled into Warp's kernel cache (a cold start) rather than read from it (a warm one)."""

from __future__ import annotations

import os
import sys
import time

import warp as wp


def announce_kernels(task: str, device: str) -> float:
    """Say that kernels load (or compile, on a first run) before the silence it takes; return the start time."""
    cache = wp.config.kernel_cache_dir
    print(
        f"[rlscale] {task}: loading MuJoCo Warp's kernels for {device} from {cache} (a first run compiles them: "
        "about a minute, or more on a few CPU cores; later runs load them in seconds)",
        file=sys.stderr,
        flush=True,
    )
    return time.perf_counter()


def cache_entries() -> set[str]:
    """The modules in Warp's kernel cache: one folder per module build, written when Warp compiles it."""
    cache = wp.config.kernel_cache_dir
    return set(os.listdir(cache)) if cache and os.path.isdir(cache) else set()
