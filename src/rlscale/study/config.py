"""Parse-time validation and resolution of the study config: the schema, the task ids, the device, the CPU fallback
and the fit to this host's GPUs and cores; the cross-field checks are :mod:`rlscale.study.checks`'.

``workflow/rules/common.smk`` calls :func:`validated_config`; the logic lives here so that it can be unit-tested
without Snakemake.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from rlscale.launch.gpus import GpuCounter, nvidia_hardware_present, nvml_device_count, visible_gpu_count
from rlscale.launch.lease import LeaseError, check_lease_environment
from rlscale.launch.ranks import GpuEvidence, cpu_ranks_short_of_cores
from rlscale.study.checks import DEFAULT_BASE, PARITY_TASK_KEYS, check_config, check_task_ids, user_wrote
from rlscale.study.evaluation import evaluated_tasks
from rlscale.study.schema import StudyConfigError, validate_schema

DEVICES = ("auto", "cuda", "cpu")
"""Values of the config's ``device`` key."""


def resolve_device(
    requested: str,
    environ: Mapping[str, str] | None = None,
    nvml_count: GpuCounter = nvml_device_count,
    hardware_probe: GpuEvidence = nvidia_hardware_present,
    written_in: str = "the config",
) -> tuple[str, str]:
    """Return ``cuda`` or ``cpu`` and why, in one line for the study log and summary (``written_in``: where an
    explicit ``cuda`` or ``cpu`` was written).

    ``auto`` is ``cuda`` when a GPU is visible (``CUDA_VISIBLE_DEVICES``, else NVML), else ``cpu``. It never chooses
    ``cpu`` on a host that has NVIDIA GPUs it could not count (NVML missing or broken): that would quietly run the
    small CPU study where a GPU study was meant. An empty ``CUDA_VISIBLE_DEVICES`` hides the GPUs on purpose.

    Raises:
        ValueError: for an unknown ``requested``, or ``auto`` finding no usable GPU on a host that has some.
    """
    if requested not in DEVICES:
        raise ValueError(f"device {requested!r} is not one of {', '.join(DEVICES)}.")
    if requested != "auto":
        return requested, f"device: {requested}, as {written_in} sets"
    environ = os.environ if environ is None else environ
    visible, source = visible_gpu_count(environ, nvml_count)
    if visible > 0:
        return "cuda", f"device: auto chose cuda: {visible} GPU(s) visible ({source})"
    fallback = "device: auto chose cpu with the cpu_fallback sizes"
    if "CUDA_VISIBLE_DEVICES" in environ:
        return "cpu", f"{fallback}: {source} hides every GPU"
    evidence = hardware_probe()
    if evidence:
        raise ValueError(
            f"device: auto found no usable GPU ({source}) although {evidence}; fix the NVIDIA driver/library path, "
            "or set device: cpu to run on CPU ranks"
        )
    return "cpu", f"{fallback}: no GPU visible ({source}) and no NVIDIA device on this host"


_MERGED_FALLBACK_KEYS = ("iterations", "runtime_steps", "parity")
"""Keys of ``cpu_fallback`` merged key by key into their namesakes; every other key replaces its namesake."""


