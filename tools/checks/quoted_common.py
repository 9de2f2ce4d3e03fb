"""What the quoted-figure tools share: the :class:`Quote`, the libraries in the docs' order, and how a range and a
median with its interval are written. The interval is restated here apart from ``rlscale.benchmark.stats``, so that
the docs' figures do not come from the code they check."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

PERFORMANCE = "docs/performance.md"
RESULTS_DOC = "docs/results.md"
"""The results summary the README links to: the figures behind its short table."""
LIBRARY_ROWS = (("rsl_rl", "rsl_rl"), ("rl_games", "rl_games"), ("skrl", "skrl (torch)"))
"""Library, and its name in the results table, in the order of the docs' tables."""


@dataclass(frozen=True)
class Quote:
    document: str
    """Path from the repository root."""
    what: str
    text: str
    """As the document has it, but for line breaks and runs of spaces."""


def rate(value: float) -> str:
    """Env-steps/s as the docs write them: ``433 k``, ``7.47 M``, ``11.4 M`` (three significant digits from 1 M)."""
    if value >= 1e6:
        return f"{value / 1e6:.3g} M"
    return f"{value / 1e3:.0f} k"


def span(values: Iterable[float], digits: int = 2) -> str:
    """``low–high``, or one value when both round alike."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low}–{high}"


CONFIDENCE = 0.95


def median_and_bounds(values: Iterable[float]) -> tuple[float, float, float, int]:
    """The median, the bounds of its exact order-statistic interval and the number of values, written apart from
    ``rlscale.benchmark.stats``: ``[x(k), x(n+1-k)]`` holds the median when between ``k`` and ``n - k`` values fall
    below it, a binomial(n, 1/2) probability; ``k`` is the largest reaching 95 %, else 1 (the range)."""
    ordered = sorted(values)
    n = len(ordered)

    def coverage(k: int) -> float:
        return sum(math.comb(n, below) for below in range(k, n - k + 1)) / 2**n

    k = max((k for k in range(1, (n + 1) // 2 + 1) if coverage(k) >= CONFIDENCE), default=1)
    return statistics.median(ordered), ordered[k - 1], ordered[n - k], n


def with_interval(values: Iterable[float]) -> str:
    """``median [low–high]``: the median and its order-statistic interval (the range, for 5 values)."""
    median, low, high, _ = median_and_bounds(values)
    return f"{median:.2f} [{low:.2f}–{high:.2f}]"


def csv_text(rows: list[dict], columns: Sequence[str]) -> str:
    """``rows`` as CSV with ``columns``: floats to 4 decimals, as the committed tables are written."""
    lines = [",".join(columns)]
    lines += [",".join(f"{row[c]:.4f}" if isinstance(row[c], float) else str(row[c]) for c in columns) for row in rows]
    return "\n".join(lines) + "\n"
