"""A trained policy from a checkpoint of an rlscale run directory, as ``rlscale evaluate`` and ``rlscale play`` load
it: the run's task, library, ML framework, agent config and env overrides come from the run's ``manifest.json``, and
the library's adapter gives the deterministic policy (:class:`~rlscale.rl.adapter.EvaluatingAdapter`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rlscale.argparsing import OneLineParser
from rlscale.manifest import MANIFEST_NAME, InvalidManifest, RunManifest, read_checkpoint_manifest, run_directory_of
from rlscale.rl import LIBRARIES

if TYPE_CHECKING:
    import torch

    from rlscale.rl.adapter import EvaluatingAdapter
    from rlscale.tasks.base import VecTask


def parse_command(text: str) -> tuple[float, float, float]:
    """A velocity command ``VX,VY,WZ`` (argparse's ``type``)."""
    values = tuple(float(value) for value in text.split(","))
    if len(values) != 3:
        raise ValueError
    return values


def checked_arguments(command_line: OneLineParser, argv: list[str], refusal: Callable[[Any], str | None]) -> Any:
    """``argv`` parsed, refused in one line (exit 2) when ``refusal`` finds something wrong, with ``device`` resolved
    to the text torch takes."""
    from rlscale.run.spec import resolve_device

    args = command_line.parse_args(argv)
    bad = refusal(args)
    if bad:
        command_line.error(bad)
    args.device = str(resolve_device(command_line, args.device))
    return args


def checkpoint_refusal(checkpoint: Path, command: str) -> str | None:
    """One line for a checkpoint that ``rlscale <command>`` cannot load, or None when it can: a missing file, no run
    manifest beside it or one that does not match its schema, a library whose adapter gives no deterministic policy,
    or a task that is no longer registered or lacks what it needs (an extra)."""
    from rlscale.tasks import UnknownTaskError, get_spec

    if not checkpoint.is_file():
        return f"--checkpoint {checkpoint}: no such file"
    if run_directory_of(checkpoint) is None:
        return (
            f"--checkpoint {checkpoint}: no {MANIFEST_NAME} beside it or in the folder above (is it in an rlscale run "
            "directory?)"
        )
    try:
        run_args = read_checkpoint_manifest(checkpoint).args
    except InvalidManifest as error:
        return f"--checkpoint {checkpoint}: {error}"
    loadable = [name for name, library in LIBRARIES.items() if library.evaluates]
    if run_args.rl_library not in loadable:
        return f"--checkpoint: {command} loads {', '.join(loadable)} checkpoints, not {run_args.rl_library}"
    try:
        spec = get_spec(run_args.task)
        if spec.check_available is not None:
            spec.check_available()
    except (UnknownTaskError, ImportError) as error:
        return f"--checkpoint {checkpoint}: the run's task: {error}"
    return None


def is_velocity_task(task_id: str) -> bool:
    """Whether a task tracks velocity commands (``set_commands``, ``episode_tracking_errors``)."""
    from rlscale.tasks import get_spec
    from rlscale.tasks.locomotion.cfg import VelocityTaskCfg

    return issubclass(get_spec(task_id).cfg_class, VelocityTaskCfg)


def task_and_policy(
    manifest: RunManifest, checkpoint: Path, device: str, cuda_graph: bool = False, **overrides: Any
) -> tuple[VecTask, Callable[[dict], torch.Tensor]]:
    """The run's task on ``device``, built with the run's env overrides and then ``overrides`` (its step replayed as
    one CUDA graph where ``cuda_graph`` and the task allow), and the checkpoint's deterministic policy, a function of
    the task's observation groups (checked by :func:`checkpoint_refusal`)."""
    from rlscale.rl import load_adapter
    from rlscale.tasks.graph import build_task

    run_args = manifest.args
    task_cfg = {**run_args.env_overrides, **overrides, "device": device}
    task = build_task(run_args.task, cuda_graph=cuda_graph, **task_cfg)
    adapter = cast("EvaluatingAdapter", load_adapter(run_args.rl_library))
    policy = adapter.inference_policy(task, dict(manifest.agent_cfg), checkpoint, device, run_args.ml_framework)
    return task, policy
