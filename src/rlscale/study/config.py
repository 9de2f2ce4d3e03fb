"""Parse-time validation and resolution of the study config: the schema, the task ids, the device, the CPU fallback,
where each world size runs, and the GPU limit Snakemake was given.

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
from rlscale.launch.ranks import GpuEvidence, NodeSplit
from rlscale.rl.agent_overrides import check_against_generic
from rlscale.rl.tracking import missing_client
from rlscale.run.args import TRACKER_OPTIONS
from rlscale.study.schema import StudyConfigError, validate_schema
from rlscale.tasks import UnknownTaskError, resolve_task_id

DEVICES = ("auto", "cuda", "cpu")
"""Values of the config's ``device`` key."""


def resolve_device(
    requested: str,
    environ: Mapping[str, str] | None = None,
    nvml_count: GpuCounter = nvml_device_count,
    hardware_probe: GpuEvidence = nvidia_hardware_present,
) -> tuple[str, str]:
    """Return ``cuda`` or ``cpu`` and why, in one line for the study log and summary.

    ``auto`` is ``cuda`` when a GPU is visible (``CUDA_VISIBLE_DEVICES``, else NVML), else ``cpu``. It never chooses
    ``cpu`` on a host that has NVIDIA GPUs it could not count (NVML missing or broken): that would quietly run the
    small CPU study where a GPU study was meant. An empty ``CUDA_VISIBLE_DEVICES`` hides the GPUs on purpose.

    Raises:
        ValueError: for an unknown ``requested``, or ``auto`` finding no usable GPU on a host that has some.
    """
    if requested not in DEVICES:
        raise ValueError(f"device {requested!r} is not one of {', '.join(DEVICES)}.")
    if requested != "auto":
        return requested, f"device: {requested}, as the config sets"
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
PARITY_TASK_KEYS = ("max_env_steps", "target", "num_envs_per_rank", "libraries")
"""Keys of ``parity`` that map task ids; on CPU they are the fallback's own, like ``num_envs_per_task``."""


def user_wrote(explicit: Mapping[str, str], key: str) -> str | None:
    """Where the user wrote ``key`` (a dotted path such as ``iterations.train``), or one of its parts; None if not."""
    for path, source in explicit.items():
        if path == key or path.startswith(f"{key}.") or key.startswith(f"{path}."):
            return source
    return None


def effective_config(
    config: Mapping,
    environ: Mapping[str, str] | None = None,
    nvml_count: GpuCounter = nvml_device_count,
    hardware_probe: GpuEvidence = nvidia_hardware_present,
    explicit: Mapping[str, str] | None = None,
) -> dict:
    """Return a copy of the validated config with ``device`` resolved (why in ``device_reason``) and, for ``auto`` on
    CPU, the fallback applied.

    ``device: auto`` on a host without a GPU runs the same study with CPU ranks (gloo): the keys of ``cpu_fallback``
    replace their namesakes (``iterations``, ``runtime_steps`` and ``parity`` key by key), so the study stays small
    enough for a CPU. ``num_envs_per_task`` and the per-task keys of ``parity`` become the fallback's own, ``{}`` when
    it gives none: per-task sizes are never carried from the study to CPU ranks. An explicit ``device: cpu`` keeps
    the sizes it was given. A ``num_envs_per_task`` of ``None`` (an overlay file clearing it) is ``{}``.

    What the user wrote wins: ``explicit`` maps each dotted key of the user's own files and ``--config`` values to
    where it was written (:func:`rlscale.study.config_source.explicit_keys`), and the fallback fills only the keys
    not in it. ``fallback_filled`` and ``fallback_kept`` of the result list which keys it filled and which of the
    user's it left alone; ``explicit`` is kept in the result for the later checks and the plan.
    """
    explicit = dict(explicit or {})
    resolved = copy.deepcopy(dict(config))
    device, reason = resolve_device(config["device"], environ, nvml_count, hardware_probe)
    resolved["device"], resolved["device_reason"] = device, reason
    resolved["num_envs_per_task"] = resolved.get("num_envs_per_task") or {}
    resolved["explicit"], resolved["fallback_filled"], resolved["fallback_kept"] = explicit, [], []
    if config["device"] == "auto" and device == "cuda" and config.get("cluster") != "slurm":
        visible = visible_gpu_count(os.environ if environ is None else environ, nvml_count)[0]
        _fit_world_sizes(resolved, visible, user_wrote(explicit, "world_sizes"))
    if config["device"] == "auto" and resolved["device"] == "cpu":
        _apply_fallback(resolved, config.get("cpu_fallback") or {}, explicit)
    return resolved


