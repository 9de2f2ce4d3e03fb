"""A rank's exit report (:mod:`rlscale.launch.worker`): the status file, and the wait of a rank that failed after a
peer, which lets torchrun name the peer as the root cause."""

from __future__ import annotations

import json
import sys
from unittest.mock import ANY

import pytest

from rlscale.dist import STATUS_DIR_ENV, SUPERVISOR_PID_ENV
from rlscale.launch import worker
from rlscale.launch.launcher import failed_ranks


class BrokenCollective(RuntimeError):
    pass


@pytest.fixture
def rank_one(monkeypatch, tmp_path):
    """Rank 1 of 2, reporting to ``tmp_path``; its waits are recorded instead of slept."""
    for name, value in {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(STATUS_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(SUPERVISOR_PID_ENV, raising=False)
    monkeypatch.setattr(worker, "guard_rank", lambda rank, supervisor: None)
    monkeypatch.setattr(worker.heartbeat, "beat", lambda phase: None)
    waits: list[float] = []
    monkeypatch.setattr(worker.time, "sleep", waits.append)
    return tmp_path, waits


def fail(_argv):
    raise BrokenCollective("Connection closed by peer")


def test_a_rank_failing_after_a_peer_waits_for_the_launcher(rank_one):
    status_dir, waits = rank_one
    (status_dir / "rank_0.json").write_text(json.dumps({"exit_code": 1, "error": "InjectedCrash: on rank 0"}))
    with pytest.raises(BrokenCollective):
        worker.run_rank(fail, [])
    assert waits == [worker.FOLLOWING_FAILURE_WAIT_S]
    status = json.loads((status_dir / "rank_1.json").read_text())
    assert status == {"exit_code": 1, "error": "BrokenCollective: Connection closed by peer", "failed_at": ANY}
    assert isinstance(status["failed_at"], float)


@pytest.mark.parametrize("peer", [None, {"exit_code": 0, "error": None}], ids=["first-to-fail", "peer-succeeded"])
def test_the_first_failure_exits_at_once(rank_one, peer):
    status_dir, waits = rank_one
    if peer is not None:
        (status_dir / "rank_0.json").write_text(json.dumps(peer))
    with pytest.raises(BrokenCollective):
        worker.run_rank(fail, [])
    assert waits == []


def test_a_succeeding_rank_never_waits(rank_one):
    status_dir, waits = rank_one
    (status_dir / "rank_0.json").write_text(json.dumps({"exit_code": 1, "error": "InjectedCrash: on rank 0"}))
    assert worker.run_rank(lambda _argv: 0, []) == 0
    assert waits == []
    assert json.loads((status_dir / "rank_1.json").read_text()) == {"exit_code": 0, "error": None}


def test_an_exit_code_is_dated_too(rank_one, monkeypatch):
    """A rank that exits non-zero without raising (a SystemExit) also says when, for the launcher's order."""
    status_dir, _ = rank_one
    monkeypatch.setattr(worker.time, "time", lambda: 12.5)
    with pytest.raises(SystemExit):
        worker.run_rank(lambda _argv: sys.exit(3), [])
    assert json.loads((status_dir / "rank_1.json").read_text()) == {"exit_code": 3, "error": None, "failed_at": 12.5}


def test_a_one_line_exit_reaches_the_launchers_summary(rank_one, monkeypatch):
    """A rank's SystemExit line, which the console shows only for local rank 0, is its error in the launcher's summary
    (first, as it failed first), and a failure for a peer that fails after it."""
    status_dir, _ = rank_one
    monkeypatch.setattr(worker.time, "time", lambda: 12.5)
    with pytest.raises(SystemExit):
        worker.run_rank(lambda _argv: sys.exit("rlscale train: error: No space left on device"), [])
    (status_dir / "rank_0.json").write_text(
        json.dumps({"exit_code": 1, "error": "RuntimeError: Connection closed by peer", "failed_at": 13.0})
    )
    assert failed_ranks(status_dir, 2) == [
        "rank 1 failed first: exited 1 (rlscale train: error: No space left on device)",
        "rank 0 exited 1 (RuntimeError: Connection closed by peer)",
    ]
    assert worker.peer_failed(status_dir, 0)
