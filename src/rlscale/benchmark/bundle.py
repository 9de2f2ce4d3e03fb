"""The result bundle: its static sections, validation against ``bundle.schema.json``, the atomic write, and
``rlscale bundle validate``.

Only global rank 0 calls :func:`write_bundle`. Nothing here imports torch at module level.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import socket
import sys
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from rlscale.argparsing import OneLineParser
from rlscale.benchmark.resources import node_gpu_devices
from rlscale.benchmark.workflows import WORKFLOWS
from rlscale.launch.gpus import GIB
from rlscale.paths import write_atomic
from rlscale.rl import LIBRARIES, fill_schema_enum, ml_frameworks

SCHEMA_VERSION = "1.2"
"""1.1 adds the ``ranks`` section (training), 1.2 the startup and runtime benchmarks' ``ranks``; 1.0 and 1.1 bundles
still validate."""
PACKAGE_KEYS = {"rlscale": "rlscale", "torch": "torch"}
PACKAGE_KEYS |= {name: library.distribution for name, library in LIBRARIES.items()} | {"jax": "jax", "numpy": "numpy"}
"""Bundle key → distribution name."""
ENGINE_KEYS = {"mujoco": "mujoco", "mujoco_warp": "mujoco-warp", "warp": "warp-lang", "mujoco_mjx": "mujoco-mjx"}
"""The MuJoCo tasks' engines: optional keys, absent in bundles made before they were recorded."""


class InvalidBundle(ValueError):
    """A bundle that does not match the schema; the message names the first offending field."""


@cache
def schema() -> dict:
    """The bundle's JSON Schema (draft 2020-12), shipped inside the package, with ``run.workflow``'s names taken from
    :data:`~rlscale.benchmark.workflows.WORKFLOWS` (a new workflow's bundles validate without editing the schema),
    and the libraries' names, ML frameworks and versions from :data:`rlscale.rl.LIBRARIES`
    (:func:`~rlscale.rl.fill_schema_enum` checks where)."""
    loaded = json.loads(resources.files("rlscale.benchmark").joinpath("bundle.schema.json").read_text())
    loaded["properties"]["run"]["properties"]["workflow"]["enum"] = list(WORKFLOWS)
    names = list(LIBRARIES)
    fill_schema_enum(loaded, "properties.run.properties.framework", [*names, None])
    fill_schema_enum(loaded, "properties.run.properties.ml_framework", list(ml_frameworks()))
    fill_schema_enum(loaded, "properties.runtime.properties.peer.oneOf.1.properties.library", names)
    versions = loaded["properties"]["versions"]
    if set(names) & {*versions["required"], *versions["properties"]}:
        raise ValueError("bundle.schema.json lists a library's version itself; rlscale.rl.LIBRARIES is its one home")
    versions["required"] += names
    versions["properties"] |= dict.fromkeys(names, {"type": ["string", "null"]})
    return loaded


def validation_errors(bundle: Any) -> list[str]:
    """Every schema violation as ``path: message``, most specific first; empty for a valid bundle."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema(), format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(bundle), key=lambda error: (-len(error.absolute_path), error.message))
    return [f"{'.'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}" for error in errors]


def without_nan(value: Any) -> Any:
    """The same structure with NaN and infinities as None, since JSON has neither."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: without_nan(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [without_nan(item) for item in value]
    return value


