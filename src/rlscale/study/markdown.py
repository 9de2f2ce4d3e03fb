"""Markdown for the study's summary: table cells, medians with their intervals, and whole tables."""

from __future__ import annotations

import math

import pandas as pd

from rlscale.benchmark.stats import CONFIDENCE


def cell_text(value: object) -> str:
    """One table cell: integers as is, floats to 3 significant digits (thousands separated), NaN/None as ``–``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return str(value)


def with_interval(value: float, low: float, high: float, coverage: float) -> str:
    """``median [low–high]``, with the coverage where it falls short of 95 % (the range of too few seeds), or the
    bare median where there is no interval: unknown, or a single value (one run, or the 1-rank row's speedup of 1)."""
    if math.isnan(low) or math.isnan(high) or math.isnan(value) or low == high:
        return cell_text(value)
    short = f" ({coverage:.1%})" if coverage < CONFIDENCE else ""
    return f"{cell_text(value)} [{cell_text(low)}–{cell_text(high)}]{short}"


def markdown_table(frame: pd.DataFrame) -> str:
    """Render ``frame`` as a GitHub-flavoured Markdown table (pandas' own needs the optional ``tabulate``)."""
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(cell_text(value) for value in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])
