"""``rlscale train``: one training run of a task with one library, on one device or as one rank of a job.

:func:`execute` is the run itself, after argument parsing; ``rlscale benchmark training`` calls it too, so a
benchmarked run is exactly the run ``rlscale train`` would make. This module imports torch only when a run starts,
which keeps ``--help`` (and the benchmark dispatcher that builds on this parser) light.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlscale.argparsing import OneLineParser
from rlscale.dist import RUN_TIMESTAMP_ENV, RankInfo, collective_timeout, isolate_own_gpu, rank_device, rank_info
from rlscale.faults import fault_from_environment
from rlscale.heartbeat import beat
from rlscale.resume import AUTO, latest_run, newest_loadable
from rlscale.rl import ADAPTERS
from rlscale.tasks import UnknownTaskError, get_spec, load_agent_cfg, resolve_task_id
from rlscale.tasks.overrides import field_value, parse_value

if TYPE_CHECKING:
    from rlscale.rl.common import TrainResult
    from rlscale.rl.progress import IterationRecord, TrackedTask
    from rlscale.tasks.base import VecTask

ML_FRAMEWORKS = ("torch", "jax")
RL_LIBRARIES = tuple(ADAPTERS)
"""The libraries with an adapter (the task registry checks each task's configs against the same names)."""
AGENT_ENTRY_POINTS = {
    "rsl_rl_cfg_entry_point": "rsl_rl",
    "rl_games_cfg_entry_point": "rl_games",
    "skrl_cfg_entry_point": "skrl",
    "skrl_ppo_cfg_entry_point": "skrl",
}
"""Isaac Lab's ``--agent`` entry-point names → the library whose default agent config (the task's PPO) they name."""
OPTION_OF_ENV_FIELD = {
    "num_envs": "num_envs",
    "scene.num_envs": "num_envs",
    "seed": "seed",
    "device": "device",
    "sim.device": "device",
}
"""Task config fields (with Isaac Lab's spellings) that ``rlscale train`` sets per rank from its own options."""


def build_parser(prog: str = "rlscale train") -> argparse.ArgumentParser:
    """``rlscale train``'s parser; ``prog`` names the command in error lines (a launcher checking its ranks' args)."""
    parser = OneLineParser(prog=prog, description="Train a policy on one task with one RL library.", allow_abbrev=False)
    return add_train_arguments(parser)


def add_train_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add every ``rlscale train`` option to ``parser`` (the training benchmark accepts them all) and return it."""
    parser.add_argument(
        "--task",
        required=True,
        help="task id, case-sensitive (see `rlscale list_tasks`); Isaac Lab's ids of the tasks rlscale reproduces "
        "(Isaac-Cartpole-v0) are accepted too",
    )
    parser.add_argument("--rl_library", default="rsl_rl", help=f"one of {', '.join(RL_LIBRARIES)} (default rsl_rl)")
    parser.add_argument("--ml_framework", default="torch", help="torch or jax; jax only with --rl_library skrl")
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
        help="checkpoint to continue training from; auto: continue the latest run of this --run_name in its run "
        "directory, from its newest loadable checkpoint (from scratch if it has none), to --max_iterations in total",
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
        f"Isaac Lab's entry-point names ({', '.join(AGENT_ENTRY_POINTS)}) name the library's default config",
    )
    parser.add_argument("--distributed", action="store_true", help="run as one rank of a torchrun/skrl-JAX job")
    parser.add_argument(
        "--cpu_threads",
        type=int,
        metavar="N",
        help="torch CPU threads of each rank (default: 1 per CPU rank; the host's cores shared among GPU ranks)",
    )
    parser.add_argument(
        "--no_cuda_graph",
        action="store_true",
        help="step the task eagerly on CUDA (default: replay its step as one CUDA graph when the task allows it)",
    )
    parser.add_argument(
        "--sync_check_interval",
        type=int,
        default=0,
        metavar="N",
        help="compare the ranks' policy parameters every N iterations (default 0: only at the end)",
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


def parse_command_line(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)`` that also collects the arguments that are not options, wherever they are, into
    ``overrides``; a line with an unknown option is refused whole, as argparse refuses it."""
    args, extras = parser.parse_known_args(argv)
    if any(extra.startswith("-") for extra in extras):
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    args.overrides = extras
    return args


def parse_args(
    argv: list[str] | None,
    parser: argparse.ArgumentParser | None = None,
    launcher: str = "rlscale train_multigpu",
    *,
    torch_free: bool = False,
) -> tuple[argparse.Namespace, dict | None]:
    """Parse and validate everything that can be checked before a file is written.

    A bad argument is one line on stderr and exit code 2 (``parser.error``).

    Args:
        argv: Command line without the program name; None reads ``sys.argv``.
        parser: Parser holding at least :func:`add_train_arguments`' options; default :func:`build_parser`'s.
        launcher: Command named in the error for ``--distributed`` without a launcher.
        torch_free: Stop after the checks that need no torch (a launcher's ``--dry_run``): the task's id and the
            form of the overrides are checked, its backend, the device, the checkpoint and the override keys are not.

    Returns:
        The arguments and the agent config with the overrides applied (None when ``torch_free``). ``task`` is the
        registered id (``task_alias`` the Isaac Lab id given for it, or None). Unless ``torch_free``, ``device`` is
        resolved and ``env_overrides`` maps task config fields to their typed values, which :func:`execute` builds
        the task with (and the manifest records with the arguments).
    """
    parser = parser or build_parser()
    args = parse_command_line(parser, argv)
    if args.rl_library not in RL_LIBRARIES:
        parser.error(f"--rl_library {args.rl_library!r} is not one of {', '.join(RL_LIBRARIES)}")
    if args.ml_framework not in ML_FRAMEWORKS:
        parser.error(f"--ml_framework {args.ml_framework!r} is not one of {', '.join(ML_FRAMEWORKS)}")
    if args.ml_framework == "jax" and args.rl_library != "skrl":
        parser.error(f"--ml_framework jax needs --rl_library skrl (got {args.rl_library})")
    for flag in ("num_envs", "max_iterations", "checkpoint_interval", "cpu_threads"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            parser.error(f"--{flag} must be at least 1 (got {getattr(args, flag)})")
    if args.sync_check_interval < 0:
        parser.error(f"--sync_check_interval must be non-negative (got {args.sync_check_interval})")
    try:
        fault_from_environment()
    except ValueError as error:
        parser.error(str(error))
    if args.seed is not None and args.seed < 0:
        parser.error(f"--seed must be non-negative (got {args.seed})")
    if args.run_name is not None and {"/", os.sep} & set(args.run_name):  # it names one folder under log_root
        parser.error(f"--run_name {args.run_name!r} is not a folder name; drop the path separators, e.g. my_run")
    if Path(args.log_root).exists() and not Path(args.log_root).is_dir():
        parser.error(f"--log_root {args.log_root}: is a file, not a directory; name a directory (default logs)")
    if args.distributed and rank_info().world_size == 1 and "WORLD_SIZE" not in os.environ:
        parser.error(f"--distributed needs the rank variables of a launcher; use `{launcher}`")
    agent_overrides, env_overrides = _split_overrides(parser, args)
    try:
        task_id = resolve_task_id(args.task)
    except UnknownTaskError as error:
        parser.error(f"--task: {error}")
    args.task_alias = None if task_id == args.task else args.task
    args.task = task_id
    if torch_free:
        return args, None
    spec = get_spec(args.task)
    try:
        if spec.check_available is not None:
            spec.check_available()
    except ImportError as error:
        parser.error(f"--task: {error}")
    try:
        isolate_gpu_if_task_asks(args.task, args.device, args.ml_framework)
    except ValueError as error:
        parser.error(f"--task {args.task}: {error}")
    args.device = _resolve_device(parser, args.device)
    if args.resume not in (None, AUTO):
        _check_checkpoint(parser, args.resume, args.ml_framework)
    agent_cfg = load_agent_cfg(args.task, args.rl_library)
    for given, override in agent_overrides:
        try:
            apply_override(agent_cfg, override)
        except ValueError as error:
            parser.error(f"{given}: {error}")
    args.env_overrides = {}
    for key, text in env_overrides.items():
        try:
            args.env_overrides[key] = field_value(spec.cfg_class, key, text)
        except ValueError as error:
            parser.error(f"env.{key}={text}: {args.task}'s config: {error}")
    return args, agent_cfg


def _split_overrides(
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


def _check_agent_entry_point(parser: argparse.ArgumentParser, name: str, rl_library: str) -> None:
    library = AGENT_ENTRY_POINTS.get(name)
    if library is None:
        parser.error(
            f"--agent {name}: expected KEY=VALUE or an Isaac Lab agent entry point: {', '.join(AGENT_ENTRY_POINTS)}"
        )
    if library != rl_library:
        own = next(entry for entry, owner in AGENT_ENTRY_POINTS.items() if owner == rl_library)
        parser.error(
            f"--agent {name} names {library}'s agent config, but --rl_library is {rl_library}; "
            f"pass --rl_library {library}, or --agent {own}"
        )


def isolate_gpu_if_task_asks(task_id: str, device: str | None, ml_framework: str) -> None:
    """Show this rank only its own GPU when its task asks (:attr:`~rlscale.tasks.registry.TaskSpec.own_gpu_per_rank`).

    skrl's JAX ranks are left alone: ``jax.distributed`` binds their GPU by ``JAX_LOCAL_RANK`` instead.

    Raises:
        UnknownTaskError: for a task id that is not registered.
        ValueError: from :func:`rlscale.dist.own_gpu_variables`.
    """
    if ml_framework == "torch" and get_spec(task_id).own_gpu_per_rank:
        isolate_own_gpu(device or "cuda")


def _resolve_device(parser: argparse.ArgumentParser, requested: str | None) -> str:
    import torch

    if requested is None:
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cpu":
        return requested
    kind, _, index = requested.partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        parser.error(f"--device {requested!r} is not cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        parser.error(f"--device {requested}: no CUDA device is available; use --device cpu")
    if index and int(index) >= torch.cuda.device_count():
        parser.error(f"--device {requested}: only {torch.cuda.device_count()} CUDA device(s) are visible")
    return requested if index else "cuda:0"  # libraries compare device strings, so name the index


def _resume_value(text: str) -> str | Path:
    return text if text == AUTO else Path(text)  # a checkpoint file named auto is ./auto


def _check_checkpoint(parser: argparse.ArgumentParser, path: Path, ml_framework: str) -> None:
    from rlscale.rl.common import check_weights_only

    if path.is_dir():
        parser.error(
            f"--resume {path}: is a directory; name the checkpoint file in it (e.g. model_<iteration>.pt), or pass "
            "--resume auto to continue the latest run"
        )
    if not path.is_file():
        parser.error(f"--resume {path}: no such checkpoint file")
    try:
        check_weights_only(path, ml_framework)
    except ValueError as error:
        cause = type(error.__cause__).__name__ if error.__cause__ else "ValueError"
        parser.error(
            f"--resume {path}: cannot be loaded as weights only ({cause}: damaged, or pickles more than tensors); "
            "pass a checkpoint that the library wrote (model_<iteration>.pt, agent_<timestep>.pt|.pickle)"
        )


def apply_override(cfg: dict, override: str) -> None:
    """Set ``cfg[a][b]... = value`` from ``"a.b=value"``; the key must exist, so a typo is an error, not a no-op.

    Raises:
        ValueError: for a malformed override or a key the config does not have.
    """
    key, sep, text = override.partition("=")
    if not sep or not key:
        raise ValueError("expected KEY=VALUE")
    *parents, leaf = key.split(".")
    node = cfg
    for part in parents:
        if not isinstance(node.get(part), dict):
            raise ValueError(f"the agent config has no section {part!r}; sections here: {_sections(node)}")
        node = node[part]
    if leaf not in node:
        raise ValueError(f"the agent config has no key {key!r}; keys here: {', '.join(map(str, node))}")
    node[leaf] = parse_value(text)


def _sections(node: dict) -> str:
    return ", ".join(str(name) for name, value in node.items() if isinstance(value, dict)) or "none"


def run_directory(args: argparse.Namespace) -> Path:
    """``<log_root>/<rl_library>/<task>/<timestamp>[_<run_name>]``, rank 0's; other ranks write in its ``rank_<r>/``.

    With ``--resume auto`` it is the latest existing run directory of this run name, if any, so that a rerun continues
    in place: its checkpoints, TensorBoard events and console log go on in the same directory.
    """
    runs_root = Path(args.log_root, args.rl_library, args.task)
    if args.resume == AUTO and (latest := latest_run(runs_root, args.run_name, args.ml_framework)) is not None:
        return latest
    stamp = os.environ.get(RUN_TIMESTAMP_ENV) or datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return runs_root / (f"{stamp}_{args.run_name}" if args.run_name else stamp)


def auto_resume(
    adapter, run_dir: Path, agent_cfg: dict, ml_framework: str, total: int, report: bool
) -> tuple[Path | None, int]:
    """``--resume auto``: the newest checkpoint in ``run_dir`` that loads and leaves iterations to train.

    Args:
        adapter: The library's adapter, which knows where its checkpoints are.
        run_dir: Rank 0's run directory, which holds the checkpoints.
        agent_cfg: The agent config.
        ml_framework: torch or jax.
        total: The run's total iterations.
        report: Print the choice (rank 0 only, so that a job says it once).

    Returns:
        The checkpoint (None: start from scratch) and the iterations it had finished.
    """

    def skipped(path: Path, error: ValueError) -> None:
        if report:
            cause = error.__cause__ or error
            reason = next(iter(str(cause).splitlines()), "")  # torch's weights-only errors run to many lines
            why = f"it cannot be loaded ({type(cause).__name__}: {reason})"
            print(f"[rlscale] --resume auto: skipping {path}, {why}", file=sys.stderr)

    candidates = adapter.find_checkpoints(run_dir, agent_cfg, ml_framework)
    checkpoint = newest_loadable(candidates, ml_framework, total, skipped)
    start = adapter.checkpoint_iteration(checkpoint, agent_cfg) if checkpoint else 0
    if report:
        found = f"continuing from {checkpoint.name} ({start}/{total})" if checkpoint else "starting from scratch"
        print(f"[rlscale] --resume auto: {found} in {run_dir}", flush=True)
    return checkpoint, start


def resolve_seed(args: argparse.Namespace, agent_cfg: dict) -> int:
    """The base seed: ``--seed``, else the agent config's (rl_games keeps it under ``params``)."""
    if args.seed is not None:
        return args.seed
    return int(agent_cfg.get("seed", agent_cfg.get("params", {}).get("seed")))


@dataclass
class TrainingOutcome:
    """What one run of :func:`execute` leaves behind, for ``rlscale train``'s report and the training benchmark."""

    status: str
    """``completed`` or ``interrupted`` (a crash raises instead)."""
    rank: RankInfo
    device: str
    """This rank's torch device."""
    seed: int
    """Base seed."""
    iterations: int
    """Iterations requested in this invocation."""
    log_dir: Path
    """This rank's run directory."""
    manifest: dict[str, Any]
    """The data of ``manifest.json`` as last written."""
    records: list[IterationRecord] = field(default_factory=list)
    """Per-iteration timing and episode statistics, in order (those finished before an interrupt)."""
    num_envs: int | None = None
    """Environments on this rank (None if the run stopped before the task existed)."""
    steps_per_env: int | None = None
    """Env steps per environment per iteration (the library's rollout length)."""
    result: TrainResult | None = None
    """The adapter's result (None when interrupted)."""
    task_creation_s: float | None = None
    """Wall time of building the task, its compilation included."""
    task_compile_s: float | None = None
    """The part of ``task_creation_s`` spent compiling the task's step (:attr:`VecTask.compile_s`)."""
    first_iteration_s: float | None = None
    """Wall time from calling the library to the end of the first iteration's update (library setup included)."""
    train_s: float | None = None
    """Wall time of the library's whole training call."""
    wall_time_s: float = 0.0
    """Wall time of :func:`execute`."""

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "completed" else 130


def main(argv: list[str] | None = None) -> int:
    args, agent_cfg = parse_args(argv)
    outcome = execute(args, agent_cfg)
    if outcome.status == "completed" and outcome.rank.is_main:
        digests = outcome.manifest["rank_param_digests"]
        print(
            f"[rlscale] completed {outcome.result.iterations_completed} iterations in {outcome.wall_time_s:.1f}s; "
            f"mean episode length {outcome.manifest['final_mean_episode_length']:.1f}; "
            f"ranks in sync ({len(digests)}); run directory {outcome.log_dir}"
        )
    return outcome.exit_code


def execute(
    args: argparse.Namespace,
    agent_cfg: dict,
    *,
    on_task_created: Callable[[VecTask], None] | None = None,
    on_tracking: Callable[[TrackedTask], None] | None = None,
) -> TrainingOutcome:
    """Run one training invocation from parsed arguments: task, library, manifest and the ranks' sync audit.

    Args:
        args: Arguments from :func:`parse_args`.
        agent_cfg: The agent config, overrides applied.
        on_task_created: Called with the task (graphed where possible) right after it is built, before the library
            sees it.
        on_tracking: Called with the tracking wrapper before training starts, so a caller keeps its records even
            if training then raises.

    Returns:
        The outcome; ``status`` is ``interrupted`` after Ctrl-C or SIGTERM.

    Raises:
        BaseException: whatever training raised, after the manifest recorded the crash.
    """
    started = time.perf_counter()
    import torch

    from rlscale.manifest import Manifest, device_description
    from rlscale.rank_sync import check_digests, gather_digests
    from rlscale.rl import load_adapter
    from rlscale.rl.common import TrainContext, parameter_digest
    from rlscale.rl.dist_compat import use_collective_timeout, use_gloo_for_cpu_ranks
    from rlscale.rl.progress import TrackedTask
    from rlscale.tasks.graph import build_task

    rank = rank_info()
    device = rank_device(args.device, rank, torch.cuda.device_count() if args.device != "cpu" else 0)
    torch.set_num_threads(args.cpu_threads or default_cpu_threads(device, rank.local_world_size))
    if rank.distributed:
        use_collective_timeout(collective_timeout())
        use_gloo_for_cpu_ranks(device)
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    adapter = load_adapter(args.rl_library)
    seed = resolve_seed(args, agent_cfg)
    iterations = args.max_iterations or adapter.default_iterations(agent_cfg)
    run_dir = run_directory(args)
    if args.resume == AUTO:
        resume, start = auto_resume(adapter, run_dir, agent_cfg, args.ml_framework, iterations, rank.is_main)
        iterations -= start  # the rest of the run's total
    else:
        resume = args.resume
        start = adapter.checkpoint_iteration(resume, agent_cfg) if resume else 0
    log_dir = run_dir if rank.is_main else run_dir / f"rank_{rank.rank}"
    manifest = Manifest(
        log_dir / "manifest.json",
        args=vars(args),
        agent_cfg=agent_cfg,
        seed=seed,
        env_seed=seed + rank.rank,
        rank=rank.rank,
        world_size=rank.world_size,
        local_world_size=rank.local_world_size,
        num_nodes=rank.num_nodes,
        run_dir=str(log_dir),
        resumed_from=str(resume) if resume else None,
        **device_description(device),
    )
    outcome = TrainingOutcome(
        status="interrupted",
        rank=rank,
        device=device,
        seed=seed,
        iterations=iterations,
        log_dir=log_dir,
        manifest=manifest.data,
        steps_per_env=adapter.rollout_length(agent_cfg),
    )
    context = TrainContext(
        device=device,
        max_iterations=iterations,
        seed=seed,
        log_dir=log_dir,
        rank=rank,
        resume=resume,
        ml_framework=args.ml_framework,
        checkpoint_interval=args.checkpoint_interval,
    )
    fault = fault_from_environment()
    sync_checks: list[int] = []
    train_started = 0.0

    def audit_ranks(iteration: int) -> list[str]:
        beat("sync_check", iteration)
        digests = gather_digests(parameter_digest(context.policy_probe.read()), rank)
        check_digests(digests, iteration)
        sync_checks.append(iteration)
        return digests

    def on_iteration_start(iteration: int) -> None:
        if iteration == start + 1:  # the first iteration's update has just ended
            outcome.first_iteration_s = time.perf_counter() - train_started
        interval = args.sync_check_interval
        if interval and iteration > start and (iteration - start) % interval == 0:
            audit_ranks(iteration)
        beat("collect", iteration)  # before the fault, so that an injected hang is reported in this phase
        if fault is not None:
            fault.trigger_if_due(rank.rank, iteration, context.policy_probe.read)

    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        task_kwargs = {**args.env_overrides, "device": device, "seed": seed + rank.rank}
        if args.num_envs is not None:
            task_kwargs["num_envs"] = args.num_envs
        created = time.perf_counter()
        task = build_task(args.task, cuda_graph=not args.no_cuda_graph, **task_kwargs)
        outcome.task_creation_s = time.perf_counter() - created
        outcome.task_compile_s = task.compile_s
        outcome.num_envs = task.num_envs
        if on_task_created is not None:
            on_task_created(task)
        tracked = TrackedTask(
            task,
            outcome.steps_per_env,
            start_iteration=start,
            total_iterations=start + iterations,
            world_size=rank.world_size,
            stream=sys.stdout if rank.is_main else None,
            on_iteration_start=on_iteration_start,
            on_rollout_end=lambda iteration: beat("update", iteration),
        )
        outcome.records = tracked.records
        if on_tracking is not None:
            on_tracking(tracked)
        train_started = time.perf_counter()
        result = adapter.train(tracked, agent_cfg, context)
        tracked.finish()
        outcome.train_s = time.perf_counter() - train_started
        if outcome.first_iteration_s is None:  # a single iteration ends with the library's return
            outcome.first_iteration_s = outcome.train_s
        digests = audit_ranks(result.iterations_completed)
    except KeyboardInterrupt:
        manifest.finish("interrupted")
        outcome.wall_time_s = time.perf_counter() - started
        print(f"[rlscale] rank {rank.rank} interrupted; run directory {log_dir}", file=sys.stderr)
        return outcome
    except BaseException as error:
        manifest.finish("crashed", error=f"{type(error).__name__}: {error}")
        raise
    last = tracked.records[-1] if tracked.records else None
    outcome.wall_time_s = time.perf_counter() - started
    manifest.finish(
        "completed",
        num_envs=tracked.num_envs,
        start_iteration=result.start_iteration,
        iterations_completed=result.iterations_completed,
        checkpoint=str(result.checkpoint) if result.checkpoint else None,
        resumed_param_digest=result.resumed_param_digest,
        param_digest=digests[rank.rank],
        rank_param_digests=digests,
        sync_checked_at_iterations=sync_checks,
        final_mean_return=last.mean_return if last else None,
        final_mean_episode_length=last.mean_episode_length if last else None,
        iterations=[vars(record) for record in tracked.records],
        wall_time_s=outcome.wall_time_s,
    )
    outcome.status, outcome.result = "completed", result
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return outcome


def default_cpu_threads(device: str, local_world_size: int) -> int:
    """One thread per CPU rank (each rank is one core's worth of work); GPU ranks share the host's cores."""
    return 1 if device == "cpu" else max(1, (os.cpu_count() or 1) // local_world_size)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt
