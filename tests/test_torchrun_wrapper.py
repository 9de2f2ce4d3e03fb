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
    """Make torchrun's ``run`` fail with ``failures`` (global rank = position)."""

    def run(args):
        raise ChildFailedError("worker.py", dict(enumerate(failures)))

    monkeypatch.setattr(torchrun.run, "run", run)


def without_error_file(exitcode: int) -> ProcessFailure:
    return ProcessFailure(local_rank=0, pid=1, exitcode=exitcode, error_file="/nonexistent/error.json")


def launched(monkeypatch, args: list[str]):
    """torchrun's parsed arguments as the wrapper hands them to torchrun's ``run``."""
    calls = []
    monkeypatch.setattr(torchrun.run, "run", calls.append)
    assert torchrun.main(args) is None
    assert len(calls) == 1
    return calls[0]


def test_a_successful_job_runs_torchrun_with_the_arguments(monkeypatch):
    parsed = launched(monkeypatch, ["--nproc_per_node", "2", "worker.py", "--task", "X"])
    assert (parsed.nproc_per_node, parsed.training_script, parsed.training_script_args) == (
        "2",
        "worker.py",
        ["--task", "X"],
    )


def parser_defaulting_the_master_port(monkeypatch) -> None:
    """torchrun's parser as torch 2.11 has it: an unnamed --master_port parses as 29500 (torch 2.13: None)."""
    parse_args = torchrun.run.parse_args

    def parse_with_default(args):
        parsed = parse_args(args)
        parsed.master_port = 29500 if parsed.master_port is None else parsed.master_port
        return parsed

    monkeypatch.setattr(torchrun.run, "parse_args", parse_with_default)


@pytest.mark.parametrize("default_port", [False, True], ids=["torch-2.13-parser", "torch-2.11-parser"])
def test_one_node_without_a_rendezvous_takes_a_free_port(monkeypatch, default_port):
    """No port named on one node: a c10d rendezvous on localhost:0 (the kernel's free port), never torch 2.11's fixed
    29500 that two jobs of one host would both bind."""
    monkeypatch.delenv("PET_MASTER_PORT", raising=False)
    if default_port:
        parser_defaulting_the_master_port(monkeypatch)
    for nnodes in ([], ["--nnodes", "1"]):
        parsed = launched(monkeypatch, [*nnodes, "--nproc_per_node", "1", "worker.py"])
        assert (parsed.rdzv_backend, parsed.rdzv_endpoint) == ("c10d", "localhost:0")
        assert parsed.rdzv_id


@pytest.mark.parametrize(
    "named",
    [
        ["--master_port", "29512"],
        ["--master-port=29512"],
        ["--rdzv_backend", "c10d", "--rdzv_endpoint", "node0:29400"],
        ["--nnodes", "2", "--master_addr", "node0", "--master_port", "29400"],
        ["--standalone"],
    ],
)
def test_a_named_rendezvous_is_left_to_torchrun(monkeypatch, named):
    parser_defaulting_the_master_port(monkeypatch)
    parsed = launched(monkeypatch, [*named, "--nproc_per_node", "1", "worker.py"])
    assert parsed.rdzv_endpoint != "localhost:0"  # --standalone: torchrun's own run makes it localhost:0 itself
    assert parsed.rdzv_backend == ("static" if "--rdzv_backend" not in named else "c10d")


def test_no_error_file_exits_quietly_with_the_ranks_code(monkeypatch):
    """The rank printed its own line (rank 0), and torchrun stopped the other (SIGTERM): no traceback, rank 0's code."""
    failing_torchrun(monkeypatch, without_error_file(3), without_error_file(-15))
    with pytest.raises(SystemExit) as exit_:
        torchrun.main(["worker.py"])
    assert exit_.value.code == 3


def test_a_rank_killed_by_a_signal_keeps_torchruns_report(monkeypatch):
    """The OOM killer's SIGKILL leaves no error file and no status for the launcher: the report names the signal."""
    failing_torchrun(monkeypatch, without_error_file(-9))
    with pytest.raises(ChildFailedError) as raised:
        torchrun.main(["worker.py"])
    assert "Signal 9 (SIGKILL)" in str(raised.value)


def test_an_error_file_keeps_torchruns_report(monkeypatch, tmp_path):
    """A crash under ``record`` (rank 1) among one-line exits (rank 0): its traceback is in torchrun's report."""
    error_file = tmp_path / "error.json"
    error_file.write_text(json.dumps({"message": "InjectedCrash: on rank 1", "timestamp": 12}))
    crash = ProcessFailure(local_rank=1, pid=2, exitcode=1, error_file=str(error_file))
    failing_torchrun(monkeypatch, without_error_file(1), crash)
    with pytest.raises(ChildFailedError) as raised:
        torchrun.main(["worker.py"])
    assert raised.value.failures[1].error_file == str(error_file)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_torchrun_exits_as_a_shell_reports_it(monkeypatch, sig):
    """Ctrl-C or a scheduler's SIGTERM stops the job: 128 + the signal, without torchrun's SignalException traceback."""

    def run(args):
        raise SignalException(f"Process 1 got signal: {sig}", sigval=sig)

    monkeypatch.setattr(torchrun.run, "run", run)
    with pytest.raises(SystemExit) as exit_:
        torchrun.main(["worker.py"])
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


def test_a_master_port_from_the_environment_is_left_to_torchrun(monkeypatch):
    monkeypatch.setenv("PET_MASTER_PORT", "29512")
    parsed = launched(monkeypatch, ["--nproc_per_node", "1", "worker.py"])
    assert (parsed.rdzv_backend, parsed.master_port) == ("static", 29512)


def test_a_master_port_among_the_scripts_arguments_names_none(monkeypatch):
    monkeypatch.delenv("PET_MASTER_PORT", raising=False)
    parser_defaulting_the_master_port(monkeypatch)
    parsed = launched(monkeypatch, ["--nproc_per_node", "1", "worker.py", "--master_port", "1"])
    assert parsed.rdzv_endpoint == "localhost:0"
