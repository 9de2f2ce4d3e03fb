"""Run one doctor step: ``python -m rlscale ...`` under the launcher's supervision, its output in a log file.

Each step runs in a process group of its own (:func:`rlscale.launch.supervise.run_supervised`), so a probe that hangs
past its timeout is stopped with every rank it started: no orphan keeps a GPU. :func:`classify` reads the exit code
and the log into a :class:`~.steps.StepResult`.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from rlscale.launch.doctor.steps import Outcome, Step, StepKind, StepResult, describe
from rlscale.launch.gpus import NvmlError, p2p_lines
from rlscale.launch.supervise import run_supervised
from rlscale.run.stop_signals import INTERRUPTED_EXIT_CODE, StopSignals

GLOO_TRANSPORT = "TCP (gloo)"
"""What CPU ranks use: gloo reads no ``NCCL_*`` variable."""

_HANG = re.compile(r"(ranks? [\d, ]+ made no progress for [^;]*)")
_VIA = re.compile(r"NCCL INFO .* via (\S+)")
_LAUNCH = ("-m rlscale.launch.torchrun ", "-m skrl.utils.distributed.jax ")
MAX_DETAIL = 300


class _Deadline:
    """The abort check of a step: a reason once ``timeout_s`` has passed."""

    def __init__(self, title: str, timeout_s: float) -> None:
        self.title = title
        self.timeout_s = timeout_s
        self.end = time.monotonic() + timeout_s
        self.expired = False

    def check(self) -> str | None:
        if time.monotonic() < self.end:
            return None
        self.expired = True
        return f"[doctor] {self.title}: no result within {self.timeout_s:g} s"


def execute(step: Step, environ: Mapping[str, str], log: Path, backend: str) -> StepResult:
    """Run ``step`` with ``environ`` (its own variables over it), its output to ``log``."""
    if step.skip is not None:
        return StepResult(step, Outcome.SKIPPED, detail=step.skip)
    if step.kind is StepKind.TOPOLOGY:
        return topology(step)
    env = {**environ, **dict(step.env), "PYTHONUNBUFFERED": "1"}
    deadline = _Deadline(step.title, step.timeout_s)
    started = time.monotonic()
    stops = StopSignals()
    with log.open("w") as out:
        out.write(f"$ {command_line(step)}\n")
        out.flush()
        command = [sys.executable, "-m", "rlscale", *step.argv]
        code = run_supervised(command, env=env, stdout=out, stderr=out, abort_check=deadline.check, stops=stops)
    seconds = time.monotonic() - started
    if stops.arrived:  # the doctor was asked to stop: whatever the step then did, it ends here
        return StepResult(step, Outcome.INTERRUPTED, seconds, "stopped on request", log=str(log))
    text = log.read_text(errors="replace")
    return classify(step, code, text, deadline.expired, seconds, str(log), backend)


def command_line(step: Step) -> str:
    """The step as a user would type it: ``NAME=VALUE rlscale ARGS``."""
    prefix = f"{describe(step.env)} " if step.env else ""
    return f"{prefix}rlscale {shlex.join(step.argv)}"


def _clip(line: str) -> str:
    line = line.strip()
    return line if len(line) <= MAX_DETAIL else line[: MAX_DETAIL - 3] + "..."


def failure_line(text: str) -> str:
    """The one line that says why a step failed: a refusal (``error:``), the launcher's summary (``[ERROR]``), else
    the last line."""
    lines = [line for line in text.splitlines()[1:] if line.strip()]
    for marker in ("error:", "[ERROR]"):
        found = [line for line in lines if marker in line]
        if found:
            return _clip(found[-1].replace("[ERROR] ", ""))
    return _clip(lines[-1]) if lines else "no output"


def transports(text: str, backend: str) -> tuple[str, ...]:
    """The transports NCCL's ``NCCL_DEBUG=INFO`` lines name (``P2P/CUMEM``, ``SHM/direct``, ``NET/IB``...); gloo's
    for CPU ranks."""
    if backend == "gloo":
        return (GLOO_TRANSPORT,)
    found = {"/".join(match.split("/")[:2]) for match in _VIA.findall(text)}
    if re.search(r"NCCL INFO .*NVLS", text):
        found.add("NVLS")
    return tuple(sorted(found))


def classify(
    step: Step, code: int, text: str, expired: bool, seconds: float, log: str | None, backend: str
) -> StepResult:
    """The result of a step that exited ``code`` after printing ``text``; ``expired``: stopped at its timeout."""
    found = transports(text, backend) if step.kind is StepKind.NCCL_DEBUG else ()
    hang = _HANG.search(text)

    def result(outcome: Outcome, detail: str, shown: str = "") -> StepResult:
        return StepResult(step, outcome, seconds, detail, shown, found, log)

    if expired:
        return result(Outcome.HUNG, f"no result within {step.timeout_s:g} s" + (f": {hang.group(1)}" if hang else ""))
    if code == INTERRUPTED_EXIT_CODE:
        return result(Outcome.INTERRUPTED, "stopped on request")
    if code == 0:
        lines = text.splitlines()
        if step.kind is StepKind.DRY_RUN:
            command = next((line for line in reversed(lines) if any(mark in line for mark in _LAUNCH)), "")
            return result(Outcome.PASSED, "", _clip(command) if command else "")
        verdict = next(
            (line for line in reversed(lines) if line.startswith(("nccl_probe:", "[rlscale] completed"))), ""
        )
        return result(Outcome.PASSED, _clip(verdict.removeprefix("nccl_probe: ").removeprefix("[rlscale] ")))
    if hang:
        return result(Outcome.HUNG, hang.group(1).strip())
    return result(Outcome.FAILED, f"exit {code}: {failure_line(text)}")


def topology(step: Step, nvidia_smi: str = "nvidia-smi") -> StepResult:
    """``nvidia-smi topo -m`` where it runs; NVML's P2P status of each pair of GPUs otherwise. Informational: a host
    where neither answers gives a skipped step, not a failure."""
    started = time.monotonic()
    found = shutil.which(nvidia_smi)
    if found is not None:
        try:
            shown = subprocess.run(
                [found, "topo", "-m"], capture_output=True, text=True, timeout=step.timeout_s, check=True
            ).stdout
            return StepResult(step, Outcome.PASSED, time.monotonic() - started, "nvidia-smi topo -m", shown.rstrip())
        except (OSError, subprocess.SubprocessError):
            pass  # NVML may still answer
    try:
        lines = p2p_lines()
    except (OSError, NvmlError) as error:
        return StepResult(step, Outcome.SKIPPED, detail=f"no nvidia-smi topo -m, and NVML: {error}")
    detail = "NVML's P2P status (no nvidia-smi topo -m)"
    return StepResult(step, Outcome.PASSED, time.monotonic() - started, detail, "\n".join(lines))
