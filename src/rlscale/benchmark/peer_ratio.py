"""``rlscale benchmark training --peer``: the library's plain script first, then rlscale, side by side in one bundle.

The peer (:mod:`rlscale.benchmark.peer`) gets the same task, ``--num_envs``, ``--max_iterations``, ``--seed``,
``--no_cuda_graph`` and device and, under ``training_multigpu``, the same torchrun geometry, and runs supervised like
rlscale's own ranks, so no process of it can outlive the benchmark. Its result file reaches rlscale's ranks as the
hidden ``--peer_result``; global rank 0 checks that the peer ran the same workload with the same CUDA-graph setting
and adds ``runtime.peer`` to the bundle, with the env step each side ended up using.

Launcher side and rank side alike, nothing here imports torch.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from rlscale.benchmark.peer import PEER_SCRIPTS
from rlscale.benchmark.stats import mean_std, median_rate, rate_stats
from rlscale.launch.command import LauncherCfg, build_launch_command
from rlscale.run.spec import RunSpec

MIRRORED = ("task", "num_envs", "max_iterations", "seed")
"""rlscale options passed on to the peer as given; left out, the peer resolves the same defaults from the same
task and agent config (rank 0 checks that it did)."""
MIRRORED_FLAGS = ("no_cuda_graph",)
"""rlscale flags passed on to the peer when set: the env step must be the same on both sides."""

NOT_MIRRORED = {
    "agent": "--agent: the peer trains with the task's agent config as shipped",
    "resume": "--resume: the peer trains from scratch",
    "sync_check_interval": "--sync_check_interval: the rank-sync audit adds rlscale-only work to the timed iterations",
    "lr_scaling": "--lr_scaling: the peer trains with the agent config's learning rate, unscaled",
    "normalizer_sync": "--sync_normalizer: the peer keeps each rank's normalizer statistics its own",
    "tf32": "--tf32: the peer trains with torch's default float32 precision",
    "logger": "--logger: a tracker run adds rlscale-only work to the timed iterations",
}
"""rlscale options (by their ``dest``) the peer cannot mirror; ``--peer`` refuses any of them set to other than its
default, with the reason."""


class PeerMismatch(ValueError):
    """The peer's result does not describe the workload rlscale is about to measure, or is missing."""


def peer_argv(spec: RunSpec, result: Path) -> list[str]:
    """The peer script's arguments for rlscale's ``spec``; ``--device cuda:N`` becomes ``cuda`` (the peer, as
    rlscale's ranks, puts local rank r on ``cuda:r``)."""
    argv = []
    for name in MIRRORED:
        if getattr(spec, name) is not None:
            argv += [f"--{name}", str(getattr(spec, name))]
    argv += [f"--{flag}" for flag in MIRRORED_FLAGS if getattr(spec, flag)]
    if spec.device is not None:
        argv += ["--device", spec.device.kind]
    return [*argv, "--output", str(result)]


def single_process_command(spec: RunSpec, result: Path) -> list[str]:
    """``python peer_<library>.py ...``: the peer of ``rlscale benchmark training``."""
    return [sys.executable, PEER_SCRIPTS[spec.rl_library], *peer_argv(spec, result)]


def torchrun_command(launcher_args: argparse.Namespace, spec: RunSpec, result: Path) -> list[str]:
    """``torchrun ... peer_<library>.py ...`` with the launcher's own geometry: the peer of ``training_multigpu``.

    Built by the launcher's resolver (nproc, nnodes, node rank, master or rendezvous settings, torchrun options), so
    the two jobs differ only in the script. A given ``--rdzv_id`` gets ``-peer`` appended: the two jobs run one after
    the other and must not share a rendezvous.
    """
    cfg = LauncherCfg(
        prog="rlscale benchmark training_multigpu --peer",
        description="peer baseline",
        worker_script=PEER_SCRIPTS[launcher_args.rl_library],
        worker_flags=(),
    )
    geometry = copy.copy(launcher_args)
    if geometry.rdzv_id is not None:
        geometry.rdzv_id = f"{geometry.rdzv_id}-peer"
    return build_launch_command(geometry, peer_argv(spec, result), cfg, os.environ)


