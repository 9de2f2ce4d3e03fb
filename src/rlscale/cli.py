"""``rlscale`` command line: a thin dispatcher that imports each subcommand only when it runs.

Keeping torch and the RL libraries out of the dispatcher is what makes ``--help`` and ``train_multigpu --dry_run``
fast.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "train": ("rlscale.cli", "train", "train a policy on one device (or as one rank of a job)"),
    "train_multigpu": (
        "rlscale.launch.launcher",
        "main_train_multigpu",
        "train with one process per GPU (or CPU process) under torchrun",
    ),
    "nccl_probe": ("rlscale.launch.launcher", "main_nccl_probe", "all-reduce across the ranks, before a long job"),
    "doctor": (
        "rlscale.launch.doctor.main",
        "main",
        "the multi-GPU troubleshooting procedure in one command: what fails where, and the NCCL variable that fixes it",
    ),
    "benchmark": ("rlscale.cli", "benchmark", "startup, runtime or training benchmark; writes one result bundle"),
    "bundle": ("rlscale.benchmark.bundle", "main", "validate benchmark result bundles against their schema"),
    "list_tasks": ("rlscale.cli", "list_tasks", "list the registered task ids and the package of each"),
    "check_task": ("rlscale.cli", "check_task", "check a task against the VecTask contract (exit 1 if it breaks it)"),
    "evaluate": ("rlscale.run.evaluate", "main", "a trained velocity-tracking policy on fixed commands"),
    "play": ("rlscale.run.play", "main", "run a checkpoint's policy; with --video, film it as a GIF or MP4"),
    "profile_training": (
        "rlscale.run.profile_training",
        "main",
        "iterations of `rlscale train` under the torch profiler: where the time goes",
    ),
    "peer_table": ("rlscale.study.peer_table", "main", "rlscale ÷ peer per cell of bundles made with --peer"),
    "parity_so_far": ("rlscale.study.parity_so_far", "main", "parity tables and plots of a study's finished runs"),
}
ALIASES = {
    "train-multigpu": "train_multigpu",
    "list-tasks": "list_tasks",
    "nccl-probe": "nccl_probe",
    "check-task": "check_task",
    "profile-training": "profile_training",
    "peer-table": "peer_table",
    "parity-so-far": "parity_so_far",
}


def bind_single_process(argv: list[str]) -> None:
    """Put a process that no launcher started on its GPU's CPUs (a torchrun rank has its placement already); one whose
    ``--device`` names no device is left as it is, for the run to refuse."""
    from rlscale.device import Device
    from rlscale.launch.command import forwarded_value
    from rlscale.launch.placement import bind_this_process

    given = forwarded_value(argv, "--device")
    try:
        device = None if given is None else Device.parse(given)
    except ValueError:
        return
    bind_this_process(device)


def train(argv: list[str]) -> int:
    bind_single_process(argv)
    from rlscale.run.train import main as run_training

    return run_training(argv)


def benchmark(argv: list[str]) -> int:
    """``rlscale benchmark``; ``compare`` binds nothing: its runs are processes of their own, and ``predict`` runs
    nothing."""
    if argv[:1] == ["compare"]:
        from rlscale.benchmark.compare.cli import main as compare

        return compare(argv[1:])
    if argv[:1] == ["predict"]:
        from rlscale.benchmark.predict import main as predict

        return predict(argv[1:])
    from rlscale.benchmark.cli import main as run_workflow

    if argv and not argv[0].replace("-", "_").endswith("_multigpu"):
        bind_single_process(argv[1:])
    return run_workflow(argv)


def list_tasks(argv: list[str]) -> int:
    from rlscale.tasks import TaskPluginError, get_spec
    from rlscale.tasks import list_tasks as registered

    try:
        task_ids = registered()
    except TaskPluginError as error:
        print(f"rlscale list_tasks: error: {error}", file=sys.stderr)
        return 2  # as every other command refuses a broken plug-in
    width = max(map(len, task_ids))
    for task_id in task_ids:
        print(f"{task_id:<{width}}  {get_spec(task_id).source}")
    return 0


def check_task(argv: list[str]) -> int:
    from rlscale.argparsing import OneLineParser

    parser = OneLineParser(
        prog="rlscale check_task",
        description="Check a task against the VecTask contract: exit 0 if it keeps it, 1 with one line per violation.",
    )
    parser.add_argument("task", help="task id (`rlscale list_tasks`) or package.module:Task-Id")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--num_envs", type=int, default=64, help="environments stepped together (default 64)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the checked builds (and seed + 1; default 0)")
    args = parser.parse_args(argv)
    if args.num_envs < 1:
        parser.error(f"--num_envs must be at least 1 (got {args.num_envs})")
    from rlscale.tasks import UnknownTaskError, get_spec

    try:
        spec = get_spec(args.task)
        if spec.check_available is not None:
            spec.check_available()
    except (UnknownTaskError, ImportError) as error:
        parser.error(str(error))
    from rlscale.device import Device

    try:
        device = Device.parse(args.device)
    except ValueError as error:
        parser.error(f"--device {error}")
    import torch

    if device.is_cuda and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: no CUDA device is available")
    from rlscale.tasks.conformance import check_task as check

    report = check(args.task, args.device, args.num_envs, args.seed)
    print("\n".join(report.lines()), flush=True)
    return 0 if report.conforms else 1


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
