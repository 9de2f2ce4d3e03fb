"""Which files make the study config: ``config/config.yaml``, or the user's own files instead of it; and where each
value was written.

Snakemake would merge every ``--configfile`` into the Snakefile's ``configfile`` key by key, so a copied and shrunk
config would silently keep whatever it left out (the GPU study's parity budgets, its per-task env counts). The
Snakefile loads ``config/config.yaml`` only when no ``--configfile`` is given: the files given replace it. To overlay
a few keys on it, name it first, as the docs do: ``--configfile config/config.yaml overlay.yaml``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from rlscale.study.checks import DEFAULT_BASE
from rlscale.study.profiles import ConfigLayer, shown_path
from rlscale.study.snakemake_internals import load_config_file

SCHEMA_BASE = "the schema's defaults"
"""Where a value nobody wrote comes from when a file of the user's replaces ``config/config.yaml``."""


def study_config(loaded: Mapping, configfiles: Sequence[Path], default: Path) -> tuple[dict, str | None, str]:
    """The config the study runs, one line saying where it comes from when that is not the default file, and where
    the values nobody wrote come from (``config/config.yaml``, or :data:`SCHEMA_BASE` when the user's files replace
    it).

    Args:
        loaded: The config as Snakemake loaded it: ``default`` (only without ``configfiles``) or the ``configfiles``
            merged in order, then ``--config`` values.
        configfiles: The ``--configfile`` files, in order.
        default: ``config/config.yaml``.
    """
    config = copy.deepcopy(dict(loaded))
    if not configfiles:
        return config, None, DEFAULT_BASE
    names = " ".join(str(path) for path in configfiles)
    if default.resolve() in [Path(path).resolve() for path in configfiles]:
        return config, f"study config: {names} (overlaid in this order)", DEFAULT_BASE
    note = (
        f"study config: {names} replaces {default.name} (keys left out take the schema's defaults); to overlay it "
        f"instead, name it first: --configfile config/config.yaml {names}"
    )
    return config, note, SCHEMA_BASE


def _leaf_keys(values: Mapping, prefix: str = "") -> list[str]:
    """Dotted keys of every value that is not itself a non-empty mapping: ``iterations.train``, ``world_sizes``."""
    keys = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        keys += _leaf_keys(value, f"{path}.") if isinstance(value, Mapping) and value else [path]
    return keys


def explicit_keys(configfiles: Sequence[Path], layers: Sequence[ConfigLayer], default: Path) -> dict[str, str]:
    """What the user wrote, and where: each dotted key of the ``--configfile`` files (but ``config/config.yaml``, the
    project's defaults), then of each profile's ``config:`` and of the ``--config`` values (``layers``), mapped to the
    last place that set it."""
    written: dict[str, str] = {}
    for path in configfiles:
        if Path(path).resolve() != default.resolve():
            written.update(dict.fromkeys(_leaf_keys(load_config_file(path)), shown_path(path)))
    for layer in layers:
        written.update(dict.fromkeys(_leaf_keys(layer.values), layer.source))
    return written


def _typed(value):
    """``value`` with each string inside a list or mapping read as YAML reads it in a file."""
    if isinstance(value, Mapping):
        return {key: _typed(entry) for key, entry in value.items()}
    if isinstance(value, list):
        return [_typed(entry) for entry in value]
    return yaml.safe_load(value) if isinstance(value, str) else value


def check_command_line(layers: Sequence[ConfigLayer]) -> None:
    """Refuse a ``--config`` (or profile ``config:``) list or mapping that holds numbers or booleans: Snakemake reads
    ``key=[1,2]`` as the strings '1' and '2', and ``key={a: 5}`` as {'a': '5'} (a list of task ids stays a list of
    strings, as meant).

    Raises:
        ValueError: naming the key, where it was written and the overlay file that takes the value.
    """
    for layer in layers:
        for key, value in layer.values.items():
            if isinstance(value, list | Mapping) and _typed(value) != value:
                shown = yaml.safe_dump(_typed(value), default_flow_style=True, width=1000).strip()
                where = "--config" if layer.source == "--config" else f"{layer.source} config:"
                raise ValueError(
                    f"{where} {key}={shown}: Snakemake's --config reads the values in a list or mapping as strings; "
                    f"write `{key}: {shown}` in an overlay file and pass --configfile config/config.yaml overlay.yaml"
                )
