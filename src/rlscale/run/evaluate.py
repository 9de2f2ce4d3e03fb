"""``rlscale evaluate``: a trained velocity-tracking policy on fixed commands, deterministically.

Each env runs one episode (Isaac Lab's ``_PLAY`` settings: no observation noise, no pushes) with one of the commands,
the envs split evenly among them; an env's result is its episode's mean linear-velocity tracking error
``|v_cmd - v|`` over x and y (m/s, base frame), its yaw-rate error, and whether it fell (``base_contact``) before the
time-out. The run's task, library, agent config and env overrides come from the run directory's ``manifest.json``.
Several checkpoints of one run are evaluated in one process, one after the other, so a learning curve pays the start
(imports, the task's compile) once.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlscale.argparsing import OneLineParser
from rlscale.manifest import RunManifest, read_checkpoint_manifest, run_directory_of
from rlscale.paths import unwritable_reason
from rlscale.run.checkpoint_policy import (
    checked_arguments,
    checkpoint_refusal,
    is_velocity_task,
    parse_command,
    task_and_policy,
)

CHECKPOINT_FIELD = "{checkpoint}"


def parser() -> OneLineParser:
    parser = OneLineParser(prog="rlscale evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkpoint",
        type=Path,
        nargs="+",
        required=True,
        help="checkpoints of one run directory, evaluated one after the other",
    )
    parser.add_argument("--num_envs", type=int, default=1000, help="envs, split evenly among the commands")
    parser.add_argument(
        "--command",
        action="append",
        type=parse_command,
        metavar="VX,VY,WZ",
        help="a fixed command (repeat for several; default: the task's evaluation commands)",
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the task's resets (default 0)")
    parser.add_argument(
        "--output",
        type=Path,
        help=f"write the results as JSON here; with several checkpoints {CHECKPOINT_FIELD} in it stands for each one's "
        "file name without its suffix",
    )
    return parser


def main(argv: list[str]) -> int:
    args = checked_arguments(parser(), argv, _refusal)
    manifest = read_checkpoint_manifest(args.checkpoint[0])
    for results in evaluate(manifest, args):
        print(json.dumps({"checkpoint": results["checkpoint"], **results["summary"]}, indent=2))
        if args.output is not None:
            output = str(args.output).replace(CHECKPOINT_FIELD, Path(results["checkpoint"]).stem)
            Path(output).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def _refusal(args: Any) -> str | None:
    """One line for bad input, before anything is built (None when the input is fine)."""
    for checkpoint in args.checkpoint:
        unloadable = checkpoint_refusal(checkpoint, "evaluate")
        if unloadable:
            return unloadable
    run_dirs = {run_directory_of(checkpoint.resolve()) for checkpoint in args.checkpoint}
    if len(run_dirs) > 1:
        return f"--checkpoint: the checkpoints must be of one run directory, not {len(run_dirs)}"
    several = len(set(args.checkpoint)) > 1
    if several and args.output is not None and CHECKPOINT_FIELD not in str(args.output):
        return f"--output {args.output}: with several checkpoints it needs {CHECKPOINT_FIELD} (each one's file name)"
    task_id = read_checkpoint_manifest(args.checkpoint[0]).args.task
    if not is_velocity_task(task_id):
        return f"--checkpoint: evaluate measures velocity tracking; {task_id} is no velocity task"
    unwritable = args.output is not None and unwritable_reason(args.output.parent)
    if unwritable:
        return f"--output {args.output}: {unwritable}"
    if args.seed < 0:
        return f"--seed {args.seed}: must be >= 0"
    commands = len(args.command or [()])
    if args.num_envs < commands:
        return f"--num_envs {args.num_envs}: need at least one env per command ({commands})"
    return None


def evaluate(manifest: RunManifest, args: Any) -> Iterator[dict[str, Any]]:
    """Each of ``args.checkpoint``'s results, in order. Each gets a task of its own, as in a process of its own (the
    same resets from the same seed); only the first builds compile its step."""
    for checkpoint in args.checkpoint:
        yield _evaluate_one(manifest, checkpoint, args)


def _evaluate_one(manifest: RunManifest, checkpoint: Path, args: Any) -> dict[str, Any]:
    import torch

    from rlscale.tasks.graph import unwrapped
    from rlscale.tasks.locomotion.cfg import EVALUATION_COMMANDS, EVALUATION_OVERRIDES

    run_args = manifest.args
    overrides = EVALUATION_OVERRIDES | {"num_envs": args.num_envs, "seed": args.seed}
    # The step replayed as one CUDA graph, as in training: eager, a robot's step is hundreds of kernel launches.
    task, policy = task_and_policy(manifest, checkpoint, args.device, cuda_graph=True, **overrides)
    velocity_task = unwrapped(task)
    commands = torch.tensor(args.command or EVALUATION_COMMANDS, dtype=torch.float32)
    env_command = torch.arange(args.num_envs) % len(commands)

    started = time.perf_counter()
    observations, _ = task.reset()
    velocity_task.set_commands(commands[env_command].to(args.device))
    observations = task.get_observations()
    finished = torch.zeros(args.num_envs, dtype=torch.bool, device=args.device)
    fell = torch.zeros_like(finished)
    errors = torch.zeros(args.num_envs, 2, device=args.device)
    with torch.inference_mode():
        for step in range(task.max_episode_length):
            running = velocity_task.episode_tracking_errors.clone()  # this step resets the envs that end in it
            observations, _, terminated, truncated, _ = task.step(policy(observations))
            ending = (terminated | truncated) & ~finished
            errors = torch.where(ending[:, None], running, errors)  # no host sync, unlike a masked assignment
            fell |= terminated & ending
            finished |= ending
            if step % 100 == 0:
                print(f"evaluate {checkpoint.name}: step {step}/{task.max_episode_length}", file=sys.stderr, flush=True)
    task.close()
    per_command = []
    for index, command in enumerate(commands.tolist()):
        mine = (env_command == index).to(args.device)
        per_command.append(_summary(errors[mine], fell[mine], command=command))
    return {
        "task": run_args.task,
        "rl_library": run_args.rl_library,
        "checkpoint": str(checkpoint),
        "num_envs": args.num_envs,
        "seed": args.seed,
        "device": args.device,
        "episode_steps": task.max_episode_length,
        "wall_time_s": time.perf_counter() - started,
        "summary": _summary(errors, fell),
        "per_command": per_command,
    }


def _summary(errors, fell, **fields) -> dict[str, Any]:
    return {
        **fields,
        "envs": int(fell.numel()),
        "lin_vel_error_mps": float(errors[:, 0].mean()),
        "ang_vel_error_radps": float(errors[:, 1].mean()),
        "fall_rate": float(fell.float().mean()),
    }
