"""A scaling model: one rank's iteration profile plus a collective cost model predict the iteration time, throughput
and efficiency of N ranks (weak scaling: each rank keeps its env count).

Each rank computes as the lone rank did (collection plus update), then spends the ring collectives' time: an
all-reduce of ``b`` bytes on ``N`` ranks costs ``2(N-1)/N · b / bandwidth + 2(N-1) · latency`` (the other kinds in
:data:`RING_COSTS`). ``latency`` is one ring step's and ``bandwidth`` the link's (the bus bandwidth of nccl-tests).
Across nodes the ring runs at the pace of its slowest link, the inter-node one. What the model leaves out is
compute that itself slows at N ranks (a shared host's CPUs, kernel launches, GPU clocks) and any overlap of
collectives with compute.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from rlscale.launch.probe_sweep import AllReduceFit


@dataclass(frozen=True)
class LinkCost:
    """One link's cost: per ring step, ``latency_s`` plus the bytes over ``bandwidth_bytes_per_s``."""

    latency_s: float
    bandwidth_bytes_per_s: float

    def __post_init__(self) -> None:
        if not self.latency_s >= 0 or not self.bandwidth_bytes_per_s > 0:
            raise ValueError(
                f"a link needs a latency of at least 0 and a positive bandwidth (got {self.latency_s} s, "
                f"{self.bandwidth_bytes_per_s} bytes/s)"
            )

    @classmethod
    def from_fit(cls, fit: AllReduceFit) -> LinkCost:
        """The link under a fitted all-reduce of ``fit.world_size`` ranks: its latency spread over the ring's
        ``2(N-1)`` steps, its bandwidth scaled by the ``2(N-1)/N`` of the tensor that each link carries."""
        if fit.world_size < 2:
            raise ValueError(f"a probe of {fit.world_size} rank crosses no link; probe 2 ranks or more")
        steps = 2 * (fit.world_size - 1)
        return cls(fit.latency_s / steps, fit.bandwidth_bytes_per_s * steps / fit.world_size)


@dataclass(frozen=True)
class CostModel:
    intra_node: LinkCost
    inter_node: LinkCost | None = None
    """None: no figure for a link between nodes, so no multi-node prediction."""

    def link(self, nodes: int) -> LinkCost:
        if nodes == 1:
            return self.intra_node
        if self.inter_node is None:
            raise ValueError(f"{nodes} nodes need the inter-node link's bandwidth (and latency)")
        return self.inter_node


@dataclass(frozen=True)
class CollectiveVolume:
    """One kind of collective in one iteration of one rank: its calls and the bytes this rank contributed."""

    kind: str
    calls: float
    bytes: float


@dataclass(frozen=True)
class RankProfile:
    """One rank's iteration on its own: compute, the env steps it takes, and the collectives it calls at N ranks."""

    collection_s: float
    update_s: float
    steps_per_iteration: int
    collectives: tuple[CollectiveVolume, ...]

    @property
    def compute_s(self) -> float:
        return self.collection_s + self.update_s


@dataclass(frozen=True)
class Prediction:
    nodes: int
    gpus_per_node: int
    world_size: int
    iteration_s: float
    communication_s: float
    throughput: float
    """Global env steps per second."""
    speedup: float
    efficiency: float
    communication_share: float
    """``communication_s`` as a share of ``iteration_s``."""


RingCost = tuple[Callable[[int], float], Callable[[int], int]]
"""Per kind: the share of a call's bytes each link carries, and the ring steps that each pay the latency, at N ranks."""
ALL_REDUCE: RingCost = (lambda n: 2 * (n - 1) / n, lambda n: 2 * (n - 1))
RING_COSTS: dict[str, RingCost] = {
    "all_reduce": ALL_REDUCE,
    "reduce_scatter_tensor": (lambda n: (n - 1) / n, lambda n: n - 1),
    # The bytes counted are this rank's contribution; each link carries N - 1 of them.
    "all_gather": (lambda n: n - 1, lambda n: n - 1),
    "all_gather_into_tensor": (lambda n: n - 1, lambda n: n - 1),
    "gather": (lambda n: n - 1, lambda n: n - 1),
    # Pipelined through the ring: each link carries the tensor once.
    "broadcast": (lambda n: 1.0, lambda n: n - 1),
    "reduce": (lambda n: 1.0, lambda n: n - 1),
}
"""The ring cost of each kind of collective; any other (a barrier, the object collectives) costs an all-reduce."""


def collective_s(volume: CollectiveVolume, world_size: int, link: LinkCost) -> float:
    """Seconds that one iteration's collectives of one kind take on ``world_size`` ranks over ``link``."""
    if world_size == 1:
        return 0.0
    share, steps = RING_COSTS.get(volume.kind, ALL_REDUCE)
    return share(world_size) * volume.bytes / link.bandwidth_bytes_per_s + volume.calls * steps(world_size) * (
        link.latency_s
    )


def predict(profile: RankProfile, cost: CostModel, nodes: int, gpus_per_node: int) -> Prediction:
    """The iteration of ``nodes × gpus_per_node`` ranks, each with the profile's work."""
    world_size = nodes * gpus_per_node
    link = cost.link(nodes)
    communication = math.fsum(collective_s(volume, world_size, link) for volume in profile.collectives)
    iteration_s = profile.compute_s + communication
    throughput = world_size * profile.steps_per_iteration / iteration_s
    speedup = throughput / (profile.steps_per_iteration / profile.compute_s)
    return Prediction(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        world_size=world_size,
        iteration_s=iteration_s,
        communication_s=communication,
        throughput=throughput,
        speedup=speedup,
        efficiency=speedup / world_size,
        communication_share=communication / iteration_s,
    )


def _doublings(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit``, and ``limit`` itself."""
    counts = [2**power for power in range(limit.bit_length()) if 2**power <= limit]
    return counts if counts[-1] == limit else [*counts, limit]


def shape_steps(nodes: int, gpus_per_node: int) -> list[tuple[int, int]]:
    """The (nodes, GPUs per node) predicted on the way to a shape: one node's GPUs doubling up to ``gpus_per_node``,
    then whole nodes doubling up to ``nodes``."""
    if nodes < 1 or gpus_per_node < 1:
        raise ValueError(f"a shape needs at least 1 node and 1 GPU per node (got {nodes} × {gpus_per_node})")
    within = [(1, gpus) for gpus in _doublings(gpus_per_node)]
    return within + [(count, gpus_per_node) for count in _doublings(nodes)[1:]]


def predict_shapes(profile: RankProfile, cost: CostModel, nodes: int, gpus_per_node: int) -> list[Prediction]:
    return [predict(profile, cost, count, gpus) for count, gpus in shape_steps(nodes, gpus_per_node)]


def relative_error(predicted: float, measured: float) -> float:
    """(predicted − measured) / measured: above 0 where the model is too optimistic about efficiency."""
    return (predicted - measured) / measured


def stated_link(latency_us: float, bandwidth_gbps: float) -> LinkCost:
    """A link from stated figures: microseconds per ring step and GB/s (10^9 bytes/s) of bus bandwidth."""
    return LinkCost(latency_us * 1e-6, bandwidth_gbps * 1e9)
