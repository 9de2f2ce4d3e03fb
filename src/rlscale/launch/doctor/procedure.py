"""The troubleshooting procedure as a generator of steps: pure decisions, no process started here.

:func:`procedure` yields each :class:`~.steps.Step`, is sent back its :class:`~.steps.StepResult` and returns the
:class:`~.report.Report`. Whoever drives it runs the steps (:mod:`.execute`); tests drive it with made-up results.
In order:

1. a short single-rank run (training works at all);
2. the resolved launch at the largest world size (``train_multigpu --dry_run``);
3. ``nccl_probe`` at each world size, each under a timeout;
4. the topology;
5. for the smallest world size that failed or hung, a rerun with ``NCCL_DEBUG=INFO``, which reads the transports NCCL
   picked;
6. the workarounds one at a time at that size. The first that makes it pass is kept only if the failure comes back
   without it; a pass without it too means an intermittent failure, and nothing is kept. A kept one is then tried at
   the larger failing sizes; one that still fails is searched in turn, with the kept variables set.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import replace

from rlscale.launch.doctor.report import Finding, Report, Resolution
from rlscale.launch.doctor.steps import DoctorConfig, Outcome, Step, StepKind, StepResult, Variables, describe

Procedure = Generator[Step, StepResult, Report]

DRY_RUN_TIMEOUT_S = 120.0
"""The dry run imports no torch and starts nothing: seconds, unless the host is very busy."""

TOPOLOGY_TIMEOUT_S = 30.0

CPU_TOPOLOGY = "CPU ranks (gloo) use no GPU link"


class _Stopped(Exception):
    """A step was interrupted: the procedure ends with what it has."""


def procedure(config: DoctorConfig, environ: Mapping[str, str]) -> Procedure:
    """The steps for ``config``; ``environ`` (the doctor's environment, read, never changed) decides which variant of
    a workaround applies and which are already in effect."""
    run = _Run(config, environ)
    try:
        yield from run.steps()
    except _Stopped:
        run.interrupted = True
    return run.report()


class _Run:
    def __init__(self, config: DoctorConfig, environ: Mapping[str, str]) -> None:
        self.config = config
        self.environ = dict(environ)
        self.results: list[StepResult] = []
        self.findings: dict[int, Finding] = {}
        self.kept: Variables = ()
        self.notes: list[str] = []
        self.interrupted = False

    def report(self) -> Report:
        findings = tuple(self.findings[size] for size in sorted(self.findings))
        return Report(self.config, tuple(self.results), findings, self.kept, tuple(self.notes), self.interrupted)

    def note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)

    def run(self, step: Step) -> Generator[Step, StepResult, StepResult]:
        result = yield step
        self.results.append(result)
        if result.outcome is Outcome.INTERRUPTED:
            raise _Stopped
        return result

    def steps(self) -> Generator[Step, StepResult, None]:
        config = self.config
        single = yield from self.run(self._single_rank())
        if single.outcome.failed:
            self.note("The single-rank run fails: no multi-rank setting fixes that; read its log first.")
        yield from self.run(self._dry_run())
        failing: dict[int, StepResult] = {}
        for size in config.world_sizes:
            result = yield from self.run(self._probe(StepKind.PROBE, size, f"probe at world size {size}"))
            if result.outcome.failed:
                failing[size] = result
        if not config.world_sizes:
            self.note("One GPU visible: no world size of 2 or more to probe.")
        skip = CPU_TOPOLOGY if config.device == "cpu" else None
        yield from self.run(Step(StepKind.TOPOLOGY, "topology", timeout_s=TOPOLOGY_TIMEOUT_S, skip=skip))
        self.findings = {size: Finding(size, result.outcome, result.detail) for size, result in failing.items()}
        remaining = sorted(failing)
        while remaining:
            size = remaining.pop(0)
            debug = yield from self.run(
                self._probe(
                    StepKind.NCCL_DEBUG,
                    size,
                    f"world size {size} with NCCL_DEBUG=INFO",
                    (*self.kept, ("NCCL_DEBUG", "INFO")),
                    ("--log_all_ranks",),
                )
            )
            self._update(size, transports=debug.transports)
            resolution, fix = yield from self._search(size)
            self._update(size, resolution=resolution, fix=fix)
            if resolution is not Resolution.FIXED:
                continue
            self.kept += fix
            still = []
            for other in remaining:
                result = yield from self.run(
                    self._probe(StepKind.VERIFY, other, f"world size {other} with {describe(self.kept)}", self.kept)
                )
                if result.passed:
                    self._update(other, resolution=Resolution.FIXED_BY_KEPT, fix=self.kept)
                else:
                    still.append(other)
            remaining = still

    def _search(self, size: int) -> Generator[Step, StepResult, tuple[Resolution, Variables]]:
        """Try each workaround at ``size`` over the kept variables; confirm the first that passes."""
        base = self.kept
        effective = {**self.environ, **dict(base)}
        for workaround in self.config.workarounds:
            variables = workaround.variables_for(effective)
            if variables is None:
                self.note(f"{describe(workaround.variables)} is already set here: not tried.")
                continue
            result = yield from self.run(
                self._probe(
                    StepKind.WORKAROUND, size, f"world size {size} with {describe(variables)}", base + variables
                )
            )
            if not result.passed:
                continue
            again = yield from self.run(
                self._probe(StepKind.CONFIRM, size, f"world size {size} again without {describe(variables)}", base)
            )
            if again.outcome.failed:
                return Resolution.FIXED, variables
            return Resolution.INTERMITTENT, ()
        return Resolution.NOT_FIXED, ()

    def _update(self, size: int, **changes) -> None:
        self.findings[size] = replace(self.findings[size], **changes)

    def _train_args(self) -> tuple[str, ...]:
        config = self.config
        args = ("--task", config.task, "--rl_library", config.library, "--device", config.device)
        args += ("--max_iterations", str(config.iterations), "--log_root", f"{config.log_dir}/train")
        return args + (("--num_envs", str(config.num_envs)) if config.num_envs is not None else ())

    def _single_rank(self) -> Step:
        iterations = self.config.iterations
        title = f"single-rank run ({iterations} iteration{'s' if iterations > 1 else ''})"
        return Step(StepKind.SINGLE_RANK, title, ("train", *self._train_args()), timeout_s=self.config.train_timeout_s)

    def _dry_run(self) -> Step:
        sizes = self.config.world_sizes
        size = sizes[-1] if sizes else 1
        argv = ("train_multigpu", "--num_gpus", str(size), *self._train_args(), "--dry_run")
        return Step(StepKind.DRY_RUN, f"resolved launch at world size {size}", argv, timeout_s=DRY_RUN_TIMEOUT_S)

    def _probe(self, kind: StepKind, size: int, title: str, env: Variables = (), extra: tuple[str, ...] = ()) -> Step:
        config = self.config
        argv = ("nccl_probe", "--num_gpus", str(size), "--device", config.device)
        argv += ("--hang_timeout", f"{config.hang_timeout_s:g}", *extra)
        return Step(kind, title, argv, env, size, config.probe_timeout_s)
