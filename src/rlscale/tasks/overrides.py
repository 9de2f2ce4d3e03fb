"""``FIELD=VALUE`` overrides of a task's config dataclass, as Isaac Lab's ``env.FIELD=VALUE`` Hydra arguments give them.

Torch-free: only the dataclass and its type hints are read, so a bad key or value is refused before a task exists.
A field's range is declared once, where the field is first declared, as ``annotated_types`` constraints in its
annotation (``sim_dt: Annotated[float, Gt(0)]``); a subclass that only changes the default keeps its base's range.
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

import annotated_types
import yaml

from rlscale.argparsing import closest

NULL_TEXTS = ("null", "None")
"""Spellings of None for an optional field."""
_COMPARISONS = (
    ("gt", ">", operator.gt),
    ("ge", ">=", operator.ge),
    ("lt", "<", operator.lt),
    ("le", "<=", operator.le),
)
"""The ``annotated_types`` bounds a field's value is checked against, by attribute."""


def parse_value(text: str) -> Any:
    """A command-line value: an int, else a float, else YAML (which reads ``5e-4`` as a string, hence the order)."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return yaml.safe_load(text)


def field_value(cfg_class: type, key: str, text: str) -> Any:
    """``text`` converted to the type of the field ``key`` of ``cfg_class``; a dotted key names a field of a nested
    config (``physics.pole_mass``).

    Raises:
        ValueError: for a field the config does not have, a nested config given one value, or a value that is not of
            the field's type (an int for a float field is fine; a tuple is written as a list, ``[-1.0, 1.0]``).
    """
    *sections, name = key.split(".")
    owner = cfg_class
    for depth, section in enumerate(sections):
        kind = _field_type(owner, section)
        if not dataclasses.is_dataclass(kind):
            raise ValueError(f"{'.'.join(sections[: depth + 1])!r} is a {_type_name(kind)}, not a nested config")
        owner = kind
    kind = _field_type(owner, name)
    if dataclasses.is_dataclass(kind):
        example = dataclasses.fields(kind)[0].name
        raise ValueError(f"{key!r} is a nested config; set its fields one by one, e.g. {key}.{example}=VALUE")
    value = _convert(kind, text)
    broken = bound_violation(value, field_bounds(owner, name))
    if broken:
        raise ValueError(f"{key} {broken}, got {text}")
    return value


def field_bounds(owner: type, name: str) -> list[Any]:
    """The ``annotated_types`` constraints declared on field ``name`` by ``owner`` or any dataclass it derives from."""
    bounds: list[Any] = []
    for klass in owner.__mro__:
        if name in vars(klass).get("__annotations__", {}):
            hint = typing.get_type_hints(klass, include_extras=True)[name]
            optional = typing.get_origin(hint) in (typing.Union, types.UnionType)
            for member in typing.get_args(hint) if optional else (hint,):  # Annotated[int, Ge(1)] | None
                bounds += getattr(member, "__metadata__", ())
    return bounds


def bound_violation(value: Any, bounds: Iterable[Any]) -> str | None:
    """What ``value`` breaks of ``bounds`` (``annotated_types`` ``Gt``/``Ge``/``Lt``/``Le``/``Interval``), as
    ``must be > 0``; None when it keeps them, or is not a number (None, text: its type is checked elsewhere)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    for group in bounds:
        for bound in group if isinstance(group, annotated_types.GroupedMetadata) else [group]:
            for attribute, symbol, holds in _COMPARISONS:
                limit = getattr(bound, attribute, None)
                if limit is not None and not holds(value, limit):
                    return f"must be {symbol} {limit}"
    return None


def with_overrides(cfg: Any, overrides: Mapping[str, Any]) -> Any:
    """A copy of the dataclass instance ``cfg`` with ``overrides`` applied; a dotted key sets a nested config's field.

    Raises:
        TypeError: for a key that is not a field, as the dataclass's constructor does.
    """
    direct: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        section, dot, rest = key.partition(".")
        if dot:
            nested.setdefault(section, {})[rest] = value
        else:
            direct[key] = value
    for section, fields in nested.items():
        direct[section] = with_overrides(getattr(cfg, section), fields)
    return dataclasses.replace(cfg, **direct)


def _field_type(owner: type, name: str) -> Any:
    hints = typing.get_type_hints(owner)
    fields = {field.name: hints[field.name] for field in dataclasses.fields(owner) if field.init}
    if name not in fields:
        close = closest(name, fields)
        hint = f"did you mean {close!r}? " if close else ""
        raise ValueError(f"{owner.__name__} has no field {name!r}; {hint}fields: {', '.join(fields)}")
    return fields[name]


def _convert(kind: Any, text: str) -> Any:
    if kind is str:
        return text  # as written: YAML would turn "yes" into True and "1e3" into a float
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        members = typing.get_args(kind)
        if type(None) in members and text in NULL_TEXTS:
            return None
        for member in members:
            try:
                return _convert(member, text)
            except ValueError:
                pass
        raise ValueError(f"expected {_type_name(kind)}, got {text!r}")
    if kind not in (bool, int, float) and typing.get_origin(kind) is not tuple:
        raise ValueError(f"a {_type_name(kind)} field cannot be set from the command line")
    value = parse_value(text)
    if not _conforms(kind, value):
        raise ValueError(f"expected {_type_name(kind)}, got {text!r}")
    return _coerce(kind, value)


def _conforms(kind: Any, value: Any) -> bool:
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float)
    if kind in (int, str):
        return isinstance(value, kind)
    if typing.get_origin(kind) is tuple and isinstance(value, list):
        members = _tuple_members(kind, len(value))
        return len(members) == len(value) and all(map(_conforms, members, value))
    return False


def _coerce(kind: Any, value: Any) -> Any:
    if kind is float:
        return float(value)
    if typing.get_origin(kind) is tuple:
        return tuple(map(_coerce, _tuple_members(kind, len(value)), value))
    return value


def _tuple_members(kind: Any, length: int) -> tuple:
    members = typing.get_args(kind)
    return members[:1] * length if members[-1:] == (...,) else members


def _type_name(kind: Any) -> str:
    return str(kind) if typing.get_origin(kind) else getattr(kind, "__name__", str(kind))
