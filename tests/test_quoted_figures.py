"""The docs quote what ``tools/checks/quoted_figures.py`` recomputes from the committed results, so neither drifts.

A failure names the document and the figure: update the sentence (or, if the data changed on purpose, both).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "checks" / "quoted_figures.py"
_spec = importlib.util.spec_from_file_location("quoted_figures", SCRIPT)
quoted_figures = sys.modules["quoted_figures"] = importlib.util.module_from_spec(_spec)  # tools/checks/ is no package
_spec.loader.exec_module(quoted_figures)
QUOTES = quoted_figures.all_quotes()


def words(text: str) -> str:
    """Line breaks and runs of spaces are layout, not content."""
    return " ".join(text.split())


@pytest.mark.parametrize("quote", QUOTES, ids=[f"{quote.document}: {quote.what}" for quote in QUOTES])
def test_document_quotes_the_recomputed_figure(quote):
    document = words((ROOT / quote.document).read_text())
    assert words(quote.text) in document, f"{quote.document} should quote {quote.what} as: {quote.text}"


@pytest.mark.parametrize(
    ("value", "text"), [(432_848.6, "433 k"), (69_999.0, "70 k"), (7_469_174.8, "7.47 M"), (11_384_391.9, "11.4 M")]
)
def test_rates_are_written_as_the_docs_write_them(value, text):
    assert quoted_figures.rate(value) == text


def test_script_prints_every_quote():
    result = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, check=True)
    assert len(result.stdout.splitlines()) == len(QUOTES)


@pytest.mark.parametrize(
    ("ratios", "verdict"),
    [
        ([0.9, 0.8, 0.95, 0.7, 0.99], "too few pairs (< 6); all 5 below 1, sign test p = 0.0625"),
        ([0.9, 1.1, 0.95, 0.7, 0.99], "too few pairs (< 6)"),
        ([1.1, 1.2, 1.3, 1.05, 1.4, 1.5], "higher"),  # 6 pairs: the range, 1 - 2 / 64 = 96.9 %
        ([0.9, *(1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8)], "higher"),  # 9 pairs: [x(2), x(8)] = [1.1, 1.7]
        ([0.9, 0.95, *(1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7)], "inconclusive"),  # x(2) = 0.95
    ],
)
def test_speed_lever_verdict_restates_the_tools_rule(ratios, verdict):
    """The docs' verdicts are recomputed with the rule written out by hand, too-few-pairs clause included."""
    import quoted_speed_levers  # beside quoted_figures, which put tools/checks/ on the path

    assert quoted_speed_levers.verdict(ratios) == verdict
