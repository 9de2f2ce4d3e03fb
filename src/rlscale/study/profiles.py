"""What a ``snakemake`` command line and its profiles set besides the config files: the ``config:`` of each profile
as a layer of its own, and the resource values, checked before any job.

Snakemake reads a profile's ``config:`` list as the default of ``--config``, so a ``--config`` on the command line
replaces the whole list: ``--profile config/profiles/slurm --config study=foo`` would drop the profile's
``device=cuda cluster=slurm``. rlscale layers them instead, key by key: each profile's ``config:`` in the order
Snakemake applies the profiles, then the command line's ``--config`` (config/README.md).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rlscale.study.snakemake_internals import parse_arguments, parse_config_entries, reads_as_size_or_time


@dataclass(frozen=True)
class ConfigLayer:
    """``--config`` values of one source: a profile's ``config:`` or the command line."""

    source: str
    """The profile's YAML file, or ``--config``."""
    values: dict = field(default_factory=dict)
    """Each key's value, as Snakemake parses ``key=value``."""
    entries: dict[str, str] = field(default_factory=dict)
    """Each key's ``key=value`` as written."""


@dataclass(frozen=True)
class CommandLine:
    """The ``config:`` layers and resource settings of a ``snakemake`` command line and its profiles."""

    layers: list[ConfigLayer]
    """The profiles' ``config:``, in the order Snakemake applies them, then the command line's ``--config``."""
    resources: list[tuple[str, str, str]]
    """``(source, option, entry)`` of every resource setting: ``set-resources`` ``train:gpu=2``, ..."""


RESOURCE_OPTIONS = ("set-resources", "default-resources", "resources")


def shown_path(path: Path) -> str:
    """A path as the user would type it: from the working directory when it is below it (so that the plan, a param of
    the aggregate rule, stays the same when the checkout moves)."""
    path = Path(path)
    return os.path.relpath(path) if path.resolve().is_relative_to(Path.cwd()) else str(path)


def _entries(value) -> list[str]:
    """A profile's list setting as ``key=value`` strings (Snakemake accepts a list or a mapping; ``set-resources`` as
    a mapping is ``rule: {resource: value}``)."""
    if not isinstance(value, Mapping):
        return [str(entry) for entry in value or []]
    entries = []
    for key, inner in value.items():
        if isinstance(inner, Mapping):
            entries += [f"{key}:{name}={entry}" for name, entry in inner.items()]
        else:
            entries.append(f"{key}={inner}")
    return entries


def _layer(source: str, entries: Sequence[str]) -> ConfigLayer:
    values = parse_config_entries(entries)
    return ConfigLayer(source, values, {entry.split("=", 1)[0]: entry for entry in entries})


def read_command_line(argv: Sequence[str], workflow_dir: Path) -> CommandLine:
    """The layers and resource settings of ``argv`` (``sys.argv``; ``workflow_dir``: the main Snakefile's folder,
    where Snakemake looks for the workflow profile); none when it is not a ``snakemake`` command line (a job Snakemake
    spawned carries its ``--config`` and no profile)."""
    program = Path(argv[0]) if argv else Path()
    if "snakemake" not in (program.name, program.parent.name):
        return CommandLine([], [])
    arguments = parse_arguments(argv[1:], workflow_dir)  # the command line alone, without profiles
    layers, resources = [], []
    for path in arguments.profile_files:
        settings = yaml.safe_load(Path(path).read_text()) or {}
        if "config" in settings:
            layers.append(_layer(shown_path(path), _entries(settings["config"])))
        for option in RESOURCE_OPTIONS:
            resources += [(shown_path(path), option, entry) for entry in _entries(settings.get(option))]
    layers.append(_layer("--config", arguments.config))
    resources += [(f"--{option}", option, entry) for option, entry in arguments.resources]
    return CommandLine(layers, resources)


def profile_config_dropped(layers: Sequence[ConfigLayer], given: Mapping) -> dict[str, ConfigLayer]:
    """The profile keys Snakemake dropped: each key of a profile's ``config:`` missing from ``given`` (Snakemake's
    ``--config`` values), mapped to the last profile that sets it."""
    dropped = {}
    for layer in layers[:-1]:
        dropped.update({key: layer for key in layer.values if key not in given})
    return dropped


def profile_resources_dropped(resources: Sequence[tuple[str, str, str]]) -> list[str]:
    """The profiles' per-job resource entries that the command line's own ``--set-resources`` or
    ``--default-resources`` replaced, as written: Snakemake reads a profile's list as that option's default, so the
    command line's list replaces all of it (the SLURM profile's warning signal and cores per GPU with it), not only the
    entries it names. (``--resources``, the global limits, is not read from the command line: replacing is meant.)"""
    command_line = [(option, entry) for source, option, entry in resources if source.startswith("--")]
    given = {option for option, _ in command_line}
    named = {entry.partition("=")[0] for _, entry in command_line}
    return [
        entry
        for source, option, entry in resources
        if not source.startswith("--") and option in given and entry.partition("=")[0] not in named
    ]


NUMERIC_RESOURCES = {
    "gpu": "8",
    "nodes": "2",
    "tasks": "2",
    "cpus_per_task": "8",
    "cpus_per_gpu": "8",
    "tasks_per_gpu": "1",
    "mem_mb": "64000",
    "mem_mib": "61035",
    "disk_mb": "100000",
    "disk_mib": "95367",
    "mem": "64G",
    "disk": "100G",
    "runtime": "120",
}
"""Resources that take a number (``mem``, ``disk`` and ``runtime`` also a size or a time such as 64G or 2h), each
with an example value."""
EXPRESSION_NAMES = {"threads", "attempt", "input", "wildcards", "min", "max", "round", "int", "len", "math"}
"""Names a resource expression may use (Snakemake evaluates it per job)."""


def _is_number(name: str, raw: str) -> bool:
    """Whether ``raw`` is a number of ``name``, a size or time Snakemake parses for it, or an expression it
    evaluates per job."""
    text = raw.strip()
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        tree = None
    if isinstance(tree, ast.Constant):
        return isinstance(tree.value, int | float) and not isinstance(tree.value, bool) and tree.value >= 0
    if tree is not None and not {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} - EXPRESSION_NAMES:
        return True
    return reads_as_size_or_time(name, text)


def check_resources(resources: Sequence[tuple[str, str, str]]) -> None:
    """Refuse a resource value that is not a number where one is needed: Snakemake passes ``cpus_per_gpu=eight`` on
    to sbatch, which refuses it only when the job is submitted, and ``mem_mb=lots`` stops the dry run with a traceback.

    Raises:
        ValueError: one line naming the source, the entry and the fix.
    """
    for source, option, entry in resources:
        target, _, raw = entry.partition("=")
        rule, _, name = target.rpartition(":")
        if name in NUMERIC_RESOURCES and not _is_number(name, raw):
            example = f"{rule + ':' if rule else ''}{name}={NUMERIC_RESOURCES[name]}"
            unit = {"mem_mb": " of MB (or mem=64G)", "runtime": " of minutes (or a time such as 2h)"}.get(name, "")
            where = source if source.startswith("--") else f"{source} {option}:"
            raise ValueError(f"{where} {entry}: {name} takes a number{unit}; write e.g. {example}")