def _apply_fallback(resolved: dict, fallback: Mapping, explicit: Mapping[str, str]) -> None:
    """Fill the keys the user did not write with ``cpu_fallback``'s, in place, noting each key filled or kept.

    Nested ``iterations``, ``runtime_steps`` and ``parity`` are filled key by key; ``num_envs_per_task`` and the
    per-task keys of ``parity`` become the fallback's own (``{}`` when it gives none) unless the user wrote them.
    """
    filled, kept = resolved["fallback_filled"], resolved["fallback_kept"]

    def fill(key: str, value, target: dict, name: str) -> None:
        source = user_wrote(explicit, key)
        if source is None:
            target[name] = copy.deepcopy(value)
            filled.append(key)
        elif key in fallback_keys:
            kept.append((key, source))

    fallback_parity = fallback.get("parity") or {}
    fallback_keys = {
        *(key for key in fallback if key not in _MERGED_FALLBACK_KEYS),
        *(f"{key}.{name}" for key in _MERGED_FALLBACK_KEYS for name in fallback.get(key) or {}),
        "num_envs_per_task",
        *(f"parity.{key}" for key in PARITY_TASK_KEYS),
    }
    for key, value in fallback.items():
        if key in _MERGED_FALLBACK_KEYS:
            resolved[key] = dict(resolved.get(key) or {})
            for name, entry in value.items():
                if not (key == "parity" and name in PARITY_TASK_KEYS):
                    fill(f"{key}.{name}", entry, resolved[key], name)
        else:
            fill(key, value, resolved, key)
    fill("num_envs_per_task", fallback.get("num_envs_per_task") or {}, resolved, "num_envs_per_task")
    resolved["parity"] = dict(resolved.get("parity") or {})
    for key in PARITY_TASK_KEYS:
        fill(f"parity.{key}", fallback_parity.get(key) or {}, resolved["parity"], key)


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


def _check_task_id(key: str, task: str) -> None:
    """Refuse, naming ``key``, a task id the registry does not know or an alias of one."""
    try:
        registered = resolve_task_id(task)
    except UnknownTaskError as error:
        raise ValueError(f"{key}: {error}") from None
    if registered != task:
        raise ValueError(f"{key}: {task} is an alias of {registered}; write {registered}")


def check_task_ids(config: Mapping) -> None:
    """Refuse task ids that are not registered, in ``tasks`` and the CPU fallback's (checked on a GPU host too), so
    that a typo stops the study at parse time rather than when its validate job runs. ``num_envs_per_task`` keys
    must be among the tasks (:func:`check_config`), hence registered too.

    An Isaac Lab alias is refused as well: results and bundles are filed under the registered id, which it must match.
    A plug-in's ``package.module:Task-Id`` stays as written (every job imports the module again); a broken plug-in
    is refused here, in one line naming it.

    Raises:
        ValueError: naming the key, the id and the registry's way out.
    """
    fallback = config.get("cpu_fallback") or {}
    for key, tasks in (("tasks", config["tasks"]), ("cpu_fallback.tasks", fallback.get("tasks", []))):
        for task in tasks:
            _check_task_id(key, task)


