"""torchrun through :mod:`rlscale.launch.torchrun`: torchrun's traceback only when a failed rank left one to report."""

from __future__ import annotations

import json
import signal

import pytest
from torch.distributed.elastic.multiprocessing import api as elastic_api
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from rlscale.launch import torchrun


def failing_torchrun(monkeypatch, *failures: ProcessFailure) -> None:
    """Make torchrun's ``main`` fail with ``failures`` (global rank = position)."""

    def main(args):
        raise ChildFailedError("worker.py", dict(enumerate(failures)))

    monkeypatch.setattr(torchrun.run, "main", main)


def without_error_file(exitcode: int) -> ProcessFailure:
    return ProcessFailure(local_rank=0, pid=1, exitcode=exitcode, error_file="/nonexistent/error.json")


def test_a_successful_job_runs_torchrun_with_the_arguments(monkeypatch):
    calls = []
    monkeypatch.setattr(torchrun.run, "main", calls.append)
    assert torchrun.main(["--nproc_per_node", "2", "worker.py"]) is None
    assert calls == [["--nproc_per_node", "2", "worker.py"]]


def test_no_error_file_exits_quietly_with_the_ranks_code(monkeypatch):
    """The rank printed its own line (rank 0), and torchrun stopped the other (SIGTERM): no traceback, rank 0's code."""
    failing_torchrun(monkeypatch, without_error_file(3), without_error_file(-15))
    with pytest.raises(SystemExit) as exit_:
        torchrun.main([])
    assert exit_.value.code == 3


def test_a_rank_killed_by_a_signal_keeps_torchruns_report(monkeypatch):
    """The OOM killer's SIGKILL leaves no error file and no status for the launcher: the report names the signal."""
    failing_torchrun(monkeypatch, without_error_file(-9))
    with pytest.raises(ChildFailedError) as raised:
        torchrun.main([])
    assert "Signal 9 (SIGKILL)" in str(raised.value)


def test_an_error_file_keeps_torchruns_report(monkeypatch, tmp_path):
    """A crash under ``record`` (rank 1) among one-line exits (rank 0): its traceback is in torchrun's report."""
    error_file = tmp_path / "error.json"
    error_file.write_text(json.dumps({"message": "InjectedCrash: on rank 1", "timestamp": 12}))
    crash = ProcessFailure(local_rank=1, pid=2, exitcode=1, error_file=str(error_file))
    failing_torchrun(monkeypatch, without_error_file(1), crash)
    with pytest.raises(ChildFailedError) as raised:
        torchrun.main([])
    assert raised.value.failures[1].error_file == str(error_file)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_torchrun_exits_as_a_shell_reports_it(monkeypatch, sig):
    """Ctrl-C or a scheduler's SIGTERM stops the job: 128 + the signal, without torchrun's SignalException traceback."""

    def main(args):
        raise SignalException(f"Process 1 got signal: {sig}", sigval=sig)

    monkeypatch.setattr(torchrun.run, "main", main)
    with pytest.raises(SystemExit) as exit_:
        torchrun.main([])
    assert exit_.value.code == 128 + sig


def test_repeats_of_a_signal_burst_never_reach_torchruns_handler():
    """torchrun's own SIGINT and the launcher's forward of it stop the workers once; the handler is restored after."""
    original = elastic_api._terminate_process_handler
    with torchrun.one_shutdown_per_burst():
        with pytest.raises(SignalException) as raised:
            elastic_api._terminate_process_handler(signal.SIGINT, None)
        assert raised.value.sigval == signal.SIGINT
        assert elastic_api._terminate_process_handler(signal.SIGINT, None) is None  # the forward: dropped
    assert elastic_api._terminate_process_handler is original
