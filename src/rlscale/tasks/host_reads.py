"""Host reads of device data, found on any device: what ``rlscale check_task`` forbids inside a task's ``step``.

On CUDA each of these makes the host wait for the device (and breaks CUDA-graph capture); on the CPU they cost
nothing, so only watching the calls finds them there. :class:`HostReads` watches at two levels: the Python calls
(:class:`torch.overrides.TorchFunctionMode`: ``.item()``, ``.cpu()``, ``bool(tensor)``, masked indexing...) and the
aten ops under them (:class:`~torch.utils._python_dispatch.TorchDispatchMode`), for reads that no Python call shows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

HOST_READ_CALLS = {
    "item": "Tensor.item()",
    "tolist": "Tensor.tolist()",
    "numpy": "Tensor.numpy()",
    "__array__": "numpy.asarray(tensor)",
    "cpu": "Tensor.cpu()",
    "__bool__": "bool(tensor) (Python control flow on a tensor: if, while, and, or)",
    "__int__": "int(tensor)",
    "__float__": "float(tensor)",
    "__index__": "a tensor as a Python index",
    "__format__": "a tensor formatted as text",
    "__repr__": "a tensor formatted as text",
    "nonzero": "nonzero()",
    "argwhere": "argwhere()",
    "masked_select": "masked_select()",
    "unique": "unique()",
    "equal": "torch.equal()",
    "allclose": "torch.allclose()",
}
"""Python-level calls (by ``__name__``) that read device data back → how a violation names them."""

SYNC_OPS = frozenset(
    {"_local_scalar_dense", "is_nonzero", "nonzero", "equal", "masked_select", "_unique2", "unique_consecutive"}
)
"""Aten ops whose result the host must wait for (``item``/``tolist``, ``bool``, boolean indexing, ``torch.equal``,
data-dependent output shapes): each is a host synchronisation on CUDA."""


class _Calls(TorchFunctionMode):
    def __init__(self, seen: list[str]) -> None:
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        what = _host_read(getattr(func, "__name__", ""), args, kwargs)
        if what is not None and what not in self.seen:
            self.seen.append(what)
        return func(*args, **kwargs)


class _Ops(TorchDispatchMode):
    def __init__(self, seen: list[str]) -> None:
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in SYNC_OPS and str(func) not in self.seen:
            self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


class HostReads:
    """What the code run inside :meth:`watch` read back from the device, each read once, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        """Python calls, as :data:`HOST_READ_CALLS` names them."""
        self.ops: list[str] = []
        """Aten ops of :data:`SYNC_OPS`."""

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        with _Calls(self.calls), _Ops(self.ops):
            yield

    def found(self) -> list[str]:
        """Each read once: by the Python call that made it where one did, else by its aten op."""
        return self.calls or self.ops


def _host_read(name: str, args: tuple, kwargs: dict) -> str | None:
    if name in ("__getitem__", "__setitem__") and len(args) > 1 and _has_mask(args[1]):
        return "masked indexing tensor[mask]" if name == "__getitem__" else "a masked write tensor[mask] = ..."
    if name == "where" and len(args) + len(kwargs) == 1:
        return "torch.where(condition) with one argument"
    return HOST_READ_CALLS.get(name)


def _has_mask(index) -> bool:
    """Whether an index holds a boolean tensor, whose selected count only the device knows."""
    parts = index if isinstance(index, tuple | list) else (index,)
    return any(isinstance(part, torch.Tensor) and part.dtype == torch.bool for part in parts)
