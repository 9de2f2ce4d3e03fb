"""The run's settings, resolved once: :class:`RunSpec`, from the command line, the defaults and the task registry.

A launcher resolves the spec of its ranks before it starts them and leaves it in a file named by ``$RLSCALE_RUN_SPEC``;
each rank loads that file instead of parsing its arguments again. A process started without one (``rlscale train``,
or a torchrun line run by hand) resolves its own through the same :func:`resolve_spec`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlscale.argparsing import OneLineParser
from rlscale.device import Device
from rlscale.dist import rank_info
from rlscale.faults import fault_from_environment
from rlscale.manifest import InvalidManifest
from rlscale.resume import AUTO, RunIdentity, TrainingShape, continuation_changes, run_to_continue
from rlscale.rl import LIBRARIES, agent_defaults
from rlscale.rl.agent_overrides import apply_override
from rlscale.run.args import build_parser, check_options, parse_command_line, split_overrides
from rlscale.run.memory_fit import MemoryProbe, bytes_per_env, device_memory, memory_shortfall
from rlscale.tasks import UnknownTaskError, get_spec, resolve_task_id
from rlscale.tasks.footprint import EnvFootprint
from rlscale.tasks.overrides import field_value, with_overrides

RUN_SPEC_ENV = "RLSCALE_RUN_SPEC"
"""Set by the launcher for its ranks: the JSON file holding their :class:`RunSpec`."""


@dataclass(frozen=True)
class JobShape:
    """The ranks a spec is for: ``world_size`` of them (None: torchrun decides, elastic or counting the GPUs
    itself), ``local_ranks`` of them on this node, which share its RAM as CPU ranks."""

    world_size: int | None
    local_ranks: int = 1

    @classmethod
    def of_this_process(cls) -> JobShape:
        rank = rank_info()
        return cls(rank.world_size, rank.local_world_size)


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs from its command line, checked and resolved; the field names are the options'."""

    task: str
    """The registered task id."""
    task_alias: str | None
    """The Isaac Lab id given for ``task``, or None."""
    rl_library: str
    ml_framework: str
    num_envs: int | None
    """Environments per rank: ``--num_envs``, else the task config's; as given (or None) in a torch-free spec."""
    max_iterations: int | None
    """None: the agent config's; with ``resume`` auto, the run's total."""
    seed: int | None
    """None: the agent config's (:func:`rlscale.run.start.resolve_seed`)."""
    device: Device | None
    """``cpu`` or ``cuda:N`` once resolved. A torch-free spec checks no device: it holds the one given, or None when
    none was given or the given text names none (resolving refuses it)."""
    log_root: str
    run_name: str | None
    resume: str | None
    """A checkpoint file, ``auto``, or None."""
    resume_elastic: bool
    """With ``--resume auto``: continue even at another :class:`~rlscale.resume.TrainingShape`."""
    checkpoint_interval: int | None
    agent: tuple[str, ...]
    """``--agent`` entries as given."""
    overrides: tuple[str, ...]
    """The ``agent.KEY=VALUE`` and ``env.FIELD=VALUE`` overrides as given."""
    env_overrides: dict[str, str]
    """Task config fields → their text, checked against the config's types (:meth:`typed_env_overrides`)."""
    agent_cfg: dict | None
    """The agent config, overrides applied; None in a torch-free spec."""
    lr_scaling: str
    normalizer_sync: bool
    distributed: bool
    cpu_threads: int | None
    no_cuda_graph: bool
    tf32: bool
    """Allow TF32 for float32 matmuls and cuDNN convolutions on CUDA."""
    sync_check_interval: int
    logger: str
    """``tensorboard``, or ``wandb`` beside it (:mod:`rlscale.rl.tracking`)."""
    log_project_name: str | None
    log_group: str | None
    log_job_type: str
    headless: bool
    command: str
    """The command the spec is for, its parser's ``prog`` (``rlscale train``, ``rlscale train_multigpu``, ``rlscale
    benchmark training``...): the kind of run it makes, which ``--resume auto`` continues only with its own kind."""
    world_size: int | None
    """Ranks of the job (None: torchrun decides); each rank checks torchrun's ``WORLD_SIZE`` against it once."""
    options: dict[str, Any] = field(default_factory=dict)
    """The options of the command that embeds the run (a benchmark workflow's own), by name."""

    @property
    def identity(self) -> RunIdentity:
        """What ``--resume auto`` compares with the run it would continue."""
        return RunIdentity(self.command, self.run_name, self.task, self.rl_library, self.ml_framework)

    @property
    def resume_path(self) -> Path | None:
        """The checkpoint to continue from, when one is named (not ``auto``)."""
        return Path(self.resume) if self.resume not in (None, AUTO) else None

    def shape(self, world_size: int | None = None) -> TrainingShape:
        """How this spec trains at ``world_size`` ranks (default: the job's)."""
        return TrainingShape(world_size or self.world_size, self.num_envs, self.lr_scaling, self.normalizer_sync)

    def typed_env_overrides(self) -> dict[str, Any]:
        """``env_overrides`` as the typed values the task's config takes.

        Raises:
            ValueError: for a field the config lacks or a value of the wrong type.
        """
        cfg_class = get_spec(self.task).cfg_class
        return {key: field_value(cfg_class, key, text) for key, text in self.env_overrides.items()}

    def manifest_args(self) -> dict[str, Any]:
        """The arguments as the manifest records them: every option, the workflow's, and the typed env overrides."""
        recorded = {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}
        for name in ("agent_cfg", "world_size", "options"):
            del recorded[name]
        recorded["device"] = None if self.device is None else str(self.device)
        return recorded | self.options | {"env_overrides": self.typed_env_overrides()}

    def to_json(self) -> str:
        device = None if self.device is None else str(self.device)
        return json.dumps(dataclasses.asdict(self) | {"device": device}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        data = json.loads(text)
        device = None if data["device"] is None else Device.parse(data["device"])
        return cls(**data | {"agent": tuple(data["agent"]), "overrides": tuple(data["overrides"]), "device": device})


def resolve_spec(
    argv: list[str] | None,
    parser: OneLineParser | None = None,
    launcher: str = "rlscale train_multigpu",
    *,
    torch_free: bool = False,
    job: JobShape | None = None,
    memory: MemoryProbe = device_memory,
) -> RunSpec:
    """Parse ``argv`` and resolve it (:func:`spec_from_args`); a bad argument is one line on stderr and exit 2."""
    parser = parser or build_parser()
    args = parse_command_line(parser, argv)
    return spec_from_args(parser, args, launcher, torch_free=torch_free, job=job, memory=memory)


def spec_from_args(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    launcher: str = "rlscale train_multigpu",
    *,
    torch_free: bool = False,
    job: JobShape | None = None,
    memory: MemoryProbe = device_memory,
) -> RunSpec:
    """Check everything that can be checked before a file is written and resolve the run's settings.

    Args:
        parser: The parser of ``args``, holding at least :func:`~rlscale.run.args.add_train_arguments`' options;
            its other options become :attr:`RunSpec.options`. Errors go through ``parser.error``.
        args: From :func:`~rlscale.run.args.parse_command_line`.
        launcher: Command named in the error for ``--distributed`` without a launcher.
        torch_free: Stop after the checks that need no torch (a launcher's ``--dry_run``): the task's id and the
            form of the overrides are checked, its backend, the device, the checkpoint and the override keys are not.
        job: The ranks a launcher resolves the spec for (they are distributed); None: this process's own.
        memory: Reads the device's free memory, which the run's envs must fit (:mod:`rlscale.run.memory_fit`).
    """
    check_options(parser, args, launcher, launched=job is not None)
    agent_overrides, env_overrides = split_overrides(parser, args)
    try:
        task_id = resolve_task_id(args.task)
    except UnknownTaskError as error:
        parser.error(f"--task: {error}")
    continued = None
    if args.resume == AUTO:
        asked = RunIdentity(parser.prog, args.run_name, task_id, args.rl_library, args.ml_framework)
        try:
            continued = run_to_continue(Path(args.log_root), asked)
        except ValueError as error:
            parser.error(str(error))
    launched = job is not None
    job = job or JobShape.of_this_process()
    try:
        fault_from_environment(job.world_size)
    except ValueError as error:
        parser.error(str(error))
    if torch_free:
        return _spec(parser, args, task_id, env_overrides, job, launched, _given_device(args.device))
    task_spec = get_spec(task_id)
    try:
        if task_spec.check_available is not None:
            task_spec.check_available()
    except ImportError as error:
        parser.error(f"--task: {error}")
    spec = _spec(parser, args, task_id, env_overrides, job, launched, resolve_device(parser, args.device))
    try:
        agent_cfg = agent_defaults.agent_cfg(task_id, args.rl_library)  # the task's own YAML, else the defaults
    except ValueError as error:
        parser.error(f"--task {task_id}: {error}")
    for given, override in agent_overrides:
        try:
            apply_override(agent_cfg, override, args.rl_library)
        except ValueError as error:
            parser.error(f"{given}: {error}")
    if spec.resume_path is not None:
        _check_checkpoint(parser, spec.resume_path, args.ml_framework, task_id, args.rl_library, agent_cfg)
    typed_overrides = {}
    for key, text in env_overrides.items():
        try:
            typed_overrides[key] = field_value(task_spec.cfg_class, key, text)
        except ValueError as error:
            parser.error(f"env.{key}={text}: {task_id}'s config: {error}")
    try:  # the config's own checks across fields (a range's min above its max)
        task_cfg = with_overrides(task_spec.cfg_class(), typed_overrides)
    except ValueError as error:
        parser.error(f"env overrides: {task_id}'s config: {error}")
    spec = dataclasses.replace(spec, agent_cfg=agent_cfg, num_envs=spec.num_envs or task_cfg.num_envs)
    _check_memory(parser, spec, task_spec.footprint_of(task_cfg), job, memory)
    if continued is not None and spec.world_size is not None:  # an elastic job's ranks check it (run.start)
        try:
            continuation_changes(continued, spec.shape(), spec.resume_elastic)
        except ValueError as error:  # InvalidManifest too
            parser.error(str(error))
    return spec


def _spec(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    task_id: str,
    env_overrides: dict[str, str],
    job: JobShape,
    launched: bool,
    device: Device | None,
) -> RunSpec:
    own = {item.name for item in dataclasses.fields(RunSpec)}
    options = {name: str(value) if isinstance(value, Path) else value for name, value in vars(args).items()}
    return RunSpec(
        task=task_id,
        task_alias=None if task_id == args.task else args.task,
        rl_library=args.rl_library,
        ml_framework=args.ml_framework,
        num_envs=args.num_envs,
        max_iterations=args.max_iterations,
        seed=args.seed,
        device=device,
        log_root=args.log_root,
        run_name=args.run_name,
        resume=None if args.resume is None else str(args.resume),
        resume_elastic=args.resume_elastic,
        checkpoint_interval=args.checkpoint_interval,
        agent=tuple(args.agent),
        overrides=tuple(args.overrides),
        env_overrides=env_overrides,
        agent_cfg=None,
        lr_scaling=args.lr_scaling,
        normalizer_sync=args.normalizer_sync,
        distributed=args.distributed or launched,  # a launcher adds --distributed to its ranks
        cpu_threads=args.cpu_threads,
        no_cuda_graph=args.no_cuda_graph,
        tf32=args.tf32,
        sync_check_interval=args.sync_check_interval,
        logger=args.logger,
        log_project_name=args.log_project_name,
        log_group=args.log_group,
        log_job_type=args.log_job_type,
        headless=args.headless,
        command=parser.prog,
        world_size=job.world_size,
        options={name: value for name, value in options.items() if name not in own},
    )


def _check_memory(
    parser: argparse.ArgumentParser,
    spec: RunSpec,
    footprint: EnvFootprint | None,
    job: JobShape,
    memory: MemoryProbe,
) -> None:
    """Refuse envs that cannot fit the device (:mod:`rlscale.run.memory_fit`), before anything is built or started;
    a task that states no footprint, or a device whose memory cannot be read, is not estimated."""
    available = None if footprint is None else memory(spec.device)
    if available is None:
        return
    per_env = bytes_per_env(footprint, LIBRARIES[spec.rl_library].rollout_length(spec.agent_cfg))
    ranks = 1 if spec.device.is_cuda else job.local_ranks
    shortfall = memory_shortfall(spec.task, spec.num_envs, per_env, ranks, spec.rl_library, available)
    if shortfall is not None:
        parser.error(shortfall)


def write_spec(spec: RunSpec, folder: Path) -> Path:
    """Leave ``spec`` in ``folder`` for the ranks; returns the file, which :data:`RUN_SPEC_ENV` names to them."""
    path = folder / "run_spec.json"
    path.write_text(spec.to_json())
    return path


def spec_from_environment() -> RunSpec | None:
    """The spec this rank's launcher left (:data:`RUN_SPEC_ENV`), or None for a process started without one.

    Raises:
        RuntimeError: when torchrun started another number of ranks than the spec was resolved for.
    """
    path = os.environ.get(RUN_SPEC_ENV)
    if not path:
        return None
    spec = RunSpec.from_json(Path(path).read_text())
    started = rank_info().world_size
    if spec.world_size is not None and started != spec.world_size:
        raise RuntimeError(f"the launcher resolved {spec.world_size} rank(s) but WORLD_SIZE is {started}")
    return spec


def _given_device(text: str | None) -> Device | None:
    """``--device`` as a torch-free spec holds it: parsed, or None when it names no device (resolving refuses it)."""
    try:
        return None if text is None else Device.parse(text)
    except ValueError:
        return None


def resolve_device(parser: argparse.ArgumentParser, requested: str | None) -> Device:
    """``--device`` checked against the host (one line through ``parser`` otherwise), with CUDA's index named."""
    import torch

    if requested is None:
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = Device.parse(requested)
    except ValueError as error:
        parser.error(f"--device {error}")
    if not device.is_cuda:
        return device
    if not torch.cuda.is_available():
        parser.error(f"--device {requested}: no CUDA device is available; use --device cpu")
    if device.index is not None and device.index >= torch.cuda.device_count():
        parser.error(f"--device {requested}: only {torch.cuda.device_count()} CUDA device(s) are visible")
    return Device("cuda", device.index or 0)  # libraries compare device strings, so name the index


def _check_checkpoint(
    parser: argparse.ArgumentParser, path: Path, ml_framework: str, task_id: str, rl_library: str, agent_cfg: dict
) -> None:
    from rlscale.manifest import read_checkpoint_manifest, run_directory_of
    from rlscale.rl.checkpoint_fit import CheckpointMismatch, WritingRun, check_checkpoint_fits
    from rlscale.rl.common import check_weights_only

    if path.is_dir():
        parser.error(
            f"--resume {path}: is a directory; name the checkpoint file in it (e.g. model_<iteration>.pt), or pass "
            "--resume auto to continue the latest run"
        )
    if not path.is_file():
        parser.error(f"--resume {path}: no such checkpoint file")
    try:
        state = check_weights_only(path, ml_framework)
    except ValueError as error:
        cause = type(error.__cause__).__name__ if error.__cause__ else "ValueError"
        parser.error(
            f"--resume {path}: cannot be loaded as weights only ({cause}: damaged, or pickles more than tensors); "
            "pass a checkpoint that the library wrote (model_<iteration>.pt, agent_<timestep>.pt|.pickle)"
        )
    writing_run = None
    if run_directory_of(path) is not None:
        try:
            manifest = read_checkpoint_manifest(path)
        except InvalidManifest as error:
            parser.error(f"--resume {path}: {error}")
        writing_run = WritingRun(manifest.args.task, manifest.args.rl_library, manifest.agent_cfg)
    try:
        check_checkpoint_fits(state, task_id, rl_library, agent_cfg, writing_run)
    except CheckpointMismatch as error:
        parser.error(f"--resume {path}: {error}")
