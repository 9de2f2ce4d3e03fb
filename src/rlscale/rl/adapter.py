"""What an adapter module ``rlscale.rl.<library>`` provides, so that ``rlscale train``, the benchmarks and
``--resume auto`` treat the libraries alike (:func:`rlscale.rl.load_adapter` returns one)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # the adapters import torch; this module must not (rlscale.rl names it torch-free)
    import torch

    from rlscale.rl.common import TrainContext, TrainResult
    from rlscale.tasks.base import VecTask


@runtime_checkable
class Adapter(Protocol):
    """One library's adapter module: each function takes the run's agent config as the library reads it."""

    def rollout_length(self, agent_cfg: dict) -> int:
        """Env steps per env per iteration."""

    def default_iterations(self, agent_cfg: dict) -> int:
        """Iterations a run trains when ``--max_iterations`` gives none."""

    def speed_levers(self, agent_cfg: dict) -> dict:
        """The settings that change how fast the library trains, not what it learns, as in effect (the manifest's)."""

    def train(self, task: VecTask, agent_cfg: dict, ctx: TrainContext) -> TrainResult:
        """Train ``ctx.max_iterations`` iterations with the library's own runner."""

    def checkpoint_iteration(self, path: Path, agent_cfg: dict) -> int:
        """Iterations a checkpoint had finished."""

    def find_checkpoints(self, run_dir: Path, agent_cfg: dict, ml_framework: str) -> list[tuple[int, Path]]:
        """The library's checkpoints in a run directory, each with the iterations it had finished."""


class EvaluatingAdapter(Adapter, Protocol):
    """An adapter whose checkpoints ``rlscale evaluate`` and ``rlscale play`` can run."""

    def inference_policy(
        self, task: VecTask, agent_cfg: dict, checkpoint: Path, device: str, ml_framework: str
    ) -> Callable[[dict], torch.Tensor]:
        """The deterministic policy of a checkpoint as the library itself evaluates it (its observation
        normalisation and action clipping included), as a function of the task's observation groups; the actions
        are torch tensors on ``device`` whatever ``ml_framework`` the run trained with."""