def validated_config(
    config: dict,
    schema_path: str | Path,
    environ: Mapping[str, str] | None = None,
    nvml_count: GpuCounter = nvml_device_count,
    hardware_probe: GpuEvidence = nvidia_hardware_present,
    explicit: Mapping[str, str] | None = None,
    cpu_count: Callable[[], int] = lambda: len(os.sched_getaffinity(0)),
) -> dict:
    """Validate the study config at parse time and return the effective one the rules read.

    Schema (defaults filled into ``config``), then :func:`check_task_ids`, :func:`effective_config` (``explicit``:
    what the user wrote, and where), :func:`fit_cpu_ranks` and :func:`check_config`.

    Raises:
        StudyConfigError: one line, ``config: <key>: <problem>; <fix>``, for the first problem found.
    """
    validate_schema(config, schema_path)
    try:
        check_lease_environment(os.environ if environ is None else environ)
        check_task_ids(config)
        study = effective_config(config, environ, nvml_count, hardware_probe, explicit)
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
    above = [size for size in study["world_sizes"] if size > cores]
    if not above:
        return
    written_in = user_wrote(study["explicit"], "world_sizes")
    if written_in is not None:
        raise ValueError(
            f"world_sizes: {above} (from {written_in}) CPU ranks need a core each, and this host has {cores}; list "
            f"sizes up to {cores}, or run with device: cuda on GPUs"
        )
    kept = [size for size in study["world_sizes"] if size <= cores]
    if not kept:
        raise ValueError(f"world_sizes: {study['world_sizes']} all need more than the {cores} core(s) here; add 1")
    study["world_sizes"] = kept
    study["device_reason"] += f"; world_sizes {above} dropped: CPU ranks need a core each, and this host has {cores}"