def effective_config(
    config: Mapping,
    environ: Mapping[str, str] | None = None,
    nvml_count: GpuCounter = nvml_device_count,
    hardware_probe: GpuEvidence = nvidia_hardware_present,
    explicit: Mapping[str, str] | None = None,
    base: str = DEFAULT_BASE,
) -> dict:
    """Return a copy of the validated config with ``device`` resolved (why in ``device_reason``), fitted to the GPUs
    of this host and, for ``auto`` on CPU, the fallback applied.

    ``device: auto`` on a host without a GPU runs the same study with CPU ranks (gloo): the keys of ``cpu_fallback``
    replace their namesakes (``iterations``, ``runtime_steps`` and ``parity`` key by key), so the study stays small
    enough for a CPU. ``num_envs_per_task`` and the per-task keys of ``parity`` hold the fallback's entries and those
    the user wrote: the project's per-task sizes are never carried from the study to CPU ranks. An explicit
    ``device: cpu`` keeps the sizes it was given. A ``num_envs_per_task`` of ``None`` (an overlay file clearing it) is
    ``{}``.

    What the user wrote wins: ``explicit`` maps each dotted key of the user's own files, profiles and ``--config``
    values to where it was written (:func:`rlscale.study.config_source.explicit_keys`), and the fallback fills only
    the keys (and per-task entries) not in it. ``fallback_filled`` and ``fallback_kept`` of the result list which keys
    it filled and which of the user's it left alone; ``explicit`` and ``base`` (where the rest comes from) are kept in
    the result for the later checks and the plan.

    Raises:
        ValueError: ``device: cuda`` written for a host with no GPU visible (outside a SLURM cluster).
    """
    explicit = dict(explicit or {})
    resolved = copy.deepcopy(dict(config))
    written_in = user_wrote(explicit, "device") or base
    device, reason = resolve_device(config["device"], environ, nvml_count, hardware_probe, written_in)
    resolved["device"], resolved["device_reason"] = device, reason
    resolved["num_envs_per_task"] = resolved.get("num_envs_per_task") or {}
    resolved["explicit"], resolved["base"] = explicit, base
    resolved["fallback_filled"], resolved["fallback_kept"] = [], []
    if device == "cuda" and config.get("cluster") != "slurm":
        visible, source = visible_gpu_count(os.environ if environ is None else environ, nvml_count)
        if not visible:
            raise ValueError(
                f"device: cuda (from {written_in}) but no GPU is visible here ({source}); set device: auto or cpu, "
                "or run on a cluster with --profile config/profiles/slurm"
            )
        _fit_world_sizes(resolved, visible, user_wrote(explicit, "world_sizes"))
    if config["device"] == "auto" and resolved["device"] == "cpu":
        _apply_fallback(resolved, config.get("cpu_fallback") or {}, explicit)
    return resolved


def _apply_fallback(resolved: dict, fallback: Mapping, explicit: Mapping[str, str]) -> None:
    """Fill the keys the user did not write with ``cpu_fallback``'s, in place, noting each key filled or kept.

    Nested ``iterations``, ``runtime_steps`` and ``parity`` are filled key by key; ``num_envs_per_task`` and the
    per-task keys of ``parity`` become the fallback's entries (none when it gives none) and the entries the user wrote.
    """
    filled, kept = resolved["fallback_filled"], resolved["fallback_kept"]

    def fill(key: str, value, target: dict, name: str) -> None:
        source = user_wrote(explicit, key)
        if source is None:
            target[name] = copy.deepcopy(value)
            filled.append(key)
        elif key in fallback_keys:
            kept.append((key, source))

    def fill_tasks(key: str, value: Mapping, target: dict, name: str) -> None:
        entries = (target.get(name) or {}).items()
        written = {task: entry for task, entry in entries if user_wrote(explicit, f"{key}.{task}")}
        target[name] = {**copy.deepcopy(dict(value)), **written}
        if written:
            kept.append((key, user_wrote(explicit, key)))
        if value or not written:
            filled.append(key)

    fallback_keys = {
        *(key for key in fallback if key not in _MERGED_FALLBACK_KEYS),
        *(f"{key}.{name}" for key in _MERGED_FALLBACK_KEYS for name in fallback.get(key) or {}),
    }
    for key, value in fallback.items():
        if key in _MERGED_FALLBACK_KEYS:
            resolved[key] = dict(resolved.get(key) or {})
            for name, entry in value.items():
                if not (key == "parity" and name in PARITY_TASK_KEYS):
                    fill(f"{key}.{name}", entry, resolved[key], name)
        elif key != "num_envs_per_task":
            fill(key, value, resolved, key)
    fill_tasks("num_envs_per_task", fallback.get("num_envs_per_task") or {}, resolved, "num_envs_per_task")
    resolved["parity"] = dict(resolved.get("parity") or {})
    for key in PARITY_TASK_KEYS:
        fill_tasks(f"parity.{key}", (fallback.get("parity") or {}).get(key) or {}, resolved["parity"], key)


