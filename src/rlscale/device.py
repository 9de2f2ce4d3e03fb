"""A device as ``--device`` names it (``cpu``, ``cuda`` or ``cuda:N``), parsed once into a :class:`Device`.

Its string form is the option's, so the manifests, the bundles and the command lines keep the text they had.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Device:
    """A CPU, or a CUDA device with its index (None: whichever CUDA picks, until the device is resolved)."""

    kind: Literal["cpu", "cuda"]
    index: int | None = None

    @classmethod
    def parse(cls, text: str) -> Device:
        """``cpu``, ``cuda`` or ``cuda:N`` (``cuda:`` reads as ``cuda``).

        Raises:
            ValueError: ``'TEXT' is not cpu, cuda or cuda:N``, for the caller to put after the option's name.
        """
        if text == "cpu":
            return cls("cpu")
        kind, _, index = text.partition(":")
        if kind != "cuda" or (index and not index.isdigit()):
            raise ValueError(f"{text!r} is not cpu, cuda or cuda:N")
        return cls("cuda", int(index) if index else None)

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def backend(self) -> Literal["gloo", "nccl"]:
        """The ``torch.distributed`` backend of ranks on this device: gloo for CPU ranks, NCCL for GPU ranks."""
        return "nccl" if self.is_cuda else "gloo"

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"


CPU = Device("cpu")
CUDA = Device("cuda")


def requested_kind(text: str) -> str:
    """The kind a ``--device`` names before anything checks it: the launcher tells CPU ranks from GPU ranks by it
    even in a ``--dry_run``, which checks no device."""
    return text.partition(":")[0]
