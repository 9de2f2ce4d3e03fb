"""The study's estimate of the time left, printed under each of Snakemake's progress lines.

A logging handler on Snakemake's logger reads the events Snakemake publishes to every log handler
(rlscale.study.snakemake_internals reads them): the job counts per rule, each job's start and end, and the progress.
A job's expected time is the median time of its rule's finished jobs (while its rule has none, the longest such
median: a rule not yet seen is more often a long one), counted from its start to its end as Snakemake saw them, lease
waits included. The work left is the expected time of the jobs not yet started plus what remains of the running ones;
it is divided by the concurrency seen so far (job time, finished and running, per second since the first job
started), so jobs that share the host, and jobs that queue for one GPU, both count as they ran.
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from rlscale.study.snakemake_internals import (
    JobFinished,
    JobStarted,
    Progress,
    RunPlanned,
    UnsupportedSnakemake,
    add_log_handler,
    scheduler_event,
    shown_on_console,
)


@dataclass
class TimeLeft:
    """What the estimate needs from the events so far."""

    planned: dict[str, int] = field(default_factory=dict)
    """Jobs per rule in this call (finished before it excluded: Snakemake counts only the jobs it will run)."""
    running: dict[int, tuple[str, float]] = field(default_factory=dict)
    """Rule and start time of each running job, by job id."""
    finished: dict[str, list[float]] = field(default_factory=dict)
    """Durations of the finished jobs, by rule."""
    started_at: float | None = None
    """When the first job started."""

    def start(self, job_id: int, rule: str, now: float) -> None:
        self.running[job_id] = (rule, now)
        if self.started_at is None:
            self.started_at = now

    def finish(self, job_id: int, now: float) -> None:
        if job_id in self.running:
            rule, began = self.running.pop(job_id)
            self.finished.setdefault(rule, []).append(now - began)

    def seconds_left(self, now: float) -> float | None:
        """The estimate, or None before the first job finished (nothing to estimate from)."""
        durations = [duration for rule in self.finished.values() for duration in rule]
        if not durations or self.started_at is None or now <= self.started_at:
            return None
        medians = {rule: statistics.median(times) for rule, times in self.finished.items() if times}
        unseen = max(medians.values())

        def expected(rule: str) -> float:
            return medians.get(rule, unseen)

        running_rules = [rule for rule, _ in self.running.values()]
        not_started = {
            rule: count - len(self.finished.get(rule, [])) - running_rules.count(rule)
            for rule, count in self.planned.items()
        }
        work = sum(max(count, 0) * expected(rule) for rule, count in not_started.items())
        work += sum(max(expected(rule) - (now - began), 0.0) for rule, began in self.running.values())
        busy = sum(durations) + sum(now - began for _, began in self.running.values())
        concurrency = max(busy / (now - self.started_at), 1.0)
        return work / concurrency


def format_left(seconds: float | None) -> str:
    """The line printed under a progress line."""
    if seconds is None:
        return "time left: no estimate until a job has finished"
    amount = f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
    return f"time left: about {amount} (estimate from the finished jobs' times)"


class TimeLeftHandler(logging.Handler):
    """Print the estimate of the time left under each progress line that the console shows."""

    def __init__(
        self,
        console: Callable[[logging.LogRecord], bool],
        stream: TextIO = sys.stderr,
        clock: Callable[[], float] = time.monotonic,
    ):
        """
        Args:
            console: Whether the console shows a record (the default handler's filters, which apply ``--quiet``).
            stream: Where the estimate goes.
            clock: Seconds, monotonic.
        """
        super().__init__()
        self.console = console
        self.stream = stream
        self.clock = clock
        self.state = TimeLeft()
        self.unreadable = False  # a record of a Snakemake whose records changed: no estimate from then on

    def emit(self, record: logging.LogRecord) -> None:
        if self.unreadable:
            return
        try:
            event = scheduler_event(record)
        except UnsupportedSnakemake as error:  # the estimate is an aid: say why it stops, and let the run go on
            self.unreadable = True
            print(f"time left: no estimate: {error}", file=self.stream, flush=True)
            return
        now = self.clock()
        match event:
            case RunPlanned():
                self.state.planned = dict(event.jobs_per_rule)
            case JobStarted():
                self.state.start(event.job_id, event.rule, now)
            case JobFinished():
                self.state.finish(event.job_id, now)
            case Progress() if event.done < event.total and self.console(record):
                print(format_left(self.state.seconds_left(now)), file=self.stream, flush=True)


def report_time_left() -> TimeLeftHandler:
    """Add a :class:`TimeLeftHandler` to Snakemake's logger, after its console handler, so that the estimate follows
    the progress line; shown where the console handler's filters show that line."""
    handler = TimeLeftHandler(shown_on_console())
    add_log_handler(handler)
    return handler
