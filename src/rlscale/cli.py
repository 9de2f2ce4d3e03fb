"""``rlscale`` command line: a thin dispatcher that imports each subcommand only when it runs.

Keeping torch and the RL libraries out of the dispatcher is what makes ``--help`` and ``train_multigpu --dry_run``
fast.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "train": ("rlscale.train", "main", "train a policy on one device (or as one rank of a job)"),
    "train_multigpu": (
        "rlscale.launch.run",
        "main_train_multigpu",
        "train with one process per GPU (or CPU process) under torchrun",
    ),
    "nccl_probe": ("rlscale.launch.run", "main_nccl_probe", "all-reduce across the ranks, before a long job"),
    "benchmark": ("rlscale.benchmark.cli", "main", "startup, runtime or training benchmark; writes one result bundle"),
    "bundle": ("rlscale.benchmark.bundle", "main", "validate benchmark result bundles against their schema"),
    "list_tasks": ("rlscale.cli", "list_tasks", "list the registered task ids"),
}
ALIASES = {"train-multigpu": "train_multigpu", "list-tasks": "list_tasks", "nccl-probe": "nccl_probe"}


def list_tasks(argv: list[str]) -> int:
    from rlscale.tasks import list_tasks as registered

    for task_id in registered():
        print(task_id)
    return 0


def usage() -> str:
    lines = ["usage: rlscale COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<16} {description}" for name, (_, _, description) in COMMANDS.items()]
    lines += ["", "Run `rlscale COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name = ALIASES.get(argv[0], argv[0])
    if name not in COMMANDS:
        print(f"rlscale: unknown command {argv[0]!r}; commands: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module, function, _ = COMMANDS[name]
    return getattr(importlib.import_module(module), function)(argv[1:])
