"""Reductions of timing samples into the bundle's ``MeanStd`` objects, and the learning-curve EMA.

Pure Python, no torch: the bundle tests recompute these figures from the bundle's own fields.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence


def _finite(values: Sequence[float]) -> list[float]:
    return [float(value) for value in values if value is not None and math.isfinite(value)]


def sample_std(values: Sequence[float]) -> float:
    """Sample standard deviation (n - 1); 0.0 for a single sample, where dispersion is unmeasured."""
    return statistics.stdev(values) if len(values) > 1 else 0.0


def mean_std(values: Sequence[float]) -> dict | None:
    """``{mean, std, peak}`` of plain samples (times, utilisation, memory); None without a finite sample."""
    values = _finite(values)
    if not values:
        return None
    return {"mean": statistics.fmean(values), "std": sample_std(values), "peak": max(values)}


def rate_stats(work_per_sample: float, durations: Sequence[float]) -> dict | None:
    """Throughput of equal units of work, each taking one of ``durations`` seconds.

    ``mean`` is the effective rate, total work / total time (a mean of per-sample rates would overweight the fast
    samples); ``std`` and ``peak`` are those of the per-sample rates.

    Returns:
        The ``MeanStd`` object, or None when no sample has a positive duration.
    """
    durations = [value for value in _finite(durations) if value > 0]
    if not durations:
        return None
    rates = [work_per_sample / value for value in durations]
    return {
        "mean": work_per_sample * len(durations) / math.fsum(durations),
        "std": sample_std(rates),
        "peak": max(rates),
    }


def median_rate(work_per_sample: float, durations: Sequence[float]) -> float | None:
    """Median of the per-sample rates ``work / duration``; None when no sample has a positive duration."""
    durations = [value for value in _finite(durations) if value > 0]
    return statistics.median([work_per_sample / value for value in durations]) if durations else None


def median_interval(
    values: Sequence[float], confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float, float] | None:
    """Median of ``values`` with a percentile-bootstrap interval: ``(median, low, high)``; None without a finite value.

    The lent GPUs vary by about 15 % from run to run, so a ratio or an efficiency is quoted with the spread of its
    median over resampled repeats, not as one number. Seeded, so a table regenerates identically.
    """
    values = _finite(values)
    if not values:
        return None
    rng = random.Random(seed)
    medians = [statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples)]
    return (statistics.median(values), *_percentile_bounds(medians, confidence))


def ratio_of_medians_interval(
    numerator: Sequence[float],
    denominator: Sequence[float],
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float, float] | None:
    """``median(numerator) / median(denominator)`` with a percentile-bootstrap interval: ``(ratio, low, high)``.

    The two samples are unpaired (the seeds of an N-rank cell and of the 1-rank cell ran as separate jobs), so each
    is resampled on its own and the ratio recomputed. Seeded, so a table regenerates identically. None without a
    finite value on either side or with a zero median below.
    """
    numerator, denominator = _finite(numerator), _finite(denominator)
    if not numerator or not denominator or statistics.median(denominator) == 0:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        below = statistics.median(rng.choices(denominator, k=len(denominator)))
        if below:  # A resample of zeros has no ratio; it is left out rather than made infinite.
            ratios.append(statistics.median(rng.choices(numerator, k=len(numerator))) / below)
    ratio = statistics.median(numerator) / statistics.median(denominator)
    return (ratio, *_percentile_bounds(ratios, confidence))


def _percentile_bounds(statistics_of_resamples: list[float], confidence: float) -> tuple[float, float]:
    """The percentile interval of bootstrap statistics: the ``(1 - confidence) / 2`` tails cut off each side."""
    ordered = sorted(statistics_of_resamples)
    tail = (1.0 - confidence) / 2.0
    return ordered[int(tail * (len(ordered) - 1))], ordered[math.ceil((1.0 - tail) * (len(ordered) - 1))]


def ema(values: Sequence[float | None], alpha: float) -> float | None:
    """Final exponential moving average ``e = alpha * x + (1 - alpha) * e``, seeded by the first finite value.

    Missing values (NaN or None: no episode had ended yet) leave the average unchanged.
    """
    average = None
    for value in values:
        if value is None or not math.isfinite(value):
            continue
        average = float(value) if average is None else alpha * float(value) + (1.0 - alpha) * average
    return average


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN: a missing statistic is null."""
    return float(value) if value is not None and math.isfinite(value) else None