def _fit_world_sizes(resolved: dict, visible: int, written_in: str | None) -> None:
    """Drop the one-node world sizes that need more GPUs than the host has, saying so in ``device_reason``; refuse
    them instead when the user wrote them (``written_in`` says where).

    ``device: auto`` studies what this host can run: on one GPU, the default study's world size 2 would only fail
    when its job starts. Larger sizes (several nodes) are left to :func:`check_config`, which refuses them.
    """
    kept = [size for size in resolved["world_sizes"] if size > resolved["gpus_per_node"] or size <= visible]
    dropped = [size for size in resolved["world_sizes"] if size not in kept]
    if not dropped:
        return
    if written_in is not None:
        raise ValueError(
            f"world_sizes: {dropped} (from {written_in}) need more GPUs than the {visible} visible; remove them, or "
            "run on a host or cluster (--profile config/profiles/slurm) with as many"
        )
    if not kept:
        raise ValueError(
            f"world_sizes: {resolved['world_sizes']} all need more than the {visible} GPU(s) visible; add 1, or run "
            "with --profile config/profiles/slurm"
        )
    resolved["world_sizes"] = kept
    resolved["device_reason"] += f"; world_sizes {dropped} dropped: they need more GPUs than the {visible} visible"


def envs_for(study: Mapping, task: str) -> list[int]:
    """Return the per-rank env counts of ``task``: its ``num_envs_per_task`` entry, else ``num_envs_per_rank``."""
    return list((study.get("num_envs_per_task") or {}).get(task, study["num_envs_per_rank"]))


def validated_config(
    config: dict,
    schema_path: str | Path,
    environ: Mapping[str, str] | None = None,
    nvml_count: GpuCounter = nvml_device_count,
    hardware_probe: GpuEvidence = nvidia_hardware_present,
    explicit: Mapping[str, str] | None = None,
    cpu_count: Callable[[], int] = lambda: len(os.sched_getaffinity(0)),
    base: str = DEFAULT_BASE,
) -> dict:
    """Validate the study config at parse time and return the effective one the rules read.

    Schema (defaults filled into ``config``), then :func:`check_task_ids`, :func:`effective_config` (``explicit``:
    what the user wrote, and where; ``base``: where the rest comes from), the tasks the evaluation stage measures
    (``evaluated_tasks``: those that define an evaluation), :func:`fit_cpu_ranks` and :func:`check_config`.

    Raises:
        StudyConfigError: one line, ``config: <key> (from <source>): <problem>; <fix>``, for the first problem found.
    """

    def written_in(key: str) -> str:
        return user_wrote(explicit or {}, key) or base

    validate_schema(config, schema_path, written_in)
    try:
        check_lease_environment(os.environ if environ is None else environ)
        check_task_ids(config, written_in)
        study = effective_config(config, environ, nvml_count, hardware_probe, explicit, base)
        study["evaluated_tasks"] = evaluated_tasks(study["tasks"])
        fit_cpu_ranks(study, cpu_count())
        check_config(study)
    except (ValueError, LeaseError) as error:
        raise StudyConfigError(f"config: {error}") from None
    return study


def fit_cpu_ranks(study: dict, cores: int) -> None:
    """On CPU ranks of this host, each rank takes a core: refuse the world sizes above the host's cores that the user
    wrote, and drop (saying so in ``device_reason``) those the defaults or the fallback gave.

    A SLURM study's CPU ranks run on its nodes, whose cores this host cannot count.
    """
    if study["device"] != "cpu" or study.get("cluster") == "slurm":
        return
    above = [size for size in study["world_sizes"] if cpu_ranks_short_of_cores(size, cores)]
    if not above:
        return
    why = cpu_ranks_short_of_cores(max(above), cores)
    written_in = user_wrote(study["explicit"], "world_sizes")
    if written_in is not None:
        raise ValueError(
            f"world_sizes: {above} (from {written_in}) {why}; list sizes up to {cores}, or run with device: cuda on "
            "GPUs"
        )
    kept = [size for size in study["world_sizes"] if size not in above]
    if not kept:
        raise ValueError(f"world_sizes: {study['world_sizes']} all need more than the {cores} core(s) here; add 1")
    study["world_sizes"] = kept
    study["device_reason"] += f"; world_sizes {above} dropped: {why}"
