"""Which files make the study config: ``config/config.yaml``, or the user's own files instead of it.

Snakemake loads the Snakefile's ``configfile`` and merges every ``--configfile`` into it key by key, so a copied and
shrunk config silently keeps whatever it left out (the GPU study's parity budgets, its per-task env counts). rlscale
reads ``--configfile`` files as a whole config instead: they replace ``config/config.yaml``. To overlay a few keys on
it, name it first, as the docs do: ``--configfile config/config.yaml overlay.yaml``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml


def study_config(
    loaded: Mapping, configfiles: Sequence[Path], command_line: Mapping, default: Path
) -> tuple[dict, str | None]:
    """The config the study runs, and one line saying where it comes from when that is not the default file.

    Args:
        loaded: The config as Snakemake merged it: ``default``, then ``configfiles``, then ``--config`` values.
        configfiles: The ``--configfile`` files, in order.
        command_line: The ``--configfile`` files merged in order, then ``--config`` values (Snakemake's
            ``config_settings.overwrite_config``): what the user gave.
        default: ``config/config.yaml``.
    """
    given = [Path(path).resolve() for path in configfiles]
    if not given:
        return copy.deepcopy(dict(loaded)), None
    names = " ".join(str(path) for path in configfiles)
    if default.resolve() in given:
        return copy.deepcopy(dict(loaded)), f"study config: {names} (overlaid in this order)"
    return copy.deepcopy(dict(command_line)), (
        f"study config: {names} replaces {default.name} (keys left out take the schema's defaults); to overlay it "
        f"instead, name it first: --configfile config/config.yaml {names}"
    )


def _leaf_keys(values: Mapping, prefix: str = "") -> list[str]:
    """Dotted keys of every value that is not itself a non-empty mapping: ``iterations.train``, ``world_sizes``."""
    keys = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        keys += _leaf_keys(value, f"{path}.") if isinstance(value, Mapping) and value else [path]
    return keys


def explicit_keys(configfiles: Sequence[Path], command_line: Mapping, default: Path) -> dict[str, str]:
    """What the user wrote, and where: each dotted key of the ``--configfile`` files (but ``config/config.yaml``, the
    project's defaults) and of the ``--config`` values, mapped to the last place that set it."""
    from snakemake.common.configfile import load_configfile

    written: dict[str, str] = {}
    for path in configfiles:
        if Path(path).resolve() != default.resolve():
            # Named as from the working directory, so that the plan (a param of the aggregate rule) stays the same
            # when the checkout moves.
            shown = os.path.relpath(path) if Path(path).resolve().is_relative_to(Path.cwd()) else str(path)
            written.update(dict.fromkeys(_leaf_keys(load_configfile(str(path)) or {}), shown))
    written.update(dict.fromkeys(_leaf_keys(command_line), "--config"))
    return written


def check_command_line(command_line: Mapping) -> None:
    """Refuse a ``--config`` list of numbers or booleans: Snakemake reads ``key=[1,2]`` as the strings '1' and '2'
    (a list of task ids stays a list of strings, as meant).

    Raises:
        ValueError: naming the key and the overlay file that takes the list.
    """
    for key, value in command_line.items():
        if isinstance(value, list) and any(isinstance(yaml.safe_load(str(item)), int | float | bool) for item in value):
            items = ", ".join(str(item) for item in value)
            raise ValueError(
                f"--config {key}=[{items}]: Snakemake's --config reads a list as strings; write `{key}: [{items}]` in "
                f"an overlay file and pass --configfile config/config.yaml overlay.yaml"
            )