def node_split(world_size: int, gpus_per_node: int, device: str) -> NodeSplit:
    """Return a world size's split over nodes: one node up to ``gpus_per_node`` (or on CPU), else
    ``world_size / gpus_per_node`` nodes of ``gpus_per_node`` ranks.

    Raises:
        ValueError: If a multi-node world size is not a multiple of ``gpus_per_node``.
    """
    if device == "cpu" or world_size <= gpus_per_node:
        return NodeSplit(world_size)
    if world_size % gpus_per_node:
        raise ValueError(
            f"world_sizes: {world_size} spans several nodes but is not a multiple of gpus_per_node={gpus_per_node}; "
            "use multiples of gpus_per_node above it."
        )
    return NodeSplit(world_size, world_size // gpus_per_node)


def _check_logger(config: Mapping) -> None:
    logger = config.get("logger", "tensorboard")  # the schema's default
    extra = missing_client(logger)
    if extra is not None:
        raise ValueError(f"logger: {logger} needs its client, which is not installed: pip install '{extra}'")
    if config["peer_baseline"] and logger != "tensorboard":
        raise ValueError(
            f"peer_baseline with logger {logger}: a tracker run adds work the peer baseline does not do to the timed "
            "iterations; set logger: tensorboard or peer_baseline: false."
        )


def check_config(config: Mapping) -> None:
    """Check what the JSON schema cannot express, on the effective config; raise ``ValueError`` naming the fix."""
    if config["warmup_iterations"] >= config["iterations"]["benchmark"]:
        raise ValueError(
            f"warmup_iterations={config['warmup_iterations']} leaves none of iterations.benchmark="
            f"{config['iterations']['benchmark']} to measure; lower it or raise iterations.benchmark."
        )
    for entry in config["libraries"]:
        if entry["ml_framework"] != "torch":
            raise ValueError(
                f"{entry['name']} with ml_framework {entry['ml_framework']}: the multi-GPU benchmark times torchrun "
                "ranks, and skrl's JAX launcher is not one; study it with ml_framework torch."
            )
    keys = [entry["name"] for entry in config["libraries"]]  # every entry is torch (above): its name is its key
    if len(set(keys)) != len(keys):
        raise ValueError(f"libraries lists the same library and ml_framework twice: {keys}; list each once.")
    for library, overrides in config["agent_overrides"].items():
        for index, override in enumerate(overrides):
            if override.startswith("agent."):
                try:
                    check_against_generic(override.removeprefix("agent."), library)
                except ValueError as error:
                    raise ValueError(f"agent_overrides.{library}[{index}]: {override}: {error}") from None
    for library, overrides in config["agent_overrides"].items():
        for index, override in enumerate(overrides):
            if override.partition("=")[0] in TRACKER_OPTIONS:
                raise ValueError(
                    f"agent_overrides.{library}[{index}]: {override}: the study's logger and log_project_name keys set "
                    "the tracker of every run; set them instead"
                )
    _check_logger(config)
    if config["peer_baseline"] and any(config["agent_overrides"].values()):
        raise ValueError(
            "peer_baseline with agent_overrides: the peer baseline trains the agent config as shipped and cannot "
            "mirror them; empty agent_overrides or set peer_baseline: false."
        )
    for task in config.get("num_envs_per_task") or {}:
        if task not in config["tasks"]:
            raise ValueError(
                f"num_envs_per_task.{task}: {task} is not in tasks ({', '.join(config['tasks'])}); add it to tasks "
                "or remove its entry (an overlay file clears every entry with `num_envs_per_task: null`)."
            )
    for world_size in config["world_sizes"]:
        nodes = node_split(world_size, config["gpus_per_node"], config["device"]).nodes
        if nodes > 1 and config["cluster"] != "slurm":
            raise ValueError(
                f"world_sizes: {world_size} spans {nodes} nodes of gpus_per_node={config['gpus_per_node']}, which "
                "needs a cluster: run with --profile config/profiles/slurm (docs/cluster.md), or drop it"
            )
    check_parity(config, keys)


PARITY_METRICS = ("mean_episode_length", "mean_return")
"""Parity targets every task has; a task's ``Metrics/<name>`` log values (``extras["log"]``) are targets too."""
PARITY_METRIC_PREFIX = "Metrics/"


def check_parity(study: Mapping, library_keys: list[str]) -> None:
    """Check what the schema cannot in ``parity``: its task ids are registered (a task that is not in ``tasks`` has
    no parity runs, so an overlay may drop tasks), each key but ``target`` names a task with a target, each studied
    target has a budget, a known metric and libraries of the study, and world size 1 is there to compare with.

    Raises:
        ValueError: naming the key and the fix.
    """
    parity = study.get("parity") or {}
    targets = parity.get("target") or {}
    for key in PARITY_TASK_KEYS:
        for task in parity.get(key) or {}:
            _check_task_id(f"parity.{key}", task)
            if task not in targets:
                raise ValueError(f"parity.{key}.{task}: {task} has no parity.target; add one or remove the entry")
    studied = [task for task in targets if task in study["tasks"]]
    for task in studied:
        if task not in (parity.get("max_env_steps") or {}):
            raise ValueError(f"parity.max_env_steps: {task} has a target but no budget; add max_env_steps.{task}")
        metric = targets[task]["metric"]
        if metric not in PARITY_METRICS and not metric.startswith(PARITY_METRIC_PREFIX):
            raise ValueError(
                f"parity.target.{task}.metric: {metric!r}; use {', '.join(PARITY_METRICS)} or a task log key "
                f"{PARITY_METRIC_PREFIX}<name>"
            )
        for library in (parity.get("libraries") or {}).get(task, []):
            if library not in library_keys:
                raise ValueError(
                    f"parity.libraries.{task}: {library} is not among the study's libraries ({', '.join(library_keys)})"
                )
    if studied and 1 not in study["world_sizes"]:
        raise ValueError("parity: world_sizes has no 1, the size every parity run is compared with; add 1")


def check_gpu_limit(study: Mapping, gpu_limit: int | None) -> None:
    """Refuse a Snakemake GPU limit (``--resources gpu=N``) below what one job of a CUDA study needs on one host.

    Snakemake accepts it and shrinks the job's grant to N, so the job's launcher would refuse only once the study
    reaches it. World sizes up to ``gpus_per_node`` need that many GPUs of one host (validate needs one); larger ones
    ask SLURM for ``gpus_per_node`` per node through ``gres``, outside this limit. Without a limit there is nothing to
    check.

    Raises:
        StudyConfigError: naming the limit, the world size that needs more and the fix.
    """
    if study["device"] != "cuda" or gpu_limit is None:
        return
    splits = [node_split(size, study["gpus_per_node"], "cuda") for size in study["world_sizes"]]
    largest = max([1, *(split.world_size for split in splits if split.nodes == 1)])  # validate runs one rank
    needed = NodeSplit(largest).gpus_per_node("cuda")
    if gpu_limit < needed:
        raise StudyConfigError(
            f"resources: gpu={gpu_limit} is below the {needed} GPU(s) that world size {largest} needs on one host, so "
            f"its jobs would be refused when they run; pass --resources gpu={needed} or more, or drop that world size"
        )
