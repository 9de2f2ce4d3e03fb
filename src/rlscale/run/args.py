"""``rlscale train``'s options: the parser and every check that needs neither torch nor the task's config.

Torch-free, so that ``--help``, a launcher's ``--dry_run`` and the benchmark dispatcher that builds on this parser
stay light.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rlscale.argparsing import OneLineParser
from rlscale.dist import collective_timeout, rank_info
from rlscale.paths import unwritable_reason
from rlscale.resume import AUTO, ELASTIC_OPTION
from rlscale.rl import LIBRARIES, ml_frameworks
from rlscale.rl.rank_scaling import LR_SCALINGS
from rlscale.rl.tracking import DEFAULT_PROJECT, LOGGERS, PROJECT_FORBIDDEN, missing_client

OPTION_OF_ENV_FIELD = {
    "num_envs": "num_envs",
    "scene.num_envs": "num_envs",
    "seed": "seed",
    "device": "device",
    "sim.device": "device",
}
"""Task config fields (with Isaac Lab's spellings) that ``rlscale train`` sets per rank from its own options."""

TRACKER_OPTIONS = ("--logger", "--log_project_name", "--log_group", "--log_job_type")
"""The options of the experiment tracker beside TensorBoard."""


def build_parser(prog: str = "rlscale train") -> OneLineParser:
    """``rlscale train``'s parser; ``prog`` names the command in error lines (a launcher checking its ranks' args)."""
    parser = OneLineParser(prog=prog, description="Train a policy on one task with one RL library.")
    add_train_arguments(parser)
    return parser


def add_train_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add every ``rlscale train`` option to ``parser`` (the training benchmark accepts them all) and return it."""
    parser.add_argument(
        "--task",
        required=True,
        help="task id, case-sensitive (see `rlscale list_tasks`); Isaac Lab's ids of the tasks rlscale reproduces "
        "(Isaac-Cartpole-v0) are accepted too",
    )
    parser.add_argument("--rl_library", default="rsl_rl", help=f"one of {', '.join(LIBRARIES)} (default rsl_rl)")
    parser.add_argument("--ml_framework", default="torch", help=_ml_framework_help())
    parser.add_argument("--num_envs", type=int, help="environments on this device (per rank when distributed)")
    parser.add_argument(
        "--max_iterations",
        type=int,
        help="PPO iterations to run; with --resume auto, the run's total (default: the agent config's)",
    )
    parser.add_argument("--seed", type=int, help="base seed; rank r uses seed + r (default: the agent config's)")
    parser.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if available, else cpu)")
    parser.add_argument("--log_root", default="logs", help="root of the run directories (default: logs)")
    parser.add_argument("--run_name", help="suffix of the run directory's name")
    parser.add_argument(
        "--resume",
        type=_resume_value,
        metavar="CHECKPOINT|auto",
        help="checkpoint to continue training from; auto: continue the latest run of this --run_name (none: the latest "
        "unnamed run) under --log_root in its run directory, from its newest loadable checkpoint (from scratch if it "
        "has none), to --max_iterations in total; a run of another task, library or ML framework is refused",
    )
    parser.add_argument(
        ELASTIC_OPTION,
        dest="resume_elastic",
        action="store_true",
        help="with --resume auto: continue the run even if that changes how it learns: its global batch (world size "
        "x --num_envs), --lr_scaling, --sync_normalizer, or the world size a scaled learning rate follows; without "
        "it such a continuation is refused (another split of the same global batch among the ranks is not)",
    )
    parser.add_argument(
        "--checkpoint_interval",
        type=int,
        metavar="N",
        help="save a checkpoint every N iterations (default: the agent config's interval)",
    )
    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one agent config entry by its dotted path, e.g. algorithm.learning_rate=5e-4 (repeatable); "
        f"Isaac Lab's entry-point names ({', '.join(agent_entry_points())}) name the library's default config",
    )
    parser.add_argument(
        "--lr_scaling",
        default="none",
        choices=LR_SCALINGS,
        help="scale the agent's learning rate with world size (default none)",
    )
    parser.add_argument(
        "--sync_normalizer",
        dest="normalizer_sync",
        action="store_true",
        help="average observation-normalizer statistics across ranks where the library allows",
    )
    parser.add_argument("--distributed", action="store_true", help="run as one rank of a torchrun/skrl-JAX job")
    parser.add_argument(
        "--cpu_threads",
        type=int,
        metavar="N",
        help="torch CPU threads of each rank (default: one per CPU of a rank the launcher bound; unbound, 1 per CPU "
        "rank and the host's cores shared among GPU ranks)",
    )
    parser.add_argument(
        "--no_cuda_graph",
        action="store_true",
        help="step the task eagerly on CUDA (default: replay its step as one CUDA graph when the task allows it)",
    )
    parser.add_argument(
        "--tf32",
        action="store_true",
        help="allow TF32 for float32 matmuls and cuDNN convolutions on CUDA (default: torch's full float32 matmuls; "
        "no effect on the CPU)",
    )
    parser.add_argument(
        "--sync_check_interval",
        type=int,
        default=0,
        metavar="N",
        help="compare the ranks' policy parameters every N iterations (default 0: only at the end)",
    )
    parser.add_argument(
        "--logger",
        default="tensorboard",
        help="experiment tracker beside TensorBoard, which is always written: tensorboard (none besides) or wandb "
        "(Weights & Biases, the rlscale[wandb] extra: global rank 0 logs one run; it replaces the agent config's own "
        "logger settings; default tensorboard)",
    )
    parser.add_argument(
        "--log_project_name", help=f"project of the tracker run, with --logger wandb (default {DEFAULT_PROJECT})"
    )
    parser.add_argument("--log_group", help="group of the tracker run, with --logger wandb (a study sets its name)")
    parser.add_argument(
        "--log_job_type",
        default="train",
        help="job type of the tracker run, with --logger wandb: the stage (default train; benchmark for the training "
        "benchmark; a study's parity runs say parity)",
    )
    parser.add_argument("--headless", action="store_true", help="accepted and ignored: rlscale renders nothing")
    # Not an argparse positional: one of those would take the value of a mistyped option (--num_env 8) as an override.
    parser.add_argument_group(
        "overrides (Isaac Lab's Hydra syntax, anywhere on the line)",
        "agent.KEY=VALUE does what --agent KEY=VALUE does; env.FIELD=VALUE sets a field of the task's config, "
        "checked against its type (env.episode_length_s=10; env.physics.pole_mass=0.2 in a nested config); "
        "num_envs, seed and device are set by their options",
    )
    return parser


def parse_command_line(parser: OneLineParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)`` that also collects the arguments that are not options, wherever they are, into
    ``overrides``; a line with an unknown option is refused whole, as argparse refuses it."""
    args, extras = parser.parse_known_args(argv)
    if any(extra.startswith("-") for extra in extras):
        parser.refuse_unrecognized(extras)
    args.overrides = extras
    return args


def check_options(parser: argparse.ArgumentParser, args: argparse.Namespace, launcher: str, *, launched: bool) -> None:
    """Refuse, through ``parser.error``, every option that is wrong whatever the task.

    Args:
        launcher: Command named in the error for ``--distributed`` without a launcher.
        launched: The arguments are a launcher's, for ranks it is about to start (which need no rank variables yet).
    """
    if args.rl_library not in LIBRARIES:
        parser.error(f"--rl_library {args.rl_library!r} is not one of {', '.join(LIBRARIES)}")
    if args.ml_framework not in ml_frameworks():
        parser.error(f"--ml_framework {args.ml_framework!r} is not one of {', '.join(ml_frameworks())}")
    if args.ml_framework not in LIBRARIES[args.rl_library].ml_frameworks:
        parser.error(
            f"--ml_framework {args.ml_framework} needs --rl_library {_libraries_with(args.ml_framework)} "
            f"(got {args.rl_library})"
        )
    for flag in ("num_envs", "max_iterations", "checkpoint_interval", "cpu_threads"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            parser.error(f"--{flag} must be at least 1 (got {getattr(args, flag)})")
    if args.resume_elastic and args.resume != AUTO:
        parser.error(f"{ELASTIC_OPTION} continues a run with --resume auto; add --resume auto, or drop it")
    if args.sync_check_interval < 0:
        parser.error(f"--sync_check_interval must be non-negative (got {args.sync_check_interval})")
    try:
        collective_timeout()  # RLSCALE_COLLECTIVE_TIMEOUT and RLSCALE_HANG_TIMEOUT are numbers of seconds
    except ValueError as error:
        parser.error(str(error))
    if args.seed is not None and args.seed < 0:
        parser.error(f"--seed must be non-negative (got {args.seed})")
    if args.run_name == "":  # it would name no run, yet set it apart from the unnamed ones
        parser.error("--run_name '' is empty; drop --run_name for an unnamed run, or name it, e.g. my_run")
    if args.run_name is not None and {"/", os.sep} & set(args.run_name):  # it names one folder under log_root
        parser.error(f"--run_name {args.run_name!r} is not a folder name; drop the path separators, e.g. my_run")
    if Path(args.log_root).exists() and not Path(args.log_root).is_dir():
        parser.error(f"--log_root {args.log_root}: is a file, not a directory; name a directory (default logs)")
    unwritable = unwritable_reason(Path(args.log_root))
    if unwritable:
        parser.error(f"--log_root {args.log_root}: {unwritable}; name a directory you can write (default logs)")
    _check_logger(parser, args)
    if args.distributed and not launched and rank_info().world_size == 1 and "WORLD_SIZE" not in os.environ:
        parser.error(f"--distributed needs the rank variables of a launcher; use `{launcher}`")


def _check_logger(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.logger == "neptune":  # Isaac Lab's third choice
        parser.error(
            "--logger neptune is not supported: Neptune's offline client cannot continue a run; use --logger wandb "
            "or tensorboard"
        )
    if args.logger not in LOGGERS:
        parser.error(f"--logger {args.logger!r} is not one of {', '.join(LOGGERS)}")
    run_options = [option.removeprefix("--") for option in TRACKER_OPTIONS[1:]]
    if args.logger == "tensorboard":
        for name in run_options:
            if getattr(args, name) != parser.get_default(name):
                parser.error(f"--{name} names a tracker run: pass --logger wandb too, or drop --{name}")
        return
    extra = missing_client(args.logger)
    if extra is not None:
        parser.error(f"--logger {args.logger} needs its client, which is not installed: pip install '{extra}'")
    for name in run_options:
        value = getattr(args, name)
        if value is not None and (not value or len(value) > 128):
            parser.error(f"--{name} {value!r}: give 1 to 128 characters")
    if args.log_project_name and PROJECT_FORBIDDEN & set(args.log_project_name):
        forbidden = " ".join(sorted(PROJECT_FORBIDDEN))
        parser.error(f"--log_project_name {args.log_project_name!r}: W&B refuses any of {forbidden} in it")


def split_overrides(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The agent overrides as ``(as given, KEY=VALUE)`` pairs and the env overrides as ``{FIELD: text}``, refusing
    what is malformed whatever the task: this much a launcher's dry run checks."""
    agent: list[tuple[str, str]] = []
    for entry in args.agent:
        if "=" in entry:
            agent.append((f"--agent {entry}", entry))
        else:
            _check_agent_entry_point(parser, entry, args.rl_library)
    env: dict[str, str] = {}
    for given in args.overrides:
        prefix, _, override = given.partition(".")
        key, equals, text = override.partition("=")
        if prefix not in ("agent", "env"):
            parser.error(f"{given!r}: a positional argument is an override, agent.KEY=VALUE or env.FIELD=VALUE")
        if not equals or not key:
            parser.error(f"{given}: expected {prefix}.KEY=VALUE")
        if prefix == "env" and key in OPTION_OF_ENV_FIELD:
            option = OPTION_OF_ENV_FIELD[key]
            parser.error(f"{given}: pass --{option} {text} instead (rlscale train sets the task's {option} per rank)")
        if prefix == "agent":
            agent.append((given, override))
        else:
            env[key] = text
    return agent, env


def agent_entry_points() -> dict[str, str]:
    """Isaac Lab's ``--agent`` entry-point names → the library whose default agent config (the task's PPO) they name."""
    return {entry: name for name, library in LIBRARIES.items() for entry in library.agent_entry_points}


def _check_agent_entry_point(parser: argparse.ArgumentParser, name: str, rl_library: str) -> None:
    library = agent_entry_points().get(name)
    if library is None:
        parser.error(
            f"--agent {name}: expected KEY=VALUE or an Isaac Lab agent entry point: {', '.join(agent_entry_points())}"
        )
    if library != rl_library:
        own = LIBRARIES[rl_library].agent_entry_points[0]
        parser.error(
            f"--agent {name} names {library}'s agent config, but --rl_library is {rl_library}; "
            f"pass --rl_library {library}, or --agent {own}"
        )


def _ml_framework_help() -> str:
    """``torch or jax; jax only with --rl_library skrl``, from ``LIBRARIES``."""
    limited = [f for f in ml_frameworks() if not all(f in library.ml_frameworks for library in LIBRARIES.values())]
    only = [f"{framework} only with --rl_library {_libraries_with(framework)}" for framework in limited]
    return "; ".join([" or ".join(ml_frameworks()), *only])


def _libraries_with(ml_framework: str) -> str:
    """The libraries that train with ``ml_framework``, as the fix an error line names (``skrl`` for jax)."""
    return " or ".join(name for name, library in LIBRARIES.items() if ml_framework in library.ml_frameworks)


def _resume_value(text: str) -> str | Path:
    return text if text == AUTO else Path(text)  # a checkpoint file named auto is ./auto
