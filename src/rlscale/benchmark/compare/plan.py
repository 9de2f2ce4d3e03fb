"""``rlscale benchmark compare``'s plan: the variants (each the rest of an ``rlscale benchmark`` line), the order
their runs take, and where each run's files go. Pure Python, no torch.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rlscale.benchmark.stats import CONFIDENCE, values_needed
from rlscale.benchmark.workflows import WORKFLOWS
from rlscale.paths import write_atomic

PLAN_FILE = "plan.json"
RECOMMENDED_REPEATS = values_needed(CONFIDENCE)
"""6: the fewest pairs with a 95 % interval for their median ratio (their range, 96.9 %). Fewer draw a warning and
no verdict."""
RESERVED_OPTIONS = ("--seed", "--seeds", "--output_path")
"""Set by the tool for every run; a variant or the common arguments may not set them."""
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*\Z")
ENVIRONMENT_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.DOTALL)


@dataclass(frozen=True)
class Variant:
    """One compared configuration: the rest of an ``rlscale benchmark`` command line, and its environment."""

    name: str
    workflow: str
    """As given (``training``, ``training_multigpu``...)."""
    args: tuple[str, ...]
    """The workflow's options and overrides that only this variant has."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables set for this variant's runs (``NCCL_PROTO=LL``...)."""

    def command(self, common: Sequence[str], seed: int, bundle: Path) -> list[str]:
        """The argv of one run of this variant; its own arguments come last, so that they override common ones."""
        return [
            *(sys.executable, "-m", "rlscale", "benchmark", self.workflow, *common, *self.args),
            *("--seed", str(seed), "--output_path", str(bundle)),
        ]


def parse_variant(text: str) -> Variant:
    """Parse ``NAME=[KEY=VALUE ...] WORKFLOW [ARGS...]`` (shell quoting); raise ValueError with one line if bad."""
    name, equals, rest = text.partition("=")
    if not equals or not NAME.match(name):
        raise ValueError(f"--variant {text!r}: expected NAME=WORKFLOW [ARGS...], NAME a letter then [A-Za-z0-9_.-]")
    tokens = shlex.split(rest)
    env = {}
    while tokens and (assignment := ENVIRONMENT_ASSIGNMENT.match(tokens[0])):
        env[assignment[1]] = assignment[2]
        tokens.pop(0)
    if not tokens:
        raise ValueError(f"--variant {name}: no workflow after the environment (e.g. {name}=training)")
    workflow = tokens[0]
    if workflow.replace("-multigpu", "_multigpu").removesuffix("_multigpu") not in WORKFLOWS:
        choices = ", ".join(f"{base}[_multigpu]" for base in WORKFLOWS)
        raise ValueError(f"--variant {name}: unknown workflow {workflow!r}; choose one of {choices}")
    return Variant(name, workflow, tuple(tokens[1:]), env)


def reserved_in(args: Sequence[str]) -> str | None:
    """The first option of :data:`RESERVED_OPTIONS` that ``args`` sets, if any."""
    for arg in args:
        option = arg.partition("=")[0]
        if option in RESERVED_OPTIONS:
            return option
    return None


def run_order(names: Sequence[str], repeat: int) -> list[str]:
    """The variants' order in ``repeat``: rotated by one per repeat (A B C, B C A, C A B, ...)."""
    shift = repeat % len(names)
    return [*names[shift:], *names[:shift]]


def planned_runs(names: Sequence[str], repeats: int, base_seed: int) -> list[dict]:
    """Every run of the comparison in the order it runs: variant, repeat, position within the repeat, seed."""
    return [
        {"variant": name, "repeat": repeat, "position": position, "seed": base_seed + repeat}
        for repeat in range(repeats)
        for position, name in enumerate(run_order(names, repeat))
    ]


def run_key(variant: str, repeat: int) -> str:
    return f"{variant}/repeat{repeat}"


def write_json(path: Path, data: dict) -> None:
    """Write as indented JSON, whole or not at all (:func:`rlscale.paths.write_atomic`)."""
    write_atomic(path, json.dumps(data, indent=2) + "\n")


def bundle_path(directory: Path, variant: str, repeat: int) -> Path:
    return directory / variant / f"repeat{repeat}.json"


def log_path(directory: Path, variant: str, repeat: int) -> Path:
    return directory / variant / f"repeat{repeat}.log"
