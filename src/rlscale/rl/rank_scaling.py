"""Two things that change with the number of ranks and that the libraries leave as they are: the learning rate's
scaling with world size, and the ranks' running normalizer statistics (``docs/parity.md``).

Importing this needs no torch (the study reads :data:`LR_SCALINGS`); the normalizer sync imports it when it runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

LR_SCALINGS = ("none", "linear", "sqrt")
"""How the agent config's learning rate scales with the world size: not, by N, or by sqrt(N)."""


def learning_rate_factor(lr_scaling: str, world_size: int) -> float:
    """The factor the agent config's learning rate is multiplied by at ``world_size`` ranks.

    Raises:
        ValueError: for a scaling not in :data:`LR_SCALINGS`.
    """
    factors = {"none": 1.0, "linear": float(world_size), "sqrt": math.sqrt(world_size)}
    if lr_scaling not in factors:
        raise ValueError(f"lr_scaling {lr_scaling!r} is not one of {', '.join(LR_SCALINGS)}")
    return factors[lr_scaling]


class RunningMomentsSync:
    """Makes a running mean/variance/count normalizer hold the same statistics on every rank: those of all ranks'
    samples, as one normalizer fed every rank's data would hold them.

    Called after each update, collectively on every rank. Between two calls each rank adds only its own samples to
    the state of the last call, which every rank shares, so the all-reduced sums count that shared state once per rank;
    the sync takes ``world_size - 1`` copies of it away. The buffers are read by attribute name at each call, because
    the libraries assign new tensors to them rather than updating them in place.

    Args:
        module: The library's normalizer (rl_games' ``RunningMeanStd``, skrl's ``RunningStandardScaler``).
        mean, var, count: Names of its buffers (float64 in both libraries).
    """

    def __init__(self, module: torch.nn.Module, mean: str, var: str, count: str) -> None:
        self.module = module
        self.names = (mean, var, count)
        self.remember_shared_state()

    def remember_shared_state(self) -> None:
        """Take the current statistics as the state every rank shares: at the start, and after loading a checkpoint
        (every rank loads the same one)."""
        self._shared = self._moments().clone()

    def _moments(self) -> torch.Tensor:
        """``count``, then ``count * mean`` and ``count * (var + mean²)`` per element: sums over samples."""
        import torch

        mean, var, count = (getattr(self.module, name) for name in self.names)
        mean, var = mean.double().flatten(), var.double().flatten()
        return torch.cat((count.double().reshape(1), count * mean, count * (var + mean.square())))

    def __call__(self) -> None:
        import torch
        import torch.distributed as dist

        totals = self._moments()
        dist.all_reduce(totals)
        totals -= (dist.get_world_size() - 1) * self._shared
        mean, var, count = (getattr(self.module, name) for name in self.names)
        total_count = totals[0]
        new_mean = totals[1 : 1 + mean.numel()] / total_count
        new_var = (totals[1 + mean.numel() :] / total_count - new_mean.square()).clamp_min(0.0)
        with torch.no_grad():
            mean.copy_(new_mean.view_as(mean))
            var.copy_(new_var.view_as(var))
            count.copy_(total_count.view_as(count))
        self.remember_shared_state()


def moments_syncs(modules: Iterable[torch.nn.Module], kind: type, mean: str, var: str, count: str):
    """A :class:`RunningMomentsSync` for each of ``modules`` that is a ``kind`` normalizer, scripted or not.

    ``torch.jit.script`` turns a module into a copy of another class that keeps the original's only by name (rl_games
    1.6.5 scripts its ``RunningMeanStd``), so a scripted module is matched by ``original_name``.
    """
    return [
        RunningMomentsSync(module, mean, var, count)
        for module in modules
        if isinstance(module, kind) or getattr(module, "original_name", None) == kind.__name__
    ]
