"""A new benchmark workflow, added as docs/architecture.md says: one module and one entry in ``WORKFLOWS``, nothing
else. The fake ``countdown`` workflow then gets the dispatcher's help, its own options and refusals, a
``_multigpu`` dry run and a bundle that the one schema validates, in process."""

from __future__ import annotations

import json
import shlex
import signal
import sys
import textwrap

import pytest

from rlscale.benchmark import bundle as bundles
from rlscale.benchmark import cli as benchmark_cli
from rlscale.benchmark.workflows import WORKFLOWS

TASK = "Isaac-Cartpole-Direct"
COUNTDOWN = '''
"""``rlscale benchmark countdown``: counts down from ``--count``, measuring nothing (a test's fake workflow)."""

import argparse

from rlscale.benchmark.summary import other_ranks
from rlscale.benchmark.workflow import Workflow


def add_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--count", type=int, default=3, help="steps to count down (default 3)")


def check(parser: argparse.ArgumentParser, args: argparse.Namespace, multigpu: bool) -> None:
    if args.count < 1:
        parser.error(f"--count must be at least 1 (got {args.count})")


def run(measurement, spec, rank) -> None:
    measurement.runtime["iterations_completed"] = spec.options["count"]
    measurement.runtime["total_wall_time_s"] = 0.0


def summarise(bundle: dict) -> list[str]:
    return [f"  counted {bundle['runtime']['iterations_completed']} down {other_ranks(bundle)}"]


WORKFLOW = Workflow(
    name="countdown",
    description="counts down, measuring nothing",
    uses_library=False,
    scope="rank0",
    run=run,
    summarise=summarise,
    add_options=add_options,
    refuses={"--resume": "a countdown starts from its count"},
    check=check,
)
'''
"""The whole new module, as a user would write it next to ``workflows/startup.py``."""


@pytest.fixture
def countdown(tmp_path, monkeypatch):
    """The fake module on the path and its registry entry; the schema reloaded so that it reads the registry."""
    (tmp_path / "countdown.py").write_text(textwrap.dedent(COUNTDOWN))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "countdown", raising=False)
    import countdown

    monkeypatch.setitem(WORKFLOWS, "countdown", countdown.WORKFLOW)
    bundles.schema.cache_clear()
    yield countdown.WORKFLOW
    bundles.schema.cache_clear()


def test_listed_in_the_help(countdown, capsys):
    assert benchmark_cli.main(["--help"]) == 0
    usage = capsys.readouterr().out
    assert "  countdown            counts down, measuring nothing" in usage
    assert "  countdown_multigpu   the same, one rank per GPU" in usage


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--count", "0"], "--count must be at least 1 (got 0)"),
        (["--resume", "auto"], "--resume does not apply to the countdown benchmark: a countdown starts from its count"),
        (["--video"], "--video: rlscale has no renderer"),
    ],
)
def test_own_options_and_refusals(countdown, capsys, argv, message):
    """Its own check and refusals, and the refusals every workflow shares, each in one line with exit 2."""
    with pytest.raises(SystemExit) as exit_info:
        benchmark_cli.main(["countdown", "--task", TASK, "--device", "cpu", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_multigpu_dry_run(countdown, capsys):
    """The launcher offers no --rl_library (the record says it uses none) and passes the workflow to its ranks."""
    argv = ["countdown_multigpu", "--task", TASK, "--device", "cpu", "--num_gpus", "2", "--count", "5", "--dry_run"]
    assert benchmark_cli.main(argv) == 0
    command = shlex.split(capsys.readouterr().out.strip().splitlines()[-1])
    assert command[command.index(benchmark_cli.WORKER) :] == [
        *(benchmark_cli.WORKER, "--workflow", "countdown", "--task", TASK, "--device", "cpu", "--count", "5"),
        "--distributed",
    ]


def test_writes_a_bundle_the_schema_accepts(countdown, tmp_path, capsys, monkeypatch):
    """A single-process run measures through the record and writes a bundle that the one schema validates."""
    monkeypatch.setattr(signal, "signal", lambda signum, handler: None)  # keep pytest's handlers
    path = tmp_path / "countdown.json"
    argv = ["countdown", "--task", TASK, "--device", "cpu", "--count", "4", "--output_path", str(path)]
    assert benchmark_cli.main(argv) == 0
    bundle = json.loads(path.read_text())
    assert bundles.validation_errors(bundle) == []
    assert bundle["run"]["workflow"] == "countdown" and bundle["run"]["framework"] is None
    assert bundle["runtime"]["iterations_completed"] == 4
    assert "  counted 4 down in a single process" in capsys.readouterr().out
