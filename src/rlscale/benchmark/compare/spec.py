"""A committed comparison: ``rlscale benchmark compare --spec FILE``'s YAML file, which holds the variants, the
common arguments, the repeats and the base seed of a comparison, so that its result is one command away.

The file is a thin layer over the command line: :meth:`CompareSpec.argv` turns it into the ``--variant``,
``--repeats``, ``--base_seed`` and ``-- COMMON`` arguments the command checks as if typed. Pure Python, no torch.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

KEYS = ("repeats", "base_seed", "variants", "common")
"""Every key of a spec; ``variants`` and ``common`` are required."""


@dataclass(frozen=True)
class CompareSpec:
    """The comparison a spec file names: each variant as ``--variant NAME=...`` takes it, the first the baseline."""

    variants: dict[str, str]
    """Name to the rest of an ``rlscale benchmark`` line (``training agent.check_for_nan=false``), in file order."""
    common: tuple[str, ...]
    """The arguments every variant shares (``--task ... --device cuda``)."""
    repeats: int | None = None
    base_seed: int | None = None

    def argv(self) -> list[str]:
        """The command line this spec stands for, before the ``--`` and the common arguments after it."""
        own = [f"--variant={name}={line}" for name, line in self.variants.items()]
        own += [f"--{key}={value}" for key in ("repeats", "base_seed") if (value := getattr(self, key)) is not None]
        return [*own, "--", *self.common]


def load_spec(path: Path) -> CompareSpec:
    """Read a spec file; raise ValueError with one line naming the file and the problem if it is not one."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ValueError(f"--spec {path}: cannot read it ({type(error).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError(f"--spec {path}: expected a mapping with keys {', '.join(KEYS)}")
    if unknown := sorted(set(data) - set(KEYS)):
        raise ValueError(f"--spec {path}: unknown key(s) {', '.join(unknown)}; the keys are {', '.join(KEYS)}")
    variants, common = data.get("variants"), data.get("common")
    if not isinstance(variants, dict) or not all(isinstance(line, str) for line in variants.values()):
        raise ValueError(f"--spec {path}: variants must map each name to a benchmark line (e.g. eager: training)")
    if not isinstance(common, str):
        raise ValueError(f"--spec {path}: common must be the arguments every variant shares, as one line")
    for key in ("repeats", "base_seed"):
        if key in data and (not isinstance(data[key], int) or isinstance(data[key], bool)):
            raise ValueError(f"--spec {path}: {key} must be a whole number (got {data[key]!r})")
    return CompareSpec(
        {str(name): line for name, line in variants.items()},
        tuple(shlex.split(common)),
        data.get("repeats"),
        data.get("base_seed"),
    )
