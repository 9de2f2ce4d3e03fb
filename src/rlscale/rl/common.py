"""What every library adapter takes and returns, so `rlscale train` treats the libraries alike."""

from __future__ import annotations

import contextlib
import hashlib
import io
import pickle
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

import numpy as np
import torch

from rlscale.dist import RankInfo
from rlscale.rl.tracking import TrackerRun


class PolicyParameters(Protocol):
    """A policy's trainable parameters where the library keeps them."""

    def __call__(self) -> dict[str, Any]:
        """The live values by name."""

    def nudge(self, delta: float) -> None:
        """Add ``delta`` to every parameter in the library's own storage, as a rank that missed a broadcast would
        differ (the ``desync`` fault)."""


class TorchPolicyParameters:
    """The parameters of a torch policy module, changed in place."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module

    def __call__(self) -> dict[str, torch.Tensor]:
        return dict(self.module.named_parameters())

    def nudge(self, delta: float) -> None:
        with torch.no_grad():
            for parameter in self.module.parameters():
                parameter.add_(delta)


@dataclass
class PolicyProbe:
    """Filled in by the adapter once the library has built the policy, before it loads a checkpoint."""

    read: PolicyParameters | None = None
    """Called, the live trainable parameters by name; its ``nudge`` changes them (the ``desync`` fault)."""


@dataclass(frozen=True)
class TrainContext:
    """One run's settings, already validated by the CLI."""

    device: str
    """Torch device of this rank's task and policy (``cpu`` or ``cuda:N``)."""
    max_iterations: int
    """PPO iterations (rollout + update) to run in this invocation."""
    seed: int
    """Base seed; each adapter makes the library's RNGs use base seed + global rank."""
    log_dir: Path
    """Where the library writes TensorBoard events and checkpoints (rank 0), or this rank's own folder."""
    rank: RankInfo
    resume: Path | None = None
    """Checkpoint to continue from; already checked to exist and to load with ``weights_only=True``."""
    ml_framework: str = "torch"
    checkpoint_interval: int | None = None
    """Iterations between the library's periodic checkpoints; None keeps the agent config's."""
    lr_scaling: str = "none"
    """How the agent's learning rate scales with world size: ``none``, ``linear`` or ``sqrt``."""
    normalizer_sync: bool = False
    """Average observation-normalizer statistics across ranks where the library allows."""
    tracker: TrackerRun | None = None
    """The tracker run to open once the library has formed the process group (global rank 0 with ``--logger
    wandb``); None: TensorBoard alone."""
    log_all_ranks: bool = False
    """``--log_all_ranks``: the library's own prints reach this rank's console as well as ``library_console.log``."""
    policy_probe: PolicyProbe = field(default_factory=PolicyProbe)
    on_resumed: Callable[[Any], None] | None = None
    """Called with the library's trainer (rsl_rl's runner, rl_games' or skrl's agent) once it has loaded ``resume``,
    before the first iteration: a look at what the load restored."""


@dataclass
class TrainResult:
    """What the adapter hands back after training."""

    start_iteration: int
    iterations_completed: int
    """Iterations counted from the start of training, including those before a resume."""
    checkpoint: Path | None
    """Final checkpoint written on this rank (None on ranks that write none)."""
    resumed_param_digest: str | None = None
    """:func:`parameter_digest` of the policy as the library loaded it from ``resume`` (None without one): equal to
    the digest of the checkpoint's policy parameters when the load took effect."""


class StopAtBoundary(KeyboardInterrupt):
    """Raised by the task at an iteration boundary once every rank agreed to stop there. The adapter of a rank that
    writes checkpoints saves one of the iterations finished (:attr:`checkpoint`), then lets it through; a library that
    catches ``Exception`` cannot swallow it."""

    def __init__(self, iterations: int) -> None:
        super().__init__(f"stopped after iteration {iterations}")
        self.iterations = iterations
        """Iterations finished, counted from the start of training."""
        self.checkpoint: Path | None = None
        """The checkpoint of them, once written (None: this rank writes none, or nothing new was trained)."""


def parameter_digest(state: dict[str, Any]) -> str:
    """SHA-256 over the parameters' names, shapes and float32 bytes, in name order.

    Raises:
        ValueError: if ``state`` holds no parameter values: every empty state would hash alike, so ranks would agree
            whatever their policies.
    """
    arrays = {}
    for name, value in state.items():
        array = value.detach().cpu().float().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        arrays[name] = np.ascontiguousarray(array, dtype=np.float32)
    if not sum(array.size for array in arrays.values()):
        raise ValueError(f"no parameter values to digest ({len(arrays)} empty entries): the policy probe is broken")
    digest = hashlib.sha256()
    for name in sorted(arrays):
        digest.update(name.encode())
        digest.update(str(arrays[name].shape).encode())
        digest.update(arrays[name].tobytes())
    return digest.hexdigest()


def on_checkpoint_loaded(ctx: TrainContext, trainer: Any) -> str:
    """Called by each adapter once its library has loaded ``ctx.resume`` into ``trainer``: hands ``trainer`` to
    ``ctx.on_resumed`` and returns the digest of the policy as loaded."""
    digest = parameter_digest(ctx.policy_probe.read())
    if ctx.on_resumed is not None:
        ctx.on_resumed(trainer)
    return digest


class _BytesOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def check_weights_only(path: Path, ml_framework: str = "torch") -> Any:
    """Refuse a checkpoint that needs arbitrary unpickling, before a library loads it without that guard; returns
    what it holds.

    torch checkpoints must load with ``weights_only=True``; skrl's JAX checkpoints are a pickled dict of flax byte
    strings, so they must unpickle without importing any class.

    Raises:
        ValueError: if the file is damaged or holds anything but weights.
    """
    try:
        if ml_framework == "jax":
            with open(path, "rb") as file:
                return _BytesOnlyUnpickler(file).load()
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # UnpicklingError, RuntimeError or EOFError, depending on the damage
        raise ValueError(f"checkpoint {path} cannot be loaded as weights only: {error}") from error


class _Tee(io.TextIOBase):
    """Text written to it goes to each of its streams."""

    def __init__(self, *streams: TextIO) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


@contextlib.contextmanager
def library_console(ctx: TrainContext):
    """Send a library's own console prints to ``library_console.log``, where rlscale prints its one line per
    iteration instead; with ``--log_all_ranks`` (:attr:`TrainContext.log_all_ranks`) to the console as well."""
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    with (
        open(ctx.log_dir / "library_console.log", "a") as sink,
        contextlib.redirect_stdout(_Tee(sink, sys.stdout) if ctx.log_all_ranks else sink),
    ):
        yield
