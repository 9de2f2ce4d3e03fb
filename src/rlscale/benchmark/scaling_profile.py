"""The scaling model's inputs from training bundles: one rank's iteration profile, and the collectives per iteration
that a multi-rank bundle's ``ranks`` section measured.

A lone rank calls no collective, so its bundle cannot tell what N ranks will exchange; that volume (bytes and calls per
kind) depends on the policy and the library's update, not on the env count or the device, so a multi-rank bundle of the
same task and library (a short run on CPU ranks will do) or a stated figure supplies it.
"""

from __future__ import annotations

from collections.abc import Mapping

from rlscale.benchmark.scaling_model import CollectiveVolume, RankProfile


def profile_of(bundle: Mapping, collectives: tuple[CollectiveVolume, ...]) -> RankProfile:
    """The profile of a completed 1-rank training bundle: its mean collection and update (learning) times, the
    collective time its ``ranks`` section may hold taken out of the update; ValueError (one line) for any other."""
    run, extra, runtime = bundle["run"], bundle["extra"], bundle["runtime"]
    if run["workflow"] != "training" or run["status"] != "completed":
        raise ValueError(f"needs a completed training bundle (this is a {run['status']} {run['workflow']} bundle)")
    if extra["world_size"] != 1:
        raise ValueError(f"needs a 1-rank training bundle (this one ran {extra['world_size']} ranks)")
    ranks = bundle.get("ranks")
    blocked = ranks["per_rank"][0]["collective_s"] if ranks else 0.0
    return RankProfile(
        collection_s=runtime["collection_time_s"]["mean"],
        update_s=runtime["learning_time_s"]["mean"] - blocked,
        steps_per_iteration=runtime["steps_per_iteration"],
        collectives=collectives,
    )


def measured_collectives(bundle: Mapping) -> tuple[CollectiveVolume, ...]:
    """Rank 0's collectives per iteration (median calls and bytes per kind) from a training bundle of two ranks or
    more; ValueError (one line) for a bundle without them."""
    ranks = bundle.get("ranks")
    if bundle["extra"]["world_size"] < 2 or not ranks:
        raise ValueError(
            "measured collectives come from the `ranks` section of a training bundle of 2 ranks or more "
            f"(this one ran {bundle['extra']['world_size']}, schema {bundle['schema_version']})"
        )
    return tuple(
        CollectiveVolume(kind, tally["calls"], tally["bytes"])
        for kind, tally in sorted(ranks["per_rank"][0]["collectives"].items())
    )


def stated_all_reduce(bytes_per_iteration: float, calls_per_iteration: float) -> tuple[CollectiveVolume, ...]:
    """A stated gradient exchange: all-reduce calls per iteration and their bytes in all."""
    if not (bytes_per_iteration >= 0 and calls_per_iteration >= 0):  # NaN fails too
        raise ValueError("--allreduce_bytes and --allreduce_calls must be at least 0")
    return (CollectiveVolume("all_reduce", calls_per_iteration, bytes_per_iteration),)


def same_workload(profile_bundle: Mapping, collectives_bundle: Mapping) -> str | None:
    """Why a bundle's collectives do not belong to a profile bundle's workload (another task or library), or None."""
    for key in ("task", "framework", "ml_framework"):
        if profile_bundle["run"][key] != collectives_bundle["run"][key]:
            return f"its run.{key} is {collectives_bundle['run'][key]!r}, the profile's {profile_bundle['run'][key]!r}"
    return None
