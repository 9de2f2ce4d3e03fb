"""The doctor's report, as typed values: every step's result, what it found at each failing world size, and the
variables to keep. Pure; :mod:`.main` prints :meth:`Report.lines` and writes :meth:`Report.to_json`."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rlscale.launch.doctor.steps import DoctorConfig, Outcome, StepResult, Variables, describe

WIDTH = max(map(len, Outcome))
INDENT = " " * (WIDTH + 5)


class Resolution(enum.StrEnum):
    FIXED = "fixed"
    """A workaround made it pass, and the failure came back without it."""
    FIXED_BY_KEPT = "fixed_by_kept"
    """It passes with the variables kept for a smaller world size."""
    NOT_FIXED = "not_fixed"
    """No single workaround made it pass."""
    INTERMITTENT = "intermittent"
    """A workaround made it pass, but so did a rerun without it: the failure does not reproduce."""
    UNTRIED = "untried"
    """The doctor was stopped before it got there."""


@dataclass(frozen=True)
class Finding:
    """What the doctor found at one world size whose probe failed or hung.

    Args:
        world_size: The world size.
        outcome: How its first probe ended (failed or hung).
        detail: That probe's one line.
        resolution: What the workarounds did.
        fix: The variables that fixed it (with :attr:`Resolution.FIXED`: confirmed), else empty.
        transports: What NCCL picked there, from the ``NCCL_DEBUG=INFO`` rerun.
    """

    world_size: int
    outcome: Outcome
    detail: str
    resolution: Resolution = Resolution.UNTRIED
    fix: Variables = ()
    transports: tuple[str, ...] = ()

    def line(self) -> str:
        head = f"world size {self.world_size}: {self.outcome}"
        if self.resolution is Resolution.FIXED:
            return f"{head}; {describe(self.fix)} fixes it, and it {self.outcome} again without it"
        if self.resolution is Resolution.FIXED_BY_KEPT:
            return f"{head}; passes with {describe(self.fix)}"
        if self.resolution is Resolution.INTERMITTENT:
            return f"{head}; passed again without any workaround: intermittent, no variable confirmed"
        if self.resolution is Resolution.NOT_FIXED:
            return f"{head}; no single workaround fixed it (see the NCCL_DEBUG=INFO log)"
        return f"{head}; not investigated"


@dataclass(frozen=True)
class Report:
    """The doctor's findings.

    Args:
        config: What it checked.
        results: Every step's result, in order.
        findings: One per world size whose probe failed or hung, smallest first.
        kept: The variables that fixed a failure that came back without them; what the export line sets.
        notes: Other lines worth reading (a single-rank failure, workarounds already in effect).
        interrupted: Whether it was stopped before the end.
    """

    config: DoctorConfig
    results: tuple[StepResult, ...]
    findings: tuple[Finding, ...] = ()
    kept: Variables = ()
    notes: tuple[str, ...] = ()
    interrupted: bool = False

    @property
    def passed(self) -> bool:
        """Whether every step the procedure ran passed (or did not apply) before any workaround."""
        return not self.interrupted and not self.findings and not any(r.outcome.failed for r in self.results)

    @property
    def export_line(self) -> str | None:
        """``export NAME=VALUE ...`` of the kept variables; None when nothing needs setting."""
        return f"export {describe(self.kept)}" if self.kept else None

    def verdict(self) -> str:
        if self.interrupted:
            return "interrupted before the end"
        if self.passed:
            return "everything passed"
        failed = [r.step.title for r in self.results if r.outcome.failed and r.step.world_size is None]
        where = failed + [f"world size {finding.world_size}" for finding in self.findings]
        fixed = all(f.resolution in (Resolution.FIXED, Resolution.FIXED_BY_KEPT) for f in self.findings)
        if self.kept and fixed and not failed:
            return f"failed at {', '.join(where)}; fixed by {describe(self.kept)}"
        return f"failed at {', '.join(where)}"

    def lines(self) -> list[str]:
        """The report as printed: one line per step, the findings, the verdict and the export line."""
        config = self.config
        ranks = "CPU ranks (gloo)" if config.device == "cpu" else "GPU ranks (NCCL)"
        sizes = f"world sizes {config.world_sizes[0]}-{config.world_sizes[-1]}" if config.world_sizes else "no probe"
        lines = [f"rlscale doctor: {config.task} with {config.library}, {ranks}, {sizes}"]
        for result in self.results:
            seconds = f"  {result.seconds:.1f} s" if result.outcome is not Outcome.SKIPPED else ""
            detail = f"  {result.detail}" if result.detail else ""
            lines.append(f"  {result.outcome:<{WIDTH}} {result.step.kind.stage} {result.step.title}{seconds}{detail}")
            if result.transports:
                lines.append(f"{INDENT}transport: {', '.join(result.transports)}")
            if result.log and (result.outcome.failed or result.transports):
                lines.append(f"{INDENT}log: {result.log}")
            lines += [f"{INDENT}{text}" for text in result.text.splitlines()]
        lines += [finding.line() for finding in self.findings]
        lines += self.notes
        lines.append(f"verdict: {self.verdict()}")
        if self.export_line:
            lines.append("For this machine, in the shell that launches the job (the doctor writes it nowhere):")
            lines.append(self.export_line)
        lines.append(f"logs: {config.log_dir}")
        return lines

    def to_json(self) -> dict:
        """The report as JSON values (``--output``)."""
        config = self.config
        return {
            "task": config.task,
            "library": config.library,
            "device": config.device,
            "backend": config.backend,
            "world_sizes": list(config.world_sizes),
            "passed": self.passed,
            "interrupted": self.interrupted,
            "verdict": self.verdict(),
            "steps": [
                {
                    "stage": r.step.kind.stage,
                    "kind": str(r.step.kind),
                    "title": r.step.title,
                    "command": ["rlscale", *r.step.argv] if r.step.argv else None,
                    "env": dict(r.step.env),
                    "world_size": r.step.world_size,
                    "outcome": str(r.outcome),
                    "seconds": round(r.seconds, 3),
                    "detail": r.detail,
                    "text": r.text or None,
                    "transports": list(r.transports),
                    "log": r.log,
                }
                for r in self.results
            ],
            "findings": [
                {
                    "world_size": f.world_size,
                    "outcome": str(f.outcome),
                    "detail": f.detail,
                    "resolution": str(f.resolution),
                    "fix": dict(f.fix),
                    "transports": list(f.transports),
                }
                for f in self.findings
            ],
            "kept": dict(self.kept),
            "export": self.export_line,
            "notes": list(self.notes),
            "log_dir": config.log_dir,
        }
