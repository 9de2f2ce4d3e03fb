"""Reductions of timing samples into the bundle's ``MeanStd`` objects, medians with distribution-free intervals, and
the learning-curve EMA.

Pure Python, no torch: the bundle tests recompute these figures from the bundle's own fields.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import NamedTuple

CONFIDENCE = 0.95
"""The coverage every interval in rlscale's tables aims for."""


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


class MedianInterval(NamedTuple):
    """A median with a distribution-free interval, and the interval's exact coverage."""

    median: float
    low: float
    high: float
    coverage: float
    """The probability that ``[low, high]`` holds the population median, for any continuous distribution."""
    n: int


def order_statistic_coverage(n: int, k: int) -> float:
    """Coverage of ``[x(k), x(n+1-k)]`` (the k-th smallest and k-th largest of ``n`` values) for the median:
    ``1 - 2 P(Binomial(n, 1/2) <= k - 1)``."""
    return 1.0 - 2.0 * math.fsum(math.comb(n, i) for i in range(k)) / 2.0**n


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> MedianInterval | None:
    """Median of ``values`` with the exact order-statistic interval: ``[x(k), x(n+1-k)]`` with the largest ``k``
    whose coverage is at least ``confidence``; None without a finite value.

    Fewer values than :func:`values_needed` have no such interval: then ``[low, high]`` is their range, and
    ``coverage`` says what the range holds (93.75 % for 5 values), below ``confidence``.
    """
    values = sorted(_finite(values))
    if not values:
        return None
    n = len(values)
    k = 1
    while k < (n + 1) // 2 and order_statistic_coverage(n, k + 1) >= confidence:
        k += 1
    return MedianInterval(statistics.median(values), values[k - 1], values[n - k], order_statistic_coverage(n, k), n)


def values_needed(confidence: float = CONFIDENCE) -> int:
    """The fewest values whose range covers the median with ``confidence``: 6 for 95 % (96.9 %)."""
    n = 1
    while order_statistic_coverage(n, 1) < confidence:
        n += 1
    return n


def sign_test_p(values: Sequence[float], reference: float = 1.0) -> float | None:
    """Two-sided exact sign test of ``median = reference``: ``min(1, 2 P(Binomial(m, 1/2) <= fewer))``, ``m`` the
    values off the reference and ``fewer`` those on the rarer side; None without such a value. All 5 of 5 ratios
    above 1 give 0.0625."""
    values = _finite(values)
    above = sum(value > reference for value in values)
    below = sum(value < reference for value in values)
    if not above + below:
        return None
    tail = math.fsum(math.comb(above + below, i) for i in range(min(above, below) + 1)) / 2.0 ** (above + below)
    return min(1.0, 2.0 * tail)


def ratio_of_medians_interval(
    numerator: Sequence[float], denominator: Sequence[float], confidence: float = CONFIDENCE
) -> MedianInterval | None:
    """``median(numerator) / median(denominator)`` of two independent samples of positive values, with the ratio of
    their order-statistic intervals, each at ``sqrt(confidence)``: ``[low_n / high_d, high_n / low_d]``.

    The two samples are unpaired (the seeds of an N-rank cell and of the 1-rank cell ran as separate jobs) and
    independent, so both intervals hold at once with the product of their coverages, which is the ratio's
    ``coverage``; ``n`` is the smaller sample. None without a finite value on either side or with a non-positive
    value below.
    """
    above = median_interval(numerator, math.sqrt(confidence))
    below = median_interval(denominator, math.sqrt(confidence))
    if above is None or below is None or below.low <= 0:
        return None
    return MedianInterval(
        above.median / below.median,
        above.low / below.high,
        above.high / below.low,
        above.coverage * below.coverage,
        min(above.n, below.n),
    )


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
