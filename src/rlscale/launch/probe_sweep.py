"""The NCCL probe's sweep over message sizes: its typed result, the file rank 0 writes, and the fit of
``t(s) = latency + s / bandwidth`` to it.

Torch-free, so that the launcher checks ``--sizes`` before a launch and :mod:`rlscale.benchmark` reads the file
without starting a process group.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from rlscale.paths import write_atomic

ELEMENT_BYTES = 4
"""The probe all-reduces float32 tensors, so a size is a whole number of 4-byte elements."""
UNITS = {"": 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
SIZE_PATTERN = re.compile(r"(\d+)(B|KiB|MiB|GiB)?")


def parse_size(text: str) -> int:
    """Bytes of a size written as ``4096``, ``4KiB``, ``1MiB`` or ``1GiB``; ValueError names what is wrong."""
    match = SIZE_PATTERN.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is no size (bytes, or a whole number of KiB, MiB or GiB: 4KiB, 1MiB)")
    size = int(match.group(1)) * UNITS[match.group(2) or ""]
    if size < ELEMENT_BYTES or size % ELEMENT_BYTES:
        raise ValueError(f"{text!r} is not a positive multiple of {ELEMENT_BYTES} bytes (float32 elements)")
    return size


def size_text(size: int) -> str:
    """``size`` bytes in the largest unit that divides it: 4 KiB, 1 MiB, 100 B."""
    for unit in ("GiB", "MiB", "KiB"):
        if size % UNITS[unit] == 0:
            return f"{size // UNITS[unit]} {unit}"
    return f"{size} B"


@dataclass(frozen=True)
class ProbeSweep:
    """All-reduce times over message sizes on ``world_size`` ranks."""

    backend: str
    device: str
    """``cpu`` or ``cuda``: where the ranks' tensors lived."""
    world_size: int
    repeats: int
    """Timed all-reduces per size (after one untimed)."""
    sizes_bytes: list[int]
    seconds: list[float]
    """Per size, the slowest rank's median time: the all-reduce is done when its last rank is."""
    seconds_per_rank: list[list[float]]
    """Per size, each rank's median time, in rank order."""


@dataclass(frozen=True)
class AllReduceFit:
    """``t(s) = latency_s + s / bandwidth_bytes_per_s``, fitted by least squares to a sweep's slowest-rank times."""

    latency_s: float
    bandwidth_bytes_per_s: float
    """The algorithm bandwidth: bytes of the all-reduced tensor per second (infinite for a flat fit)."""
    world_size: int
    sizes: int
    """How many sizes the fit had."""
    rms_relative_error: float
    """Root mean square of (fitted − measured) / measured over the sizes."""


def write_probe_sweep(sweep: ProbeSweep, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(asdict(sweep), indent=2) + "\n")


def read_probe_sweep(path: Path) -> ProbeSweep:
    """The sweep in ``path``; ValueError (one line) for a file that holds none."""
    try:
        data = json.loads(Path(path).read_text())
        sweep = ProbeSweep(**data)
    except (OSError, ValueError, TypeError) as error:  # ValueError: not JSON, or not text; TypeError: other keys
        raise ValueError(f"{path}: no probe sweep ({type(error).__name__}: {error})") from None
    if len(sweep.sizes_bytes) != len(sweep.seconds):
        raise ValueError(f"{path}: {len(sweep.sizes_bytes)} sizes but {len(sweep.seconds)} times")
    return sweep


def fit_all_reduce(sizes_bytes: Sequence[int], seconds: Sequence[float], world_size: int) -> AllReduceFit:
    """Fit latency and bandwidth to the times of all-reduces of the given sizes.

    Each point is weighted by 1 / its time, so that the fit minimises relative errors: unweighted, the largest sizes
    would set the latency too. A negative latency or bandwidth predicts nothing: a fit with a negative intercept is
    redone through the origin, and a slope of zero or below (times that do not grow with size, over a narrow range
    of sizes on a fast link) is taken as infinite bandwidth, with the latency the mean time.

    Raises:
        ValueError: fewer than two distinct sizes, or a time that is not positive.
    """
    if len(set(sizes_bytes)) < 2:
        raise ValueError(f"a fit of latency and bandwidth needs at least 2 message sizes (got {len(set(sizes_bytes))})")
    if any(not second > 0 for second in seconds):
        raise ValueError("every all-reduce time must be positive")
    sizes, times = np.asarray(sizes_bytes, dtype=float), np.asarray(seconds, dtype=float)
    slope, intercept = np.polyfit(sizes, times, 1, w=1 / times)
    if intercept < 0:
        weights = 1 / times**2
        slope, intercept = float(np.sum(weights * sizes * times) / np.sum(weights * sizes**2)), 0.0
    if slope <= 0:
        slope, intercept = 0.0, float(times.mean())
    fitted = intercept + slope * sizes
    return AllReduceFit(
        latency_s=float(intercept),
        bandwidth_bytes_per_s=float(1 / slope) if slope > 0 else float("inf"),
        world_size=world_size,
        sizes=len(sizes),
        rms_relative_error=float(np.sqrt(np.mean(((fitted - times) / times) ** 2))),
    )


def fit_sweep(sweep: ProbeSweep) -> AllReduceFit:
    return fit_all_reduce(sweep.sizes_bytes, sweep.seconds, sweep.world_size)
