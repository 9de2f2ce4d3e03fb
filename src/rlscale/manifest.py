"""``manifest.json``: what ran, where, with which versions, and how it ended; and the run's segments, one per
invocation, which a continued run keeps from the manifest it rewrites.

It runs over 400 lines because it is one file format: what it records, its writer, its schema check and its reader,
which stay together so that they cannot drift. ``manifest.schema.json`` (shipped in the package) says what a
manifest holds; the writer validates each version it writes, and :func:`read_manifest`, the one reader, validates
before it returns the typed :class:`RunManifest`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import math
import os
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from rlscale.device import Device
from rlscale.dist import node_placement
from rlscale.paths import write_atomic
from rlscale.rl import LIBRARIES

MANIFEST_NAME = "manifest.json"

PACKAGES = (
    "rlscale",
    "torch",
    *(library.distribution for library in LIBRARIES.values()),
    "jax",
    "jaxlib",
    "mujoco",
    "mujoco-warp",
    "warp-lang",
    "mujoco-mjx",
    "numpy",
    "wandb",
)
"""Distributions whose installed versions a manifest records."""


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def package_versions() -> dict[str, str | None]:
    """Installed versions, read from package metadata (no imports)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state(path: Path | None = None) -> dict[str, str | bool | None]:
    """SHA and dirty flag of the git checkout holding rlscale's source, if it is one."""
    cwd = path or Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(
                ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if sha else None
    return {"sha": sha, "dirty": None if status is None else bool(status)}


def device_description(device: Device) -> dict:
    """Torch/CUDA versions and, on CUDA, the GPU's name and UUID (``cuda:N`` alone does not say which GPU it was: it
    counts within ``CUDA_VISIBLE_DEVICES``, which a rank may have narrowed to its own GPU)."""
    import torch

    info = {"device": str(device), "torch": torch.__version__, "cuda": torch.version.cuda}
    info |= {"gpu_name": None, "gpu_uuid": None}
    if device.is_cuda and torch.cuda.is_available():
        info["gpu_name"] = torch.cuda.get_device_name(torch.device(str(device)))
        info["gpu_uuid"] = cuda_uuid(device.index or 0)
    return info


def cuda_uuid(index: int) -> str | None:
    """``GPU-<uuid>`` of a CUDA device, as NVML and nvidia-smi name it; None where torch does not expose it."""
    import torch

    with contextlib.suppress(Exception):  # older torch builds have no uuid property
        return f"GPU-{torch.cuda.get_device_properties(index).uuid}"
    return None


def placement_record() -> dict:
    """Where this process runs, as in effect now: its CPUs and torch threads, the GPUs it sees, its launcher's
    ``--cpu_binding`` and the source of the GPU's CPU affinity (both None where no launcher placed it), and every
    ``NCCL_*`` variable, so that runs of different NCCL settings tell apart."""
    import torch

    placement = node_placement()
    return {
        "binding": None if placement is None else placement.binding,
        "gpu_affinity": None if placement is None else placement.gpu_affinity,
        "cpus": sorted(os.sched_getaffinity(0)),
        "threads": torch.get_num_threads(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "nccl": {name: value for name, value in sorted(os.environ.items()) if name.startswith("NCCL_")},
    }


SEGMENT_CAUSES = {
    "start": "the run's first invocation",
    "resume": "a continuation asked for (--resume)",
    "requeue": "the batch system requeued the job (SLURM_RESTART_COUNT)",
    "restart": "torchrun restarted the workers after a rank failed (--max_restarts)",
}
"""Why a :class:`Segment` began → what that means."""


@dataclass(frozen=True)
class Segment:
    """One invocation of a run: the run as first started, or one ``--resume auto`` continuation of it in its run
    directory, which may have another world size or env count than the invocation before (an elastic
    continuation)."""

    start_time: str
    """When it started: UTC, ISO 8601."""
    world_size: int
    num_envs_per_rank: int | None
    first_iteration: int
    """Number of its first iteration: 0, or the iterations its checkpoint had finished."""
    last_iteration: int | None = None
    """Number of the last iteration it finished; None if it finished none, or ended without a word (killed by
    SIGKILL, its node lost)."""
    wall_time_s: float | None = None
    """Its wall time, setup included; None while it runs, or if it ended without a word."""
    status: str = "running"
    """How it ended (``completed``, ``crashed``, ``interrupted``); ``running`` while it runs, or if it ended without
    a word."""
    began: str | None = None
    """Why it began (:data:`SEGMENT_CAUSES`); None in older manifests."""

    @classmethod
    def starting_now(
        cls, world_size: int, num_envs_per_rank: int | None, first_iteration: int, began: str = "start"
    ) -> Segment:
        return cls(utc_now(), world_size, num_envs_per_rank, first_iteration, began=began)

    @property
    def iterations(self) -> int:
        """Iterations it finished (after a crash, those since its checkpoint are trained again by the next)."""
        return 0 if self.last_iteration is None else self.last_iteration - self.first_iteration + 1


class InvalidManifest(ValueError):
    """A manifest that is missing, unreadable or does not match ``manifest.schema.json``; the message is one line
    naming the file and the first offending field."""


@cache
def schema() -> dict:
    """The manifest's JSON Schema (draft 2020-12), shipped inside the package."""
    return json.loads(resources.files("rlscale").joinpath("manifest.schema.json").read_text())


@cache
def _validator() -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(schema(), format_checker=jsonschema.FormatChecker())


def first_violation(data: Any) -> str | None:
    """The most specific schema violation of manifest data as ``path: message``, cut to one short line; None for a
    valid manifest."""
    errors = sorted(_validator().iter_errors(data), key=lambda error: (-len(error.absolute_path), error.message))
    if not errors:
        return None
    where = ".".join(map(str, errors[0].absolute_path)) or "<root>"
    message = " ".join(errors[0].message.split())  # a value's repr may hold line breaks
    return f"{where}: {message[:200]}{'...' if len(message) > 200 else ''}"


def _load_valid(path: Path) -> dict[str, Any]:
    """The data of the manifest at ``path``, checked against the schema.

    Raises:
        InvalidManifest: when it is missing, unreadable, not JSON or not a manifest.
    """
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidManifest(f"{path}: no such manifest") from None
    except OSError as error:
        raise InvalidManifest(f"{path}: cannot be read ({error.strerror})") from None
    except ValueError as error:
        raise InvalidManifest(f"{path}: not JSON ({error})") from None
    violation = first_violation(data)
    if violation is not None:
        raise InvalidManifest(f"{path}: does not match the manifest schema: {violation}")
    return data


def _number(value: float | None) -> float:
    """An episode statistic as a float: NaN where no episode had ended (JSON's null as well as NaN)."""
    return math.nan if value is None else float(value)


@dataclass(frozen=True)
class RecordedIteration:
    """One finished iteration as a manifest keeps it (written from :class:`rlscale.rl.progress.IterationRecord`)."""

    iteration: int
    collection_s: float
    iteration_s: float
    mean_return: float
    """NaN if no episode ended in its rollout."""
    mean_episode_length: float
    env_steps: int | None
    """Global env steps collected from the start of training to its end; None in older manifests."""
    elapsed_s: float | None
    """Wall time from the start of this invocation's training to its end; None in older manifests."""
    metrics: Mapping[str, float]
    """The task's ``Metrics/<name>`` values (NaN until an episode ended)."""

    def value(self, metric: str) -> float:
        """``mean_return``, ``mean_episode_length`` or one of its task ``metrics``; NaN where it has none."""
        if metric in ("mean_return", "mean_episode_length"):
            return getattr(self, metric)
        return self.metrics.get(metric, math.nan)


@dataclass(frozen=True)
class RunArgs:
    """The run's options that readers use, as the manifest's ``args`` record them."""

    command: str | None
    """The command that made the run (``rlscale train``, ...); None in older manifests."""
    run_name: str | None
    task: str
    rl_library: str
    ml_framework: str
    seed: int | None
    env_overrides: Mapping[str, Any]
    lr_scaling: str
    normalizer_sync: bool


@dataclass(frozen=True)
class RunManifest:
    """What readers use of a run's ``manifest.json``. ``iterations`` and ``wall_time_s`` are written when an
    invocation ends; the fields from ``num_envs`` on when the run completes (None or empty before)."""

    status: str
    """``running`` (or ended without a word), ``completed``, ``interrupted`` or ``crashed``."""
    args: RunArgs
    agent_cfg: Mapping[str, Any]
    world_size: int
    tracker_id: str | None
    """The experiment tracker's run id; None when the run has none."""
    segments: tuple[Segment, ...]
    """One per invocation, oldest first; empty in older manifests."""
    iterations: tuple[RecordedIteration, ...]
    wall_time_s: float | None
    num_envs: int | None
    """This rank's environments."""
    start_iteration: int
    iterations_completed: int | None
    checkpoint: Path | None
    """The final checkpoint."""
    final_mean_return: float | None
    final_mean_episode_length: float | None
    rank_param_digests: tuple[str, ...]

    @classmethod
    def from_valid_data(cls, data: Mapping[str, Any]) -> RunManifest:
        """The typed view of manifest data that the schema has accepted (keys older manifests lack take defaults)."""
        args = data["args"]
        iterations = tuple(
            RecordedIteration(
                iteration=record["iteration"],
                collection_s=record["collection_s"],
                iteration_s=record["iteration_s"],
                mean_return=_number(record["mean_return"]),
                mean_episode_length=_number(record["mean_episode_length"]),
                env_steps=record.get("env_steps"),
                elapsed_s=record.get("elapsed_s"),
                metrics={name: _number(value) for name, value in (record.get("metrics") or {}).items()},
            )
            for record in data.get("iterations") or ()
        )
        checkpoint = data.get("checkpoint")
        return cls(
            status=data["status"],
            args=RunArgs(
                command=args.get("command"),
                run_name=args["run_name"],
                task=args["task"],
                rl_library=args["rl_library"],
                ml_framework=args["ml_framework"],
                seed=args["seed"],
                env_overrides=args.get("env_overrides", {}),
                lr_scaling=args.get("lr_scaling", "none"),
                normalizer_sync=args.get("normalizer_sync", False),
            ),
            agent_cfg=data["agent_cfg"],
            world_size=data["world_size"],
            tracker_id=(data.get("tracker") or {}).get("id"),
            segments=tuple(Segment(**record) for record in data.get("segments") or ()),
            iterations=iterations,
            wall_time_s=data.get("wall_time_s"),
            num_envs=data.get("num_envs"),
            start_iteration=data.get("start_iteration") or 0,
            iterations_completed=data.get("iterations_completed"),
            checkpoint=None if checkpoint is None else Path(checkpoint),
            final_mean_return=data.get("final_mean_return"),
            final_mean_episode_length=data.get("final_mean_episode_length"),
            rank_param_digests=tuple(data.get("rank_param_digests") or ()),
        )


def read_manifest(path: Path) -> RunManifest:
    """The manifest at ``path``, validated against the schema.

    Raises:
        InvalidManifest: one line, when it is missing, unreadable or does not match the schema.
    """
    return RunManifest.from_valid_data(_load_valid(path))


def run_directory_of(checkpoint: Path) -> Path | None:
    """The run directory of a checkpoint, the folder of its ``manifest.json``: the checkpoint's own (rsl_rl's) or the
    one above (rl_games' ``nn/``, skrl's ``checkpoints/``); None when neither has a manifest."""
    for folder in (checkpoint.parent, checkpoint.parent.parent):
        if (folder / MANIFEST_NAME).is_file():
            return folder
    return None


def read_checkpoint_manifest(checkpoint: Path) -> RunManifest:
    """The manifest of the run directory that holds ``checkpoint`` (:func:`run_directory_of`).

    Raises:
        InvalidManifest: when there is none, or it cannot be read or does not match the schema.
    """
    run_dir = run_directory_of(checkpoint)
    if run_dir is None:
        raise InvalidManifest(f"{checkpoint}: no {MANIFEST_NAME} beside it or in the folder above")
    return read_manifest(run_dir / MANIFEST_NAME)


@dataclass(frozen=True)
class Continued:
    """What an invocation that continues a run keeps of the manifest it rewrites."""

    segments: tuple[Segment, ...] = ()
    """The earlier invocations' segments, oldest first."""
    iterations: tuple[dict, ...] = ()
    """Their iteration records before the checkpoint it continues from, as written: those it does not train again
    (an invocation killed outright recorded none)."""

    def after_a_failure(self) -> Continued:
        """What a restart of torchrun's worker group keeps: the same, the failed attempt's segment (the last) marked
        ``crashed``. torchrun restarts the group only after a rank failed; this rank may have recorded the stop that
        followed (``interrupted``), or nothing (``running``: SIGKILLed while blocked in a collective)."""
        if not self.segments or self.segments[-1].status not in ("running", "interrupted"):
            return self
        failed = dataclasses.replace(self.segments[-1], status="crashed")
        return dataclasses.replace(self, segments=(*self.segments[:-1], failed))


def continued_run(path: Path, start_iteration: int) -> Continued:
    """What the manifest at ``path`` holds of the run that an invocation starting at ``start_iteration`` continues;
    nothing when there is no valid manifest there."""
    try:
        data = _load_valid(path)
    except InvalidManifest:
        return Continued()
    records = [record for record in data.get("iterations") or () if record["iteration"] < start_iteration]
    return Continued(RunManifest.from_valid_data(data).segments, tuple(records))


def tracker_id_of(path: Path) -> str | None:
    """The tracker run id the manifest at ``path`` names; None when there is no valid manifest or it names none."""
    try:
        return read_manifest(path).tracker_id
    except InvalidManifest:
        return None


# Another rank's take-back (rlscale.run.phases.discard_run_directory) can remove the folder between a write's mkdir and
# its file; each take-back passes once, so a few attempts outlast them.
WRITE_ATTEMPTS = 8


class Manifest:
    """Accumulates the run's record and rewrites ``manifest.json`` atomically at each change.

    Its ``segments`` are those of the invocations this one continues (``continued``) then ``segment``, this
    invocation's, which :meth:`finish` closes; its ``iterations``, written by :meth:`finish`, are the continued ones
    before this invocation's. Each write is checked against the schema first, so that the writer and the schema
    cannot drift apart.
    """

    def __init__(self, path: Path, segment: Segment, continued: Continued = Continued(), **fields) -> None:
        self.path = path
        self.segments = [*continued.segments, segment]
        self.continued_iterations = continued.iterations
        self.written: dict[str, Any] = {}
        """The data of the version last written, as a reader gets it."""
        self.data = {
            "status": "running",
            "start_time": segment.start_time,
            "end_time": None,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "versions": package_versions(),
            "git": git_state(),
            "placement": placement_record(),
            **fields,
            "segments": self.segment_records(),
        }
        self.write()

    def segment_records(self) -> list[dict]:
        return [dataclasses.asdict(segment) for segment in self.segments]

    def update(self, **fields) -> None:
        self.data.update(fields)
        self.write()

    def finish(
        self, status: str, *, last_iteration: int | None, wall_time_s: float, iterations: Sequence[dict], **fields
    ) -> None:
        """Record how this invocation ended: ``status``, the number of its last finished iteration (None: none), its
        wall time and its iteration records, in the manifest and in its segment."""
        ended = {"status": status, "last_iteration": last_iteration, "wall_time_s": wall_time_s}
        self.segments[-1] = dataclasses.replace(self.segments[-1], **ended)
        self.update(
            status=status,
            end_time=utc_now(),
            wall_time_s=wall_time_s,
            iterations=[*self.continued_iterations, *iterations],
            **fields,
            segments=self.segment_records(),
        )

    def recorded(self) -> RunManifest:
        """The version last written, as :func:`read_manifest` reads it."""
        return RunManifest.from_valid_data(self.written)

    def write(self) -> None:
        """Rewrite the file atomically.

        Raises:
            InvalidManifest: when the data does not match the schema; nothing is written then.
        """
        text = json.dumps(self.data, indent=2, default=str) + "\n"
        written = json.loads(text)
        violation = first_violation(written)
        if violation is not None:
            raise InvalidManifest(f"{self.path}: the run's record does not match the manifest schema: {violation}")
        self.written = written
        for attempts_left in reversed(range(WRITE_ATTEMPTS)):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                write_atomic(self.path, text)
                return
            except FileNotFoundError:  # ranks whose task did not fit take their empty folders back, once each
                if not attempts_left:
                    raise
