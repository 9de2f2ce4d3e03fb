"""``manifest.json``: what ran, where, with which versions, and how it ended; and the run's segments, one per
invocation, which a continued run keeps from the manifest it rewrites."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from rlscale.device import Device
from rlscale.dist import node_placement
from rlscale.paths import write_atomic
from rlscale.rl import LIBRARIES

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

    @classmethod
    def starting_now(cls, world_size: int, num_envs_per_rank: int | None, first_iteration: int) -> Segment:
        return cls(utc_now(), world_size, num_envs_per_rank, first_iteration)

    @property
    def iterations(self) -> int:
        """Iterations it finished (after a crash, those since its checkpoint are trained again by the next)."""
        return 0 if self.last_iteration is None else self.last_iteration - self.first_iteration + 1


def segments_of(manifest: Mapping) -> list[Segment]:
    """The segments a manifest's data records, oldest first."""
    return [Segment(**record) for record in manifest.get("segments", [])]


@dataclass(frozen=True)
class Continued:
    """What an invocation that continues a run keeps of the manifest it rewrites."""

    segments: tuple[Segment, ...] = ()
    """The earlier invocations' segments, oldest first."""
    iterations: tuple[dict, ...] = ()
    """Their iteration records before the checkpoint it continues from: those it does not train again (an
    invocation killed outright recorded none)."""


def continued_run(path: Path, start_iteration: int) -> Continued:
    """What the manifest at ``path`` holds of the run that an invocation starting at ``start_iteration`` continues;
    nothing when there is no readable manifest there."""
    try:
        data = json.loads(path.read_text())
        records = [record for record in data.get("iterations") or [] if record["iteration"] < start_iteration]
        return Continued(tuple(segments_of(data)), tuple(records))
    except (OSError, ValueError, TypeError, KeyError):
        return Continued()


def tracker_id_of(path: Path) -> str | None:
    """The tracker run id the manifest at ``path`` names; None when there is no readable manifest or it names none."""
    try:
        return json.loads(path.read_text())["tracker"]["id"]
    except (OSError, ValueError, TypeError, KeyError):
        return None


# Another rank's take-back (rlscale.run.phases.discard_run_directory) can remove the folder between a write's mkdir and
# its file; each take-back passes once, so a few attempts outlast them.
WRITE_ATTEMPTS = 8


class Manifest:
    """Accumulates the run's record and rewrites ``manifest.json`` atomically at each change.

    Its ``segments`` are those of the invocations this one continues (``continued``) then ``segment``, this
    invocation's, which :meth:`finish` closes; its ``iterations``, written by :meth:`finish`, are the continued ones
    before this invocation's.
    """

    def __init__(self, path: Path, segment: Segment, continued: Continued = Continued(), **fields) -> None:
        self.path = path
        self.segments = [*continued.segments, segment]
        self.continued_iterations = continued.iterations
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

    def write(self) -> None:
        text = json.dumps(self.data, indent=2, default=str) + "\n"
        for attempts_left in reversed(range(WRITE_ATTEMPTS)):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                write_atomic(self.path, text)
                return
            except FileNotFoundError:  # ranks whose task did not fit take their empty folders back, once each
                if not attempts_left:
                    raise
