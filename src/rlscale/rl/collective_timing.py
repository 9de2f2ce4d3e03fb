"""Time a rank spends blocked in ``torch.distributed`` collectives, per iteration, without touching the libraries.

Every library calls its collectives (the gradient all-reduce, the KL all-reduce and learning-rate broadcast, rsl_rl's
normalizer all-reduce) as attributes of the ``torch.distributed`` module at call time (``torch.distributed.all_reduce``
or ``dist.all_reduce`` after ``import torch.distributed as dist``); none binds one at import. So replacing those
attributes while training runs sees every call. On CUDA each call is bracketed by CUDA events, read once per
iteration (no host sync per call); on CPU ranks (gloo, whose collectives block) by host timers.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

PAYLOADS = {
    "all_reduce": "tensor",
    "broadcast": "tensor",
    "reduce": "tensor",
    "all_gather": "tensor",
    "all_gather_into_tensor": "input_tensor",
    "reduce_scatter_tensor": "input",
    "gather": "tensor",
    "barrier": None,
    "broadcast_object_list": None,
    "all_gather_object": None,
    "gather_object": None,
}
"""The timed collectives, each with the parameter holding the tensor this rank contributes (its bytes are counted);
None: no tensor (a barrier, or a pickled object whose size torch does not expose), so its calls count, not bytes."""


@dataclass(frozen=True)
class CollectiveCalls:
    """One kind of collective's calls in one iteration."""

    calls: int
    bytes: int
    """Bytes of the tensors this rank contributed (numel × element size), summed over the calls."""


@dataclass(frozen=True)
class CollectiveTime:
    """One iteration's collectives on this rank."""

    seconds: float
    """Time blocked in collectives: the transfer, plus waiting for the ranks that arrive later."""
    rollout_seconds: float
    """The part of ``seconds`` spent during the rollout (rsl_rl's normalizer sync), the rest in the update."""
    by_kind: dict[str, CollectiveCalls] = field(default_factory=dict)


class CollectiveTimer:
    """Counts and times the collectives called between :meth:`restart` and :meth:`take`, while :meth:`installed`.

    Args:
        on_cuda: Time with CUDA events on the current stream (NCCL ranks) instead of host timers.
    """

    def __init__(self, on_cuda: bool) -> None:
        self.on_cuda = on_cuda
        self._spans: list = []  # seconds (CPU) or (start, end) CUDA event pairs, in call order
        self._rollout_end: int | None = None
        self._tallies: dict[str, list[int]] = {}
        self._depth = 0  # a timed collective that calls another is timed once

    @contextlib.contextmanager
    def installed(self) -> Iterator[CollectiveTimer]:
        """Replace ``torch.distributed``'s collectives by timed ones until the block exits."""
        originals = {name: getattr(dist, name) for name in PAYLOADS}
        for name, original in originals.items():
            setattr(dist, name, self._timed(name, original))
        try:
            yield self
        finally:
            for name, original in originals.items():
                setattr(dist, name, original)

    def restart(self) -> None:
        """Open a new iteration: forget what was timed since the last :meth:`take`."""
        self._spans.clear()
        self._tallies.clear()
        self._rollout_end = None

    def mark_rollout_end(self) -> None:
        """Collectives timed from here on belong to the update."""
        self._rollout_end = len(self._spans)

    def take(self) -> CollectiveTime:
        """This iteration's collectives (on CUDA, once they have finished), then :meth:`restart`."""
        durations = self._durations()
        split = len(durations) if self._rollout_end is None else self._rollout_end
        taken = CollectiveTime(
            seconds=math.fsum(durations),
            rollout_seconds=math.fsum(durations[:split]),
            by_kind={kind: CollectiveCalls(calls, size) for kind, (calls, size) in sorted(self._tallies.items())},
        )
        self.restart()
        return taken

    def _durations(self) -> list[float]:
        if not self.on_cuda:
            return list(self._spans)
        for _, end in self._spans:  # the last one alone would do on one stream; a library may use several
            end.synchronize()
        return [start.elapsed_time(end) / 1000 for start, end in self._spans]

    def _timed(self, name: str, original):
        signature = inspect.signature(original)
        payload = PAYLOADS[name]

        @functools.wraps(original)
        def timed(*args, **kwargs):
            if self._depth:
                return original(*args, **kwargs)
            tally = self._tallies.setdefault(name, [0, 0])
            tally[0] += 1
            if payload is not None:
                tensor = signature.bind(*args, **kwargs).arguments.get(payload)
                if isinstance(tensor, torch.Tensor):
                    tally[1] += tensor.numel() * tensor.element_size()
            self._depth += 1
            try:
                if self.on_cuda:
                    start = torch.cuda.Event(enable_timing=True)
                    start.record()
                    result = original(*args, **kwargs)
                    end = torch.cuda.Event(enable_timing=True)
                    end.record()
                    self._spans.append((start, end))
                else:
                    started = time.perf_counter()
                    result = original(*args, **kwargs)
                    self._spans.append(time.perf_counter() - started)
            finally:
                self._depth -= 1
            return result

        return timed
