"""``rlscale peer_table`` remakes the committed peer tables from their bundles, and refuses in one line what holds no
peer; ``rlscale parity_so_far`` refuses a folder with none of the plan's runs (its tables are checked against the
study's own in tests/test_study_workflow.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rlscale_command import rlscale

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("summary", "paths"),
    [
        ("results/h200x2/peer_like_for_like/summary.md", ["results/h200x2/peer_like_for_like/bundles"]),
        ("results/h200x2/peer/summary.md", ["results/h200x2/peer/bundles", "results/h200x2/benchmark/training"]),
    ],
)
def test_peer_table_remakes_the_committed_summary(summary, paths):
    result = rlscale("peer_table", *paths, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (ROOT / summary).read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["peer_table", "results/cpu4/benchmark/training"], "none of the 9 bundle(s) holds a peer measurement"),
        (["peer_table", "results/no_such_folder"], "results/no_such_folder does not exist"),
        (["parity_so_far", "results/cpu4", "OUT", "--device", "cpu"], "none of the plan's"),
    ],
)
def test_refused_in_one_line(args, message, tmp_path):
    args = [str(tmp_path / "out") if arg == "OUT" else arg for arg in args]
    result = rlscale(*args, cwd=ROOT, timeout=120)
    assert result.returncode == 2 and message in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()
