"""The benchmark workflows' own options, the ``rlscale train`` options each refuses, and their checks.

Torch-free, and free of the workflow records (:mod:`.records` holds these pieces together), so that the records, the
parser (:mod:`.arguments`) and the command line share them without importing each other.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rlscale.benchmark.comparison import NOT_MIRRORED
from rlscale.device import requested_kind

STARTUP_REFUSES = {
    "--max_iterations": "startup always times one iteration",
    "--resume": "startup times a cold start",
    "--checkpoint_interval": "startup runs one iteration, with no periodic checkpoint",
}
RUNTIME_REFUSES = {
    flag: "runtime steps the task with random actions, without a library"
    for flag in ("--rl_library", "--ml_framework", "--max_iterations", "--resume", "--agent")
} | {flag: "runtime trains no policy" for flag in ("--sync_check_interval", "--checkpoint_interval")}

UNSUPPORTED = {
    "video": "--video: rlscale has no renderer, so there is no video to record",
    "capture_env_sensors": "--capture_env_sensors: rlscale's tasks have no sensors to capture",
    "check_success": "--check_success: rlscale's tasks define no success term to check",
}
"""Isaac Lab options no workflow supports, with the reason."""


def add_unsupported(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    # Accepted only to be refused by name: Isaac Lab's users pass them, and "unrecognized argument" would not say why.
    parser.add_argument("--video", action="store_true", help="not supported: rlscale has no renderer")
    parser.add_argument(
        "--capture_env_sensors", type=int, nargs="?", const=1, default=0, metavar="N", help="not supported: no sensors"
    )
    parser.add_argument("--check_success", action="store_true", help="not supported: no success term")


def add_no_options(group: argparse._ArgumentGroup) -> None:
    """The startup workflow has no options of its own."""


def add_runtime_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--warmup_steps", type=int, default=50, help="untimed steps first (default 50)")
    group.add_argument("--num_steps", type=int, default=1000, help="timed steps (default 1000)")
    group.add_argument(
        "--measure_sync_step",
        action="store_true",
        help="synchronise the device around each step (serialized_synchronized: a step's cost, not throughput)",
    )


SEED_FIELD = "{seed}"
"""Where ``--output_path`` takes each repeat's seed under ``--seeds``."""


def add_training_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        metavar="SEED",
        help="run the cell once per base seed in this one process (imports, CUDA context and process group paid "
        "once), one bundle per seed; --output_path then holds {seed}. Instead of --seed",
    )
    group.add_argument(
        "--warmup_iterations", type=int, default=1, help="iterations left out of the throughput (default 1)"
    )
    group.add_argument("--ema_alpha", type=float, default=0.1, help="EMA weight of the learning curves (0.1)")
    group.add_argument(
        "--peer",
        action="store_true",
        help="first run the library's plain script with the same settings (and torchrun geometry), then report "
        "rlscale / peer throughput (runtime.peer)",
    )
    # Set by --peer for the ranks: the peer's result file.
    group.add_argument("--peer_result", type=Path, help=argparse.SUPPRESS)


def check_nothing(parser: argparse.ArgumentParser, args: argparse.Namespace, multigpu: bool) -> None:
    """The startup workflow checks nothing beyond the common checks."""


def check_runtime(parser: argparse.ArgumentParser, args: argparse.Namespace, multigpu: bool) -> None:
    if args.overrides:
        parser.error(
            f"{args.overrides[0]}: overrides do not apply to the runtime benchmark: it steps the task as registered, "
            "with random actions"
        )
    if args.warmup_steps < 0 or args.num_steps < 1:
        parser.error(f"--warmup_steps must be >= 0 and --num_steps >= 1 (got {args.warmup_steps}, {args.num_steps})")


def check_training(parser: argparse.ArgumentParser, args: argparse.Namespace, multigpu: bool) -> None:
    if args.warmup_iterations < 0:
        parser.error(f"--warmup_iterations must be >= 0 (got {args.warmup_iterations})")
    if not 0 < args.ema_alpha <= 1:
        parser.error(f"--ema_alpha must be in (0, 1] (got {args.ema_alpha})")
    if args.max_iterations is not None and args.warmup_iterations >= args.max_iterations:
        parser.error(
            f"--warmup_iterations {args.warmup_iterations} leaves none of the {args.max_iterations} iterations "
            "to measure; lower it or raise --max_iterations"
        )
    _check_seeds(parser, args)
    _check_peer_args(parser, args, multigpu)


def _check_seeds(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.seeds is None:  # --seed and --seeds: refused by the parser (arguments.seed_from_seeds)
        return
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds names a seed twice: {' '.join(map(str, args.seeds))}")
    if args.peer and len(args.seeds) > 1:
        # The peer is a cold process of its own; its figures stand beside one cold rlscale process, not a repeat.
        parser.error("--peer runs with one seed per process: pass --seed, or one --seeds value, per run")
    if args.output_path is not None and len(args.seeds) > 1 and SEED_FIELD not in str(args.output_path):
        parser.error(f"--output_path {args.output_path} must contain {SEED_FIELD} with several --seeds")


def _check_peer_args(parser: argparse.ArgumentParser, args: argparse.Namespace, multigpu: bool) -> None:
    if args.peer_result is not None and not args.peer:
        parser.error("--peer_result is internal to --peer; pass --peer to run and compare the peer baseline")
    if not args.peer:
        return
    if args.ml_framework == "jax":
        parser.error("--peer: the peer baselines run skrl with PyTorch only; drop --ml_framework jax or --peer")
    for name, reason in NOT_MIRRORED.items():
        if getattr(args, name) != parser.get_default(name):
            parser.error(f"--peer cannot mirror {reason}; drop one of the two")
    if args.overrides:
        parser.error(
            f"--peer cannot mirror {args.overrides[0]}: the peer trains the task and agent config as shipped; "
            "drop one of the two"
        )
    given = args.device or ""  # unchecked yet: resolving the spec refuses a device that is none
    if not multigpu and requested_kind(given) == "cuda" and given not in ("cuda", "cuda:", "cuda:0"):
        parser.error(
            f"--peer runs its process on cuda:0, not {args.device}; choose the GPU with CUDA_VISIBLE_DEVICES instead"
        )


def given(argv: list[str], flag: str) -> bool:
    """Whether ``flag`` is on the command line, as ``--flag`` or ``--flag=value``."""
    return any(arg == flag or arg.startswith(f"{flag}=") for arg in argv)


def jax_message(workflow: str) -> str:
    return (
        f"skrl with --ml_framework jax is not supported by `rlscale benchmark {workflow}_multigpu` (its ranks are "
        "timed as torchrun processes); use --ml_framework torch"
    )
