"""The study config's JSON schema (``workflow/schemas/config.schema.yaml``): the libraries' names filled in, defaults
set as Snakemake's ``validate(..., set_default=True)`` does, and each violation said in one line with its fix."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import yaml

from rlscale.argparsing import closest
from rlscale.rl import LIBRARIES, fill_schema_enum, ml_frameworks


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
    "number": "write a number",
    "object": "write a mapping of keys",
    "string": "write a string",
    "boolean": "write true or false",
}


def _key_path(path) -> str:
    """``world_sizes[0]``, ``iterations.benchmark``, ``libraries[1].name`` from a jsonschema error path."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def _as_number(value) -> float | None:
    """A string YAML left as text although it reads as a number (PyYAML takes ``8e6`` for a string), else None."""
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _schema_message(error, source: Callable[[str], str]) -> str:
    """One line for the jsonschema error: ``<key> (from <source>): <problem>; <fix>``."""
    names = [part for part in error.absolute_path if isinstance(part, str)]
    where = _key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        known = list(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(known))
        key = f"{where}.{unknown[0]}" if where else unknown[0]
        origin = source(".".join([*names, unknown[0]]))
        meant = closest(unknown[0], known)
        if meant is not None:
            return f"{key} (from {origin}): unknown key; did you mean {meant}?"
        return f"{key} (from {origin}): unknown key; valid keys{' of ' + where if where else ''}: {', '.join(known)}"
    shown = f"{where or 'config'} (from {source('.'.join(names))})" if names else where or "config"
    if error.validator == "oneOf" and isinstance(error.instance, dict) and "metric" in error.instance:
        both = {"at_least", "at_most"} <= set(error.instance)
        problem = "gives both at_least and at_most" if both else "gives neither at_least nor at_most"
        return f"{shown}: {problem}; give one: at_least for a metric to raise, at_most for one to lower"
    if error.validator == "pattern" and where.startswith("agent_overrides"):
        problem = f"{error.instance!r} is neither an override nor a flag"
        return f"{shown}: {problem}; write agent.KEY=VALUE, --flag or --flag=VALUE"
    if error.validator == "type":
        types = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        fix = _TYPE_FIXES.get(types[0], f"write a {types[0]}")
        number = _as_number(error.instance)
        if types[0] in ("number", "integer") and number is not None and number.is_integer():
            fix = f"YAML reads {error.instance} as text; write {number:.0f}"
        if types[0] == "object" and names == ["libraries"] and isinstance(error.instance, str):
            fix = f"write each library as a mapping, e.g. {{name: {error.instance}}}"
    else:
        value = error.validator_value
        value = ", ".join(map(str, value)) if isinstance(value, list) else value
        fix = _SCHEMA_FIXES.get(error.validator, "see workflow/schemas/config.schema.yaml").format(value)
    return f"{shown}: {error.message}; {fix}"


def library_schema(schema: dict) -> None:
    """Fill in the libraries' names and ML frameworks, which the schema file leaves to :data:`rlscale.rl.LIBRARIES`."""
    names = list(LIBRARIES)
    fill_schema_enum(schema, "properties.libraries.items.properties.name", names)
    fill_schema_enum(schema, "properties.libraries.items.properties.ml_framework", list(ml_frameworks()))
    fill_schema_enum(schema, "properties.agent_overrides.propertyNames", names)


def validate_schema(
    config: dict, schema_path: str | Path, source: Callable[[str], str] = lambda key: "the config"
) -> None:
    """Validate ``config`` against the JSON schema and fill in the schema's defaults in place, as Snakemake's
    ``snakemake.utils.validate(config, schema, set_default=True)`` does.

    Args:
        source: Where a dotted key (``iterations.train``) was written, for the refusal.

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
        raise StudyConfigError(f"config: {_schema_message(error, source)}")
