"""environment.yml, pyproject.toml and the Makefile install the same thing, so that a conda install runs the default
study (Rlscale-Ant needs the jax and mjx extras) as `make setup` does."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
MAKEFILE = (ROOT / "Makefile").read_text()
CONDA = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
CONDA_PIP = next(entry["pip"] for entry in CONDA if isinstance(entry, dict))
EDITABLE = re.compile(r'-e\s+"?\.(?:\[([^\]]*)\])?"?')
CONDA_EDITABLE = next(line for line in CONDA_PIP if EDITABLE.match(line))


def editable_extras(text: str) -> set[str]:
    """Extras of the editable install of this repository in ``text`` (``-e .[a,b]`` or ``-e ".[a,b]"``)."""
    match = EDITABLE.search(text)
    assert match, f"no editable install of the repository in {text!r}"
    return {extra.strip() for extra in (match.group(1) or "").split(",") if extra.strip()}


def pin(requirement: Requirement) -> tuple[str, frozenset[str], SpecifierSet]:
    """What a requirement installs: normalised name, extras and version specifier."""
    return canonicalize_name(requirement.name), frozenset(requirement.extras), requirement.specifier


def pyproject_requirements(extras: set[str]) -> dict[str, list[Requirement]]:
    """pyproject's dependencies plus those of ``extras``, by normalised name."""
    lines = [
        *PYPROJECT["dependencies"],
        *(line for extra in extras for line in PYPROJECT["optional-dependencies"][extra]),
    ]
    by_name: dict[str, list[Requirement]] = {}
    for line in lines:
        requirement = Requirement(line)
        by_name.setdefault(canonicalize_name(requirement.name), []).append(requirement)
    return by_name


def conda_requirements() -> list[Requirement]:
    """environment.yml's pip requirements other than the repository itself."""
    return [Requirement(line) for line in CONDA_PIP if line != CONDA_EDITABLE]


def test_conda_installs_the_makefile_extras():
    """environment.yml installs the repository with the extras `make setup` installs (its study install's and the
    test install's), each defined in pyproject."""
    conda = editable_extras(CONDA_EDITABLE)
    makefile = set().union(*map(editable_extras, re.findall(r'pip install .*-e "?\..*', MAKEFILE)))
    assert conda == makefile
    assert conda <= set(PYPROJECT["optional-dependencies"])


def test_conda_pins_are_pyproject_pins():
    """Every package environment.yml names (torch, the RL libraries) has pyproject's spec for it, extras included."""
    installed = pyproject_requirements(editable_extras(CONDA_EDITABLE))
    for requirement in conda_requirements():
        candidates = installed.get(canonicalize_name(requirement.name), [])
        assert pin(requirement) in [pin(candidate) for candidate in candidates], (
            f"environment.yml {requirement} differs from pyproject.toml {', '.join(map(str, candidates)) or 'none'}"
        )


def test_makefile_torch_within_pyproject_spec():
    """The torch `make setup` installs first satisfies pyproject's torch spec."""
    makefile = Requirement(re.search(r"^TORCH_SPEC \?= (\S+)$", MAKEFILE, re.MULTILINE).group(1))
    pyproject = next(Requirement(line) for line in PYPROJECT["dependencies"] if Requirement(line).name == "torch")
    (version,) = [spec.version for spec in makefile.specifier if spec.operator == "=="]
    assert Version(version) in pyproject.specifier


def test_conda_python_within_requires_python():
    """The conda Python is one pyproject's requires-python accepts."""
    (python,) = [entry for entry in CONDA if isinstance(entry, str) and re.match(r"python\b", entry)]
    version = re.fullmatch(r"python\s*=\s*([\d.]+)", python).group(1)
    assert Version(version) in SpecifierSet(PYPROJECT["requires-python"])
