"""Parse-time validation and resolution of the study config: the schema, the task ids, the device, the CPU fallback,
where each world size runs, and the GPU limit Snakemake was given.

``workflow/rules/common.smk`` calls :func:`validated_config`; the logic lives here so that it can be unit-tested
without Snakemake.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path

import yaml

from rlscale.launch.gpus import GpuCounter, nvidia_hardware_present, nvml_device_count, visible_gpu_count
from rlscale.launch.lease import LeaseError, check_lease_environment
from rlscale.launch.ranks import GpuEvidence, NodeSplit
from rlscale.rl import LIBRARIES, fill_schema_enum, ml_frameworks
from rlscale.rl.agent_overrides import check_against_generic
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


def effective_config(
    config: Mapping,
    environ: Mapping[str, str] | None = None,
    nvml_count: GpuCounter = nvml_device_count,
    hardware_probe: GpuEvidence = nvidia_hardware_present,
) -> dict:
    """Return a copy of the validated config with ``device`` resolved (why in ``device_reason``) and, for ``auto`` on
    CPU, the fallback applied.

    ``device: auto`` on a host without a GPU runs the same study with CPU ranks (gloo): the keys of ``cpu_fallback``
    replace their namesakes (``iterations``, ``runtime_steps`` and ``parity`` key by key), so the study stays small
    enough for a CPU. ``num_envs_per_task`` and the per-task keys of ``parity`` become the fallback's own, ``{}`` when
    it gives none: per-task sizes are never carried from the study to CPU ranks. An explicit ``device: cpu`` keeps
    the sizes it was given. A ``num_envs_per_task`` of ``None`` (an overlay file clearing it) is ``{}``.
    """
    resolved = copy.deepcopy(dict(config))
    device, reason = resolve_device(config["device"], environ, nvml_count, hardware_probe)
    resolved["device"], resolved["device_reason"] = device, reason
    resolved["num_envs_per_task"] = resolved.get("num_envs_per_task") or {}
    if config["device"] == "auto" and device == "cuda" and config.get("cluster") != "slurm":
        _fit_world_sizes(resolved, visible_gpu_count(os.environ if environ is None else environ, nvml_count)[0])
    if config["device"] == "auto" and resolved["device"] == "cpu":
        fallback = config.get("cpu_fallback") or {}
        for key, value in fallback.items():
            if key in _MERGED_FALLBACK_KEYS:
                resolved[key] = {**resolved.get(key, {}), **value}
            else:
                resolved[key] = copy.deepcopy(value)
        resolved["num_envs_per_task"] = copy.deepcopy(fallback.get("num_envs_per_task") or {})
        fallback_parity = fallback.get("parity") or {}
        resolved["parity"] = {
            **resolved.get("parity", {}),
            **{key: copy.deepcopy(fallback_parity.get(key) or {}) for key in PARITY_TASK_KEYS},
        }
    return resolved


def _fit_world_sizes(resolved: dict, visible: int) -> None:
    """Drop the one-node world sizes that need more GPUs than the host has, saying so in ``device_reason``.

    ``device: auto`` studies what this host can run: on one GPU, the default study's world size 2 would only fail
    when its job starts. Larger sizes (several nodes) are left to :func:`check_config`, which refuses them.
    """
    kept = [size for size in resolved["world_sizes"] if size > resolved["gpus_per_node"] or size <= visible]
    dropped = [size for size in resolved["world_sizes"] if size not in kept]
    if not dropped:
        return
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


class StudyConfigError(ValueError):
    """A study config that cannot run; the message is one line naming the key, the value seen and the fix."""


_SCHEMA_FIXES = {
    "minimum": "use a value >= {}",
    "exclusiveMinimum": "use a value > {}",
    "maximum": "use a value <= {}",
    "enum": "use one of {}",
    "pattern": "use letters, digits, '_', '.' and '-' only",
    "minItems": "list at least {} value(s)",
    "uniqueItems": "list each value once",
    "required": "add it",
}
_TYPE_FIXES = {
    "array": "write a YAML list in a config file, e.g. [1, 2] (`--config key=[1,2]` passes a string)",
    "integer": "write a whole number",
    "object": "write a mapping of keys",
    "string": "write a string",
}


def _key_path(path) -> str:
    """``world_sizes[0]``, ``iterations.benchmark``, ``libraries[1].name`` from a jsonschema error path."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def _schema_message(error) -> str:
    """One line for the jsonschema error: ``<key>: <problem>; <fix>``."""
    where = _key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        known = list(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(known))
        key = f"{where}.{unknown[0]}" if where else unknown[0]
        return f"{key}: unknown key; valid keys{' of ' + where if where else ''}: {', '.join(known)}"
    if error.validator == "type":
        types = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        fix = _TYPE_FIXES.get(types[0], f"write a {types[0]}")
    else:
        value = error.validator_value
        value = ", ".join(map(str, value)) if isinstance(value, list) else value
        fix = _SCHEMA_FIXES.get(error.validator, "see workflow/schemas/config.schema.yaml").format(value)
    return f"{where or 'config'}: {error.message}; {fix}"


def library_schema(schema: dict) -> None:
    """Fill in the libraries' names and ML frameworks, which the schema file leaves to :data:`rlscale.rl.LIBRARIES`."""
    names = list(LIBRARIES)
    fill_schema_enum(schema, "properties.libraries.items.properties.name", names)
    fill_schema_enum(schema, "properties.libraries.items.properties.ml_framework", list(ml_frameworks()))
    fill_schema_enum(schema, "properties.agent_overrides.propertyNames", names)


def validate_schema(config: dict, schema_path: str | Path) -> None:
    """Validate ``config`` against the JSON schema and fill in the schema's defaults in place, as Snakemake's
    ``snakemake.utils.validate(config, schema, set_default=True)`` does.

    Raises:
        StudyConfigError: for the most relevant violation, in one line.
    """
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import best_match

    schema = yaml.safe_load(Path(schema_path).read_text())
    library_schema(schema)
    validate_properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):  # the jsonschema FAQ's recipe, as Snakemake uses it
        for name, subschema in properties.items():
            if "default" in subschema and isinstance(instance, dict):
                instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    validator = validators.extend(Draft202012Validator, {"properties": set_defaults})(schema)
    error = best_match(validator.iter_errors(config))
    if error is not None:
        raise StudyConfigError(f"config: {_schema_message(error)}")


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
) -> dict:
    """Validate the study config at parse time and return the effective one the rules read.

    Schema (defaults filled into ``config``), then :func:`check_task_ids`, :func:`effective_config` and
    :func:`check_config`.

    Raises:
        StudyConfigError: one line, ``config: <key>: <problem>; <fix>``, for the first problem found.
    """
    validate_schema(config, schema_path)
    try:
        check_lease_environment(os.environ if environ is None else environ)
        check_task_ids(config)
        study = effective_config(config, environ, nvml_count, hardware_probe)
        check_config(study)
    except (ValueError, LeaseError) as error:
        raise StudyConfigError(f"config: {error}") from None
    return study


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
