"""Parse-time validation and resolution of the study config: the schema, the device, the CPU fallback, and where
each world size runs.

``workflow/rules/common.smk`` calls :func:`validated_config`; the logic lives here so that it can be unit-tested
without Snakemake.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

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


_MERGED_FALLBACK_KEYS = ("iterations", "runtime_steps")
"""Keys of ``cpu_fallback`` merged key by key into their namesakes; every other key replaces its namesake."""


def effective_config(
    config: Mapping, environ: Mapping[str, str] | None = None, nvml_count: Callable[[], int] = nvml_device_count
) -> dict:
    """Return a copy of the validated config with ``device`` resolved and, for ``auto`` on CPU, the fallback applied.

    ``device: auto`` on a host without a GPU runs the same study with CPU ranks (gloo): the keys of ``cpu_fallback``
    replace their namesakes (``iterations`` and ``runtime_steps`` key by key), so the study stays small enough for a
    CPU. ``num_envs_per_task`` becomes the fallback's own, ``{}`` when it gives none: per-task sizes are never carried
    from the study to CPU ranks. An explicit ``device: cpu`` keeps the sizes it was given. A ``num_envs_per_task`` of
    ``None`` (an overlay file clearing it) is ``{}``.
    """
    resolved = copy.deepcopy(dict(config))
    resolved["device"] = resolve_device(config["device"], environ, nvml_count)
    resolved["num_envs_per_task"] = resolved.get("num_envs_per_task") or {}
    if config["device"] == "auto" and resolved["device"] == "cpu":
        fallback = config.get("cpu_fallback") or {}
        for key, value in fallback.items():
            if key in _MERGED_FALLBACK_KEYS:
                resolved[key] = {**resolved.get(key, {}), **value}
            else:
                resolved[key] = copy.deepcopy(value)
        resolved["num_envs_per_task"] = copy.deepcopy(fallback.get("num_envs_per_task") or {})
    return resolved


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


def validate_schema(config: dict, schema_path: str | Path) -> None:
    """Validate ``config`` against the JSON schema and fill in the schema's defaults in place, as Snakemake's
    ``snakemake.utils.validate(config, schema, set_default=True)`` does.

    Raises:
        StudyConfigError: for the most relevant violation, in one line.
    """
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import best_match

    schema = yaml.safe_load(Path(schema_path).read_text())
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


def validated_config(
    config: dict,
    schema_path: str | Path,
    environ: Mapping[str, str] | None = None,
    nvml_count: Callable[[], int] = nvml_device_count,
) -> dict:
    """Validate the study config at parse time and return the effective one the rules read.

    Schema (defaults filled into ``config``), then :func:`effective_config`, then :func:`check_config`.

    Raises:
        StudyConfigError: one line, ``config: <key>: <problem>; <fix>``, for the first problem found.
    """
    validate_schema(config, schema_path)
    try:
        study = effective_config(config, environ, nvml_count)
        check_config(study)
    except ValueError as error:
        raise StudyConfigError(f"config: {error}") from None
    return study


def nodes_for(world_size: int, gpus_per_node: int, device: str) -> int:
    """Return the nodes a world size spans: 1 up to ``gpus_per_node`` (or on CPU), else ``world_size / gpus_per_node``.

    Raises:
        ValueError: If a multi-node world size is not a multiple of ``gpus_per_node``.
    """
    if device == "cpu" or world_size <= gpus_per_node:
        return 1
    if world_size % gpus_per_node:
        raise ValueError(
            f"world_sizes: {world_size} spans several nodes but is not a multiple of gpus_per_node={gpus_per_node}; "
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
        raise ValueError(f"libraries lists the same library and ml_framework twice: {keys}; list each once.")
    for entry in config["libraries"]:
        if entry["ml_framework"] != "torch":
            raise ValueError(
                f"{entry['name']} with ml_framework {entry['ml_framework']}: the multi-GPU benchmark times torchrun "
                "ranks, and skrl's JAX launcher is not one; study it with ml_framework torch."
            )
    for task in config.get("num_envs_per_task") or {}:
        if task not in config["tasks"]:
            raise ValueError(
                f"num_envs_per_task.{task}: {task} is not in tasks ({', '.join(config['tasks'])}); add it to tasks "
                "or remove its entry (an overlay file clears every entry with `num_envs_per_task: null`)."
            )
    for world_size in config["world_sizes"]:
        nodes_for(world_size, config["gpus_per_node"], config["device"])