def run_peer_first(library: str, command: Callable[[Path], list[str]], measure: Callable[[Path], int]) -> int:
    """Run the peer supervised, then ``measure(result file)``; a failed peer fails the benchmark, naming the peer.

    Args:
        library: The library whose peer runs.
        command: The peer's command for a given result file.
        measure: rlscale's own measurement, given the peer's result file.

    Returns:
        The peer's exit code if it failed, else ``measure``'s.
    """
    from rlscale.launch.supervise import run_supervised

    with tempfile.TemporaryDirectory(prefix="rlscale-peer-") as folder:
        result = Path(folder, "peer.json")
        argv = command(result)
        print(f"[INFO] Peer baseline (plain {library}) first: {shlex.join(argv)}", file=sys.stderr, flush=True)
        code = run_supervised(argv)
        if code != 0:
            print(
                f"[ERROR] peer baseline {Path(PEER_SCRIPTS[library]).name} (plain {library}) failed with exit code "
                f"{code}; rlscale's own measurement was not run",
                file=sys.stderr,
                flush=True,
            )
            return code
        return measure(result)


def dry_run_result() -> Path:
    """Where a ``--dry_run`` says the peer's result would go (the folder is made only at launch)."""
    return Path(tempfile.gettempdir(), "rlscale-peer-XXXXXXXX", "peer.json")


def load_peer_result(path: Path, expected: dict) -> dict:
    """Read the peer's result and check it ran ``expected`` (library, task, device, seed, world size, envs per rank,
    iterations, global steps per iteration, CUDA-graph setting) to the end.

    Raises:
        PeerMismatch: naming the file or the first field that differs.
    """
    try:
        peer = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise PeerMismatch(
            f"no peer result at {path} on this node: the peer's global rank 0 ran elsewhere (only a static "
            "--master_addr rendezvous places both jobs' rank 0 on node 0) or wrote nothing"
        ) from None
    except (OSError, ValueError) as error:
        raise PeerMismatch(f"peer result {path} is unreadable: {error}") from None
    for key, value in expected.items():
        if peer.get(key) != value:
            raise PeerMismatch(f"the peer ran {key}={peer.get(key)!r} but rlscale runs {key}={value!r}")
    timed = len(peer.get("iteration_s", ()))
    if timed != expected["max_iterations"]:
        raise PeerMismatch(f"the peer timed {timed} of its {expected['max_iterations']} iterations")
    return peer


def peer_section(peer: dict, rlscale_iteration_s: list[float], warmup: int, rlscale_env_step: str | None) -> dict:
    """``runtime.peer``: the peer's figures as ``runtime``'s (first ``warmup`` iterations left out) and the ratio.

    The ratio compares medians of the per-iteration global rates, which one slow iteration (a collection, a page
    fault) moves less than the effective rate; both sides have the same steps per iteration. Both sides built their
    task with the same CUDA-graph setting (:func:`load_peer_result`); should the capture have failed on one side
    only, their env steps differ and the ratio, which would then mix the graph's gain into rlscale's overhead, is
    null.

    Args:
        peer: The peer's result, from :func:`load_peer_result`.
        rlscale_iteration_s: rlscale's iteration times, warm-up included.
        warmup: Iterations left out on both sides.
        rlscale_env_step: ``cuda_graph`` or ``eager`` (:func:`rlscale.tasks.graph.env_step_of`); None if rlscale's
            run ended before its task existed.
    """
    steps = peer["steps_per_iteration"]
    measured = peer["iteration_s"][warmup:]
    peer_median = median_rate(steps, measured)
    rlscale_median = median_rate(steps, rlscale_iteration_s[warmup:])
    like_for_like = rlscale_env_step == peer["env_step"]
    return {
        "library": peer["library"],
        "env_step": peer["env_step"],
        "rlscale_env_step": rlscale_env_step,
        "iterations_completed": len(peer["iteration_s"]),
        "iteration_time_s": mean_std(measured),
        "total_fps": rate_stats(steps, measured),
        "total_fps_median": peer_median,
        "rlscale_total_fps_median": rlscale_median,
        "ratio_total_fps_median": (
            rlscale_median / peer_median if rlscale_median and peer_median and like_for_like else None
        ),
        "iteration_s_per_iter": peer["iteration_s"],
        "total_wall_time_s": peer["train_s"],
        "process_wall_time_s": peer["process_wall_time_s"],
    }
