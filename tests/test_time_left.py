"""The study's estimate of the time left: its arithmetic on a fake clock, and its line under Snakemake's real progress
lines."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from snakemake_interface_logger_plugins.common import LogEvent

from rlscale.study.time_left import TimeLeft, TimeLeftHandler, format_left

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
ROOT = Path(__file__).resolve().parents[1]


class TestEstimate:
    def test_no_estimate_before_a_job_finished(self):
        state = TimeLeft(planned={"train": 2})
        state.start(1, "train", now=0.0)
        assert state.seconds_left(now=5.0) is None
        assert format_left(None) == "time left: no estimate until a job has finished"

    def test_jobs_left_at_their_rules_median_over_the_concurrency_seen(self):
        """Two train jobs ran side by side (10 s and 30 s), a plan job took 2 s, and a third train job has run 5 s:
        47 s of job time in the 30 s since the first start, concurrency 47/30. Left: one train job not started (median
        20 s), one benchmark job not started (no benchmark finished: the longest rule median, train's 20 s) and the
        running train job (15 s to go): 55 s of work."""
        state = TimeLeft(planned={"train": 4, "benchmark": 1, "plan": 1})
        state.start(1, "train", now=0.0)
        state.start(2, "train", now=0.0)
        state.start(4, "plan", now=0.0)
        state.finish(4, now=2.0)
        state.finish(1, now=10.0)
        state.finish(2, now=30.0)
        state.start(3, "train", now=25.0)
        assert state.seconds_left(now=30.0) == pytest.approx(55.0 / (47.0 / 30.0))

    def test_an_overdue_running_job_counts_nothing_more(self):
        state = TimeLeft(planned={"parity": 2})
        state.start(1, "parity", now=0.0)
        state.finish(1, now=10.0)
        state.start(2, "parity", now=10.0)
        assert state.seconds_left(now=40.0) == 0.0

    @pytest.mark.parametrize(("seconds", "text"), [(42.4, "about 42 s"), (600.0, "about 10 min")])
    def test_format(self, seconds, text):
        assert format_left(seconds) == f"time left: {text} (estimate from the finished jobs' times)"


def test_a_record_it_cannot_read_ends_the_estimate_in_one_line():
    """A Snakemake whose job records changed: one line saying so, then no estimate, and the run goes on."""
    stream = io.StringIO()
    handler = TimeLeftHandler(lambda record: True, stream=stream, clock=lambda: 0.0)
    record = logging.LogRecord("snakemake", logging.INFO, __file__, 1, None, None, None)
    record.event = LogEvent.JOB_INFO  # without its jobid and rule_name
    handler.emit(record)
    handler.emit(record)
    [line] = stream.getvalue().splitlines()
    assert line.startswith("time left: no estimate: Snakemake ") and "changed its job_info log record" in line


SNAKEFILE = """
from rlscale.study.time_left import report_time_left
report_time_left()

rule all:
    input: expand("out/{i}.txt", i=range(3))

rule work:
    output: "out/{i}.txt"
    shell: "sleep 0.2; echo {wildcards.i} > {output}"
"""


@pytest.mark.parametrize("quiet", [False, True])
def test_estimate_follows_each_progress_line_but_the_last(tmp_path, quiet):
    """A real Snakemake run prints the estimate right under each progress line before the last, and neither with
    ``--quiet progress``."""
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    argv = [SNAKEMAKE, "--cores", "1", *(["--quiet", "progress"] if quiet else [])]
    result = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "steps (" in line or "time left" in line]
    if quiet:
        assert lines == []
        return
    assert [line for line in lines if "steps (" in line] == [
        f"{done} of 4 steps ({done * 25}%) done" for done in (1, 2, 3, 4)
    ]
    for done in (1, 2, 3):
        progress = lines.index(f"{done} of 4 steps ({done * 25}%) done")
        assert lines[progress + 1].startswith("time left: about ")
    assert lines[-1] == "4 of 4 steps (100%) done"
