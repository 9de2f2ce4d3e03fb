"""A study job as a typed record: its stage, where its ranks run, what it writes, and its ``rlscale`` arguments as
typed values (:class:`RunArgs`), which :meth:`Job.rlscale_args` spells and nothing parses back.

:mod:`rlscale.study.plan` makes every job of a study; a rule hands its job to ``python -m rlscale.study run`` as JSON
(:meth:`Job.to_json`, :meth:`Job.from_json`), and :mod:`rlscale.study.stages` runs it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from rlscale.launch.ranks import NodeSplit
from rlscale.study.job_times import TimedCommand
from rlscale.study.paths import JobKind
from rlscale.study.stage_policy import Stage

DEFAULT_RDZV_PORT = 29400

STAGE_OF_KIND: Mapping[JobKind, Stage] = MappingProxyType(
    {
        JobKind.CHECK_TASK: Stage.CHECK_TASK,
        JobKind.VALIDATE: Stage.VALIDATE,
        JobKind.PROBE: Stage.PROBE,
        JobKind.TRAIN: Stage.TRAIN,
        JobKind.TRAINING_BENCHMARK: Stage.BENCHMARK,
        JobKind.SINGLE_SEED_BENCHMARK: Stage.BENCHMARK,
        JobKind.PARITY: Stage.PARITY,
        JobKind.EVALUATE_TRAIN: Stage.EVALUATE,
        JobKind.EVALUATE_PARITY: Stage.EVALUATE,
    }
)
"""The stage (its policy, and the function that runs it) of each kind of job."""


@dataclass(frozen=True)
class Library:
    """An RL library of the study, with the agent overrides the config gives it."""

    name: str
    ml_framework: str
    agent_overrides: tuple[str, ...] = ()

    def options(self) -> list[str]:
        return ["--rl_library", self.name, "--ml_framework", self.ml_framework, *self.agent_overrides]


@dataclass(frozen=True)
class Tracker:
    """The experiment tracker of a run: grouped by the study's name, its job type the stage (rank 0 names and
    configures the run after its cell)."""

    logger: str
    project: str
    group: str
    job_type: str

    def options(self) -> list[str]:
        return [
            *("--logger", self.logger, "--log_project_name", self.project),
            *("--log_group", self.group, "--log_job_type", self.job_type),
        ]


@dataclass(frozen=True)
class RunArgs:
    """The ``rlscale`` arguments of a job as typed values; :meth:`options` spells them, and nothing parses them back.

    ``seed`` is one run's ``--seed``; ``seeds`` the ``--seeds`` of a benchmark that runs several in one process.
    """

    task: str | None = None
    library: Library | None = None
    num_envs: int | None = None
    seed: int | None = None
    seeds: tuple[int, ...] = ()
    max_iterations: int | None = None
    warmup_iterations: int | None = None
    checkpoint_interval: int | None = None
    warmup_steps: int | None = None
    num_steps: int | None = None
    run_name: str | None = None
    log_root: str | None = None
    resume_auto: bool = False
    lr_scaling: str | None = None
    sync_normalizer: bool = False
    peer: bool = False
    tracker: Tracker | None = None
    output_path: str | None = None

    def options(self) -> list[str]:
        """The arguments, in a fixed order; an unset value adds none."""
        valued = [
            ("--task", self.task),
            ("--num_envs", self.num_envs),
            ("--seed", self.seed),
            ("--max_iterations", self.max_iterations),
            ("--warmup_iterations", self.warmup_iterations),
            ("--checkpoint_interval", self.checkpoint_interval),
            ("--warmup_steps", self.warmup_steps),
            ("--num_steps", self.num_steps),
            ("--run_name", self.run_name),
            ("--log_root", self.log_root),
            ("--resume", "auto" if self.resume_auto else None),
            ("--lr_scaling", self.lr_scaling),
            ("--output_path", self.output_path),
        ]
        args = [text for option, value in valued if value is not None for text in (option, str(value))]
        if self.seeds:
            args += ["--seeds", *map(str, self.seeds)]
        if self.library is not None:
            args += self.library.options()
        args += ["--sync_normalizer"] * self.sync_normalizer + ["--peer"] * self.peer
        return args + (self.tracker.options() if self.tracker else [])

    def per_seed(self) -> list[RunArgs]:
        """The runs of a benchmark cell: one with every seed, or with ``peer`` one per seed.

        The peer baseline is a cold process of its own, so each of its figures stands beside one cold rlscale process
        (``rlscale benchmark`` refuses ``--peer`` with several seeds).
        """
        if not self.peer or not self.seeds:
            return [self]
        return [dataclasses.replace(self, seeds=(seed,)) for seed in self.seeds]


@dataclass(frozen=True)
class Job:
    """One job of the study: its stage, where it runs and what it writes, and its ``rlscale`` arguments.

    ``world_size`` and ``nodes`` place its ranks (one for a single-device stage); ``workflow`` is a benchmark's,
    ``record`` the manifest of the run an evaluation measures.
    """

    id: str
    kind: JobKind
    device: str
    output: str
    run: RunArgs = field(default_factory=RunArgs)
    world_size: int = 1
    nodes: int = 1
    rdzv_port: int = DEFAULT_RDZV_PORT
    workflow: str | None = None
    record: str | None = None
    every_checkpoint: bool = False

    @property
    def stage(self) -> Stage:
        return STAGE_OF_KIND[self.kind]

    @property
    def split(self) -> NodeSplit:
        return NodeSplit(self.world_size, self.nodes)

    @property
    def gpus(self) -> int:
        """GPUs the job needs on its node: one per local rank on cuda, none on CPU."""
        return self.split.gpus_per_node(self.device)

    def rlscale_args(self, run: RunArgs | None = None) -> list[str]:
        """The ``rlscale`` arguments of the job's command (of ``run``, one of its :meth:`RunArgs.per_seed`), then
        the device."""
        return [*(run or self.run).options(), "--device", self.device]

    def timed(self, command: str, run: RunArgs | None = None) -> TimedCommand:
        """What the job time record of the job's ``rlscale`` ``command`` (of ``run``, one of its runs) names: the
        command and the job's cell."""
        run = run or self.run
        cell = {
            "task": run.task,
            "library": run.library.name if run.library else None,
            "world_size": self.world_size,
            "num_envs": run.num_envs,
            "seeds": " ".join(map(str, run.seeds or ([] if run.seed is None else [run.seed]))) or None,
        }
        return TimedCommand(command, {column: str(value) for column, value in cell.items() if value is not None})

    def to_json(self) -> str:
        """The record as compact JSON: the values that differ from their defaults (which :meth:`from_json` fills)."""
        return json.dumps(_set_values(dataclasses.asdict(self)), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Job:
        """The job of :meth:`to_json`'s text.

        Raises:
            ValueError: If the text is not a job record.
        """
        try:
            values = json.loads(text)
            run = dict(values.pop("run", {}))
            if "library" in run:
                library = run["library"]
                run["library"] = Library(**{**library, "agent_overrides": tuple(library.get("agent_overrides", ()))})
            if "tracker" in run:
                run["tracker"] = Tracker(**run["tracker"])
            run["seeds"] = tuple(run.get("seeds", ()))
            return cls(**{**values, "kind": JobKind(values["kind"]), "run": RunArgs(**run)})
        except (TypeError, KeyError, AttributeError, ValueError) as error:
            raise ValueError(f"not a study job record: {error}") from None


def _set_values(values: dict) -> dict:
    """``values`` without its unset entries (None, False, empty), nested dicts likewise."""
    kept = {}
    for key, value in values.items():
        value = _set_values(value) if isinstance(value, dict) else value
        if value is not None and value is not False and value not in ([], (), {}):
            kept[key] = value
    return kept