def write_bundle(bundle: dict, path: Path) -> Path:
    """Validate, then write atomically (:func:`rlscale.paths.write_atomic`).

    Raises:
        InvalidBundle: if the bundle does not match the schema; nothing is written then.
    """
    bundle = without_nan(bundle)
    errors = validation_errors(bundle)
    if errors:
        raise InvalidBundle(f"benchmark bundle does not match its schema: {errors[0]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(bundle, indent=2, allow_nan=False) + "\n")
    return path


DEFAULT_OUTPUT_DIR = Path("results", "benchmarks")
"""Where a bundle goes without ``--output_path``."""


def default_output_path(workflow: str, task: str, library: str, world_size: int, num_envs: int, seed: int) -> Path:
    """``results/benchmarks/<workflow>_<task>_<library>_<world_size>x<num_envs per rank>_seed<seed>.json``."""
    return DEFAULT_OUTPUT_DIR / f"{workflow}_{task}_{library}_{world_size}x{num_envs}_seed{seed}.json"


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def iso(moment: datetime.datetime) -> str:
    return moment.isoformat(timespec="milliseconds")


def versions_section() -> dict:
    """Installed versions (package metadata, no imports), the CUDA torch was built with, and the git state."""
    import torch

    from rlscale.manifest import git_state, package_versions

    installed = package_versions()
    git = git_state()
    section = {key: installed.get(name) for key, name in (PACKAGE_KEYS | ENGINE_KEYS).items()}
    section["torch"] = section["torch"] or torch.__version__
    section |= {"cuda": torch.version.cuda, "python": platform.python_version()}
    return section | {"git_commit": git["sha"], "git_dirty": git["dirty"]}


def _cpu_name() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or None


def hardware_section(on_cuda: bool) -> dict:
    """Host, CPU, RAM and, on a CUDA run, every GPU of the node; a CPU run lists no GPU.

    The node's GPUs come from NVML, which ignores ``CUDA_VISIBLE_DEVICES``: a rank shown only its own GPU still
    lists them all, as ``gpu_measurement_scope: rank0_node`` says. Without NVML, the GPUs torch sees stand in.
    """
    import psutil
    import torch

    gpus = node_gpu_devices() if on_cuda else []
    if gpus is None:
        gpus = []
        for index in range(torch.cuda.device_count()):
            properties = torch.cuda.get_device_properties(index)
            gpus.append(
                {
                    "name": properties.name,
                    "mem_gb": properties.total_memory / GIB,
                    "compute_cap": f"{properties.major}.{properties.minor}",
                }
            )
    return {
        "hostname": socket.gethostname(),
        "gpu_devices": gpus,
        "cpu_name": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "ram_gb": psutil.virtual_memory().total / GIB,
    }


def extra_section(workload_scope: str, multigpu: bool, rank, num_envs_per_rank: int) -> dict:
    """How to read the figures: ``global`` ones (training) cover every rank; ``rank0`` ones are rank 0's own."""
    return {
        "distributed": multigpu,
        "world_size": rank.world_size,
        "local_world_size": rank.local_world_size,
        "num_nodes": rank.num_nodes,
        "num_envs_per_rank": num_envs_per_rank,
        "workload_scope": workload_scope,
        "measurement_scope": "rank0_process",
        "gpu_measurement_scope": "rank0_node",
    }


def main(argv: list[str]) -> int:
    """``rlscale bundle validate FILE...``: exit 0 if every file is a valid bundle, else one line per bad file, 1.

    A FILE that does not exist (or is a directory) is a usage error: one line and exit 2, before any file is read.
    """
    parser = OneLineParser(prog="rlscale bundle", description="Work with benchmark result bundles.")
    commands = parser.add_subparsers(dest="command", metavar="{validate}", required=True)
    validate = commands.add_parser("validate", help="check bundles against the schema")
    validate.add_argument("files", nargs="+", type=Path, metavar="FILE")
    args = parser.parse_args(argv)
    for path in args.files:
        if not path.is_file():
            state = "is a directory" if path.is_dir() else "no such file"
            validate.error(f"FILE {str(path)!r}: {state}; name bundle JSON files, e.g. results/benchmarks/*.json")
    invalid = 0
    for path in args.files:
        try:
            errors = validation_errors(json.loads(path.read_text()))
        except (OSError, ValueError) as error:  # unreadable, or not JSON at all
            errors = [f"<file>: {error}"]
        if errors:
            invalid += 1
            more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
            print(f"{path}: invalid: {errors[0]}{more}", file=sys.stderr)
    print(f"{len(args.files) - invalid} of {len(args.files)} bundle(s) valid")
    return 1 if invalid else 0
