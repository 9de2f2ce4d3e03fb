"""The study as a typed plan: the one place that turns the effective config into jobs.

:class:`StudyPlan` reads the config once into a :class:`StudyConfig` and files every job the study runs, a
:class:`~rlscale.study.job.Job` record each, under its id (:data:`rlscale.study.paths.JOB_IDS`). A rule maps its
wildcards to its job (:meth:`StudyPlan.job`) and hands the record to ``python -m rlscale.study run`` as JSON; the
stage builds the ``rlscale`` command from the record's typed values. No argument string is formatted by one layer and
parsed by another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlscale.study import paths
from rlscale.study.checks import node_split
from rlscale.study.config import envs_for
from rlscale.study.evaluation import evaluation_cells
from rlscale.study.job import DEFAULT_RDZV_PORT, STAGE_OF_KIND, Job, Library, RunArgs, Tracker
from rlscale.study.parity import parity_cells, variant_knobs
from rlscale.study.paths import JobKind
from rlscale.study.stage_policy import STAGE_POLICIES, Stage

ENV_ONLY = "env-only"
"""The library segment of runtime bundles: the runtime benchmark steps the env without a library."""


@dataclass(frozen=True)
class StudyConfig:
    """The values of the effective study config (:func:`rlscale.study.config.validated_config`) that its jobs read."""

    study: str
    device: str
    tasks: tuple[str, ...]
    libraries: tuple[Library, ...]
    world_sizes: tuple[int, ...]
    gpus_per_node: int
    seeds: tuple[int, ...]
    envs_per_task: Mapping[str, tuple[int, ...]]
    validate_iterations: int
    train_iterations: int
    benchmark_iterations: int
    warmup_iterations: int
    checkpoint_interval: int
    runtime_warmup_steps: int
    runtime_measured_steps: int
    validate_num_envs: int
    peer_baseline: bool
    logger: str
    log_project_name: str
    rdzv_port: int
    evaluation_num_envs: int
    evaluation_seed: int

    @classmethod
    def from_mapping(cls, study: Mapping) -> StudyConfig:
        overrides = study["agent_overrides"]
        return cls(
            study=study["study"],
            device=study["device"],
            tasks=tuple(study["tasks"]),
            libraries=tuple(
                Library(entry["name"], entry["ml_framework"], tuple(overrides.get(entry["name"], ())))
                for entry in study["libraries"]
            ),
            world_sizes=tuple(sorted(study["world_sizes"])),
            gpus_per_node=study["gpus_per_node"],
            seeds=tuple(study["seeds"]),
            envs_per_task={task: tuple(envs_for(study, task)) for task in study["tasks"]},
            validate_iterations=study["iterations"]["validate"],
            train_iterations=study["iterations"]["train"],
            benchmark_iterations=study["iterations"]["benchmark"],
            warmup_iterations=study["warmup_iterations"],
            checkpoint_interval=study["checkpoint_interval"],
            runtime_warmup_steps=study["runtime_steps"]["warmup"],
            runtime_measured_steps=study["runtime_steps"]["measured"],
            validate_num_envs=study["validate_num_envs"],
            peer_baseline=bool(study["peer_baseline"]),
            logger=study["logger"],
            log_project_name=study.get("log_project_name") or "",
            rdzv_port=study.get("rdzv_port", DEFAULT_RDZV_PORT),
            evaluation_num_envs=study["evaluation"]["num_envs"],
            evaluation_seed=study["evaluation"]["seed"],
        )

    @property
    def train_seed(self) -> int:
        """The seed of the train and validate runs, and of the startup and runtime benchmarks: the first."""
        return self.seeds[0]

    def train_envs(self, task: str) -> int:
        """Per-rank env count of a task's train runs (and its validate run, startup and runtime bundles): the
        largest of its env counts, so that one compile serves them all."""
        return max(self.envs_per_task[task])

    def library(self, name: str) -> Library:
        return next(library for library in self.libraries if library.name == name)

    def tracker(self, stage: Stage) -> Tracker | None:
        """The tracker of the study's runs of ``stage``: none with ``tensorboard``, so that their arguments stay the
        ones such a study always had."""
        if self.logger == "tensorboard":
            return None
        return Tracker(self.logger, self.log_project_name, self.study, str(stage))

    def nodes(self, world_size: int) -> int:
        return node_split(world_size, self.gpus_per_node, self.device).nodes


class StudyPlan:
    """Every job of a study, by id; the cells the aggregate and parity rules read beside them."""

    def __init__(self, study: Mapping):
        config = self.config = StudyConfig.from_mapping(study)
        self.parity_cells = parity_cells(study, [library.name for library in config.libraries])
        self.training_cells = _training_cells(config)
        self.train_cells = _train_cells(config)
        self.evaluation_cells = evaluation_cells(study, self.train_cells, self.parity_cells)
        self.jobs: dict[str, Job] = {job.id: job for job in self._all_jobs()}

    def job(self, kind: JobKind, wildcards: Mapping[str, Any]) -> Job:
        """The job a rule of ``kind`` runs for ``wildcards``.

        Raises:
            KeyError: If the study plans no such job.
        """
        job_id = paths.JOB_IDS[kind].format(**wildcards)
        if job_id not in self.jobs:
            raise KeyError(f"{job_id} is not a job of study {self.config.study!r}: its config plans no such run")
        return self.jobs[job_id]

    def probe_sweeps(self) -> list[str]:
        """The probe's sweeps, one per world size above 1, beside its reports."""
        return [str(paths.probe_sweep_of(job.output)) for job in self.jobs.values() if job.kind == JobKind.PROBE]

    def other_bundles(self) -> list[str]:
        """Startup (per library) and runtime (env only) bundles: at the largest world size, one seed each."""
        return [job.output for job in self.jobs.values() if job.kind == JobKind.SINGLE_SEED_BENCHMARK]

    def _job(self, kind: JobKind, cell: Mapping[str, Any], output: str, **values: Any) -> Job:
        """The job of ``kind`` for ``cell`` (the rules' wildcards): at the cell's world size, or one rank where its
        stage runs one process on one device (an evaluation of a run at any world size)."""
        cell = {"study": self.config.study, **cell}
        single_device = STAGE_POLICIES[STAGE_OF_KIND[kind]].single_device
        world_size = 1 if single_device else int(cell.get("ws", 1))
        return Job(
            id=paths.JOB_IDS[kind].format(**cell),
            kind=kind,
            device=self.config.device,
            output=output.format(**cell),
            world_size=world_size,
            nodes=self.config.nodes(world_size),
            rdzv_port=self.config.rdzv_port,
            **values,
        )

    def _all_jobs(self):
        config = self.config
        for task in config.tasks:
            cell = {"task": task, "study": config.study}
            yield self._job(
                JobKind.CHECK_TASK,
                cell,
                paths.CHECK_TASK_REPORT,
                run=RunArgs(task=task, num_envs=config.validate_num_envs),
            )
            for library in config.libraries:
                library_cell = {**cell, "library": library.name}
                yield self._job(
                    JobKind.VALIDATE,
                    library_cell,
                    paths.VERDICT,
                    run=self._full_size_run(
                        task,
                        library,
                        max_iterations=config.validate_iterations,
                        run_name="validate",
                        log_root=paths.VALIDATE_RUN_ROOT.format(**library_cell),
                    ),
                )
        for world_size in config.world_sizes:
            if world_size > 1:
                yield self._job(JobKind.PROBE, {"ws": world_size}, paths.PROBE_REPORT)
        yield from self._train_jobs()
        yield from self._benchmark_jobs()
        yield from self._parity_jobs()
        for cell in self.evaluation_cells:
            kind = JobKind.EVALUATE_TRAIN if cell["stage"] == "train" else JobKind.EVALUATE_PARITY
            values = {
                "task": cell["task"],
                "library": cell["rl_library"],
                "ws": cell["world_size"],
                "variant": cell["variant"],
                "seed": cell["seed"],
            }
            yield self._job(
                kind,
                values,
                cell["path"],
                run=RunArgs(num_envs=config.evaluation_num_envs, seed=config.evaluation_seed),
                record=cell["record"],
                every_checkpoint=kind == JobKind.EVALUATE_PARITY,
            )

    def _full_size_run(self, task: str, library: Library, **values: Any) -> RunArgs:
        """A run of the task's train env count and the first seed (a validate or train run), with ``values``."""
        config = self.config
        return RunArgs(task=task, library=library, num_envs=config.train_envs(task), seed=config.train_seed, **values)

    def _train_jobs(self):
        """Per task × library × world size, one full run at the task's train env count and the first seed.

        ``--resume auto``: a rerun of the job (``--rerun-incomplete`` after a crash or a kill) continues the run from
        its last checkpoint, so at most ``checkpoint_interval`` iterations are trained twice.
        """
        config = self.config
        for task in config.tasks:
            for library in config.libraries:
                for world_size in config.world_sizes:
                    cell = {"task": task, "library": library.name, "ws": world_size, "study": config.study}
                    yield self._job(
                        JobKind.TRAIN,
                        cell,
                        paths.TRAIN_MANIFEST,
                        run=self._full_size_run(
                            task,
                            library,
                            max_iterations=config.train_iterations,
                            run_name=f"ws{world_size}",
                            log_root=paths.TRAIN_RUN_ROOT.format(**cell),
                            resume_auto=True,
                            checkpoint_interval=config.checkpoint_interval,
                            tracker=config.tracker(Stage.TRAIN),
                        ),
                    )

    def _benchmark_jobs(self):
        """Every training cell (every seed in one warm process; the bundle path's ``{seed}`` filled in by ``rlscale
        benchmark --seeds``), and the startup and runtime runs."""
        config = self.config
        for task in config.tasks:
            for library in config.libraries:
                for world_size in config.world_sizes:
                    for envs in config.envs_per_task[task]:
                        cell = {"task": task, "library": library.name, "ws": world_size, "envs": envs}
                        cell["study"] = config.study
                        yield self._job(
                            JobKind.TRAINING_BENCHMARK,
                            cell,
                            paths.TRAINING_BUNDLE.replace("{seed}", "{{seed}}"),
                            workflow="training",
                            run=RunArgs(
                                task=task,
                                num_envs=envs,
                                seeds=config.seeds,
                                library=library,
                                max_iterations=config.benchmark_iterations,
                                warmup_iterations=config.warmup_iterations,
                                peer=config.peer_baseline,
                                tracker=config.tracker(Stage.BENCHMARK),
                                log_root=paths.BENCHMARK_LOG_ROOT.format(**cell),
                                output_path=paths.TRAINING_BUNDLE.format(**cell, seed="{seed}"),
                            ),
                        )
        largest = config.world_sizes[-1]
        for task in config.tasks:
            envs = config.train_envs(task)
            for library in [*config.libraries, None]:
                workflow = "startup" if library else "runtime"
                cell = {
                    "task": task,
                    "library": library.name if library else ENV_ONLY,
                    "ws": largest,
                    "envs": envs,
                    "seed": config.train_seed,
                    "workflow": workflow,
                    "study": config.study,
                }
                steps = {}
                if library is None:
                    steps = {"warmup_steps": config.runtime_warmup_steps, "num_steps": config.runtime_measured_steps}
                yield self._job(
                    JobKind.SINGLE_SEED_BENCHMARK,
                    cell,
                    paths.BUNDLE,
                    workflow=workflow,
                    run=RunArgs(
                        task=task,
                        library=library,
                        num_envs=envs,
                        seed=config.train_seed,
                        log_root=paths.SINGLE_SEED_LOG_ROOT.format(**cell),
                        output_path=paths.BUNDLE.format(**cell),
                        **steps,
                    ),
                )

    def _parity_jobs(self):
        """One run per parity cell, for the iterations of its budget, its last checkpoint its only one."""
        config = self.config
        for parity in self.parity_cells:
            cell = {
                "task": parity["task"],
                "library": parity["rl_library"],
                "ws": parity["world_size"],
                "variant": parity["variant"],
                "seed": parity["seed"],
                "study": config.study,
            }
            lr_scaling, sync = variant_knobs(parity["variant"])
            yield self._job(
                JobKind.PARITY,
                cell,
                paths.PARITY_RECORD,
                run=RunArgs(
                    task=parity["task"],
                    library=config.library(parity["rl_library"]),
                    num_envs=parity["num_envs_per_rank"],
                    max_iterations=parity["iterations"],
                    checkpoint_interval=parity["iterations"],
                    seed=parity["seed"],
                    run_name="parity",
                    log_root=paths.PARITY_LOG_ROOT.format(**cell),
                    lr_scaling=lr_scaling,
                    sync_normalizer=sync,
                    tracker=config.tracker(Stage.PARITY),
                ),
            )


def _training_cells(config: StudyConfig) -> list[tuple[str, dict]]:
    """Every training benchmark bundle: (path, the cell the bundle must measure)."""
    cells = []
    for task in config.tasks:
        for library in config.libraries:
            for world_size in config.world_sizes:
                for envs in config.envs_per_task[task]:
                    for seed in config.seeds:
                        path = paths.TRAINING_BUNDLE.format(
                            study=config.study, task=task, library=library.name, ws=world_size, envs=envs, seed=seed
                        )
                        cell = {
                            "task": task,
                            "rl_library": library.name,
                            "ml_framework": library.ml_framework,
                            "num_envs_per_rank": envs,
                            "world_size": world_size,
                        }
                        cells.append((path, cell))
    return cells


def _train_cells(config: StudyConfig) -> list[tuple[str, dict]]:
    """Every train run: (manifest path, its task, library and world size)."""
    return [
        (
            paths.TRAIN_MANIFEST.format(study=config.study, task=task, library=library.name, ws=world_size),
            {"task": task, "library": library.name, "world_size": world_size},
        )
        for task in config.tasks
        for library in config.libraries
        for world_size in config.world_sizes
    ]
