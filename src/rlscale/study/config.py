"""Parse-time resolution of the study config: the device, the CPU fallback, and where each world size runs.

``workflow/rules/common.smk`` calls these after validating the config against ``workflow/schemas/config.schema.yaml``;
they hold the logic so that it can be unit-tested without Snakemake.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping

from rlscale.launch.command import nvml_device_count, visible_gpu_count

DEVICES = ("auto", "cuda", "cpu")
"""Values of the config's ``device`` key."""


def resolve_device(
    requested: str, environ: Mapping[str, str] | None = None, nvml_count: Callable[[], int] = nvml_device_count
) -> str:
    """Return ``cuda`` or ``cpu``; ``auto`` is ``cuda`` when a GPU is visible (``CUDA_VISIBLE_DEVICES``, else NVML)."""
    if requested not in DEVICES:
        raise ValueError(f"device {requested!r} is not one of {', '.join(DEVICES)}.")
    if requested != "auto":
        return requested
    visible, _ = visible_gpu_count(os.environ if environ is None else environ, nvml_count)
    return "cuda" if visible > 0 else "cpu"


def effective_config(
    config: Mapping, environ: Mapping[str, str] | None = None, nvml_count: Callable[[], int] = nvml_device_count
) -> dict:
    """Return a copy of the validated config with ``device`` resolved and, for ``auto`` on CPU, the fallback applied.

    ``device: auto`` on a host without a GPU runs the same study with CPU ranks (gloo): the keys of ``cpu_fallback``
    replace their namesakes (nested ``iterations`` key by key), so the study stays small enough for a CPU. An
    explicit ``device: cpu`` keeps the sizes it was given.
    """
    resolved = copy.deepcopy(dict(config))
    resolved["device"] = resolve_device(config["device"], environ, nvml_count)
    if config["device"] == "auto" and resolved["device"] == "cpu":
        for key, value in (config.get("cpu_fallback") or {}).items():
            if isinstance(value, Mapping):
                resolved[key] = {**resolved.get(key, {}), **value}
            else:
                resolved[key] = copy.deepcopy(value)
    return resolved


def nodes_for(world_size: int, gpus_per_node: int, device: str) -> int:
    """Return the nodes a world size spans: 1 up to ``gpus_per_node`` (or on CPU), else ``world_size / gpus_per_node``.

    Raises:
        ValueError: If a multi-node world size is not a multiple of ``gpus_per_node``.
    """
    if device == "cpu" or world_size <= gpus_per_node:
        return 1
    if world_size % gpus_per_node:
        raise ValueError(
            f"world size {world_size} spans several nodes but is not a multiple of gpus_per_node={gpus_per_node}; "
            "use multiples of gpus_per_node above it."
        )
    return world_size // gpus_per_node


def library_key(name: str, ml_framework: str) -> str:
    """Return the path/wildcard name of a library entry: ``rsl_rl``, or ``skrl-jax`` for a non-torch framework."""
    return name if ml_framework == "torch" else f"{name}-{ml_framework}"


def check_config(config: Mapping) -> None:
    """Check what the JSON schema cannot express, on the effective config; raise ``ValueError`` naming the fix."""
    if config["warmup_iterations"] >= config["iterations"]["benchmark"]:
        raise ValueError(
            f"warmup_iterations={config['warmup_iterations']} leaves none of iterations.benchmark="
            f"{config['iterations']['benchmark']} to measure; lower it or raise iterations.benchmark."
        )
    keys = [library_key(entry["name"], entry["ml_framework"]) for entry in config["libraries"]]
    if len(set(keys)) != len(keys):
        raise ValueError(f"libraries lists the same library and ml_framework twice: {keys}.")
    for entry in config["libraries"]:
        if entry["ml_framework"] != "torch":
            raise ValueError(
                f"{entry['name']} with ml_framework {entry['ml_framework']}: the multi-GPU benchmark times torchrun "
                "ranks, and skrl's JAX launcher is not one; study it with ml_framework torch."
            )
    for world_size in config["world_sizes"]:
        nodes_for(world_size, config["gpus_per_node"], config["device"])
