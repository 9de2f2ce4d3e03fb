"""``rlscale play``: run a checkpoint's deterministic policy, print each episode that ends, and with ``--video`` film
the first env.

The checkpoint is loaded as ``rlscale evaluate`` loads it (:mod:`rlscale.run.checkpoint_policy`); a velocity task runs
with Isaac Lab's ``_PLAY`` settings (no observation noise, no pushes) and, with ``--command``, one fixed command. The
video (GIF or MP4) is drawn by MuJoCo's renderer (:mod:`rlscale.tasks.mjx.render`) every few policy steps, for a
frame rate near ``--fps``.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

from rlscale.argparsing import OneLineParser
from rlscale.manifest import RunManifest, read_checkpoint_manifest
from rlscale.run.checkpoint_policy import (
    checked_arguments,
    checkpoint_refusal,
    is_velocity_task,
    parse_command,
    task_and_policy,
)
from rlscale.tasks.mjx import CAMERA_VIEWS

DEFAULT_SIZE = (480, 360)
DEFAULT_CAMERA = "quarter"
MAX_SIDE = 4096
PROGRESS_EVERY = 100
"""Policy steps between two progress lines."""
VIDEO_ONLY = ("camera", "size", "fps")


def parse_size(text: str) -> tuple[int, int]:
    """A picture size ``WIDTHxHEIGHT`` (argparse's ``type``)."""
    width, height = (int(value) for value in text.lower().split("x"))
    return width, height


def parser() -> OneLineParser:
    parser = OneLineParser(prog="rlscale play", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="a checkpoint in an rlscale run directory")
    parser.add_argument(
        "--num_envs", type=int, default=1, help="envs played together (default 1; --video films the first)"
    )
    parser.add_argument("--steps", type=int, default=500, help="policy steps (default 500: 10 s of a robot at 50 Hz)")
    parser.add_argument(
        "--command",
        type=parse_command,
        metavar="VX,VY,WZ",
        help="a velocity task's fixed command for every env (default: the task samples commands as in training)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the task's resets (default 0)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--video", type=Path, help="write the first env's video here: .gif or .mp4")
    parser.add_argument(
        "--camera",
        choices=list(CAMERA_VIEWS),
        help=f"where the camera, which tracks the base, looks from (default {DEFAULT_CAMERA}: the base's front right)",
    )
    parser.add_argument(
        "--size",
        type=parse_size,
        metavar="WIDTHxHEIGHT",
        help=f"video size in pixels (default {DEFAULT_SIZE[0]}x{DEFAULT_SIZE[1]})",
    )
    parser.add_argument(
        "--fps",
        type=float,
        help="video frame rate asked for; every k-th policy step is filmed, k the nearest whole number "
        "(default 12 for a GIF, 25 for an MP4)",
    )
    return parser


def main(argv: list[str]) -> int:
    args = checked_arguments(parser(), argv, _refusal)
    play(read_checkpoint_manifest(args.checkpoint), args)
    return 0


def _refusal(args: Any) -> str | None:
    """One line for bad input, before anything is built or written (None when the input is fine)."""
    if args.video is not None:  # first: it chooses MuJoCo's GL backend, which the checks below fix by importing MuJoCo
        bad_video = _video_refusal(args)
        if bad_video:
            return bad_video
    unloadable = checkpoint_refusal(args.checkpoint, "play")
    if unloadable:
        return unloadable
    for name in ("steps", "num_envs"):
        if getattr(args, name) < 1:
            return f"--{name} {getattr(args, name)}: must be at least 1"
    if args.seed < 0:
        return f"--seed {args.seed}: must be >= 0"
    task_id = read_checkpoint_manifest(args.checkpoint).args.task
    if args.command is not None and not is_velocity_task(task_id):
        return f"--command: {task_id} takes no velocity command"
    if args.video is None:
        given = [f"--{name}" for name in VIDEO_ONLY if getattr(args, name) is not None]
        return f"{', '.join(given)}: only with --video" if given else None
    from rlscale.tasks import get_spec
    from rlscale.tasks.physics import MujocoTaskCfg

    if not issubclass(get_spec(task_id).cfg_class, MujocoTaskCfg):
        return f"--video: {task_id} has no MuJoCo model to render (the MuJoCo tasks have one)"
    return None


def _video_refusal(args: Any) -> str | None:
    """What is wrong with ``--video`` and its options (filling in their defaults), or with rendering on this host."""
    from rlscale.run.video import DEFAULT_FPS, gl_refusal, video_refusal

    unwritable = video_refusal(args.video)
    if unwritable:
        return unwritable
    args.camera = args.camera or DEFAULT_CAMERA
    args.size = args.size or DEFAULT_SIZE
    if any(side % 2 or not 16 <= side <= MAX_SIDE for side in args.size):
        return f"--size {args.size[0]}x{args.size[1]}: width and height must be even, from 16 to {MAX_SIDE}"
    if args.fps is None:
        args.fps = DEFAULT_FPS[args.video.suffix.lower()]
    if args.fps <= 0:
        return f"--fps {args.fps:g}: must be positive"
    return gl_refusal()


def play(manifest: RunManifest, args: Any) -> None:
    """Run the policy ``args.steps`` steps; print each episode that ends, and a summary; write the video."""
    import torch

    from rlscale.tasks.locomotion.cfg import EVALUATION_OVERRIDES

    task_id = manifest.args.task
    velocity = is_velocity_task(task_id)
    overrides = (EVALUATION_OVERRIDES if velocity else {}) | {"num_envs": args.num_envs, "seed": args.seed}
    task, policy = task_and_policy(manifest, args.checkpoint, args.device, **overrides)
    commands = None if args.command is None else torch.tensor([args.command] * args.num_envs, device=args.device)
    episodes = EpisodeLog(task.step_dt)
    film = Film(task, args) if args.video is not None else None
    observations, _ = task.reset()
    if commands is not None:
        task.set_commands(commands)
    with torch.inference_mode(), film if film is not None else contextlib.nullcontext():
        if film:
            film.shoot(step=0, new_episode=True)
        for step in range(1, args.steps + 1):
            tracking = task.episode_tracking_errors.clone() if velocity else None  # this step resets the envs that end
            observations, _, terminated, truncated, extras = task.step(policy(observations))
            done = terminated | truncated
            if bool(done.any()):
                episodes.record(done, terminated, extras, tracking)
                if commands is not None:  # a reset env samples a command of its own: give it the fixed one again
                    task.set_commands(commands)
            if film:
                film.shoot(step, new_episode=bool(done[0]))
            if step % PROGRESS_EVERY == 0 or step == args.steps:
                frames = f", {film.frames} frames" if film else ""
                print(f"play: step {step}/{args.steps}{frames}", file=sys.stderr, flush=True)
    task.close()
    print(episodes.summary(args.steps, task.max_episode_length), flush=True)
    if film:
        print(film.report(), flush=True)


class EpisodeLog:
    """The episodes that end: one line each as they end, and a summary."""

    def __init__(self, step_dt: float):
        self.step_dt = step_dt
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.terminated = 0

    def record(self, done, terminated, extras: dict, tracking) -> None:
        for env in done.nonzero().flatten().tolist():
            length, ended = int(extras["episode_length"][env]), bool(terminated[env])
            self.returns.append(float(extras["episode_return"][env]))
            self.lengths.append(length)
            self.terminated += ended
            line = (
                f"episode {len(self.returns)} (env {env}): {length} steps ({length * self.step_dt:.1f} s), "
                f"return {self.returns[-1]:.2f}, {'terminated' if ended else 'timed out'}"
            )
            if tracking is not None:
                line += f", tracking error {float(tracking[env, 0]):.3f} m/s, {float(tracking[env, 1]):.3f} rad/s"
            print(line, flush=True)

    def summary(self, steps: int, episode_steps: int) -> str:
        if not self.returns:
            return f"no episode ended in {steps} steps (an episode lasts at most {episode_steps})"
        count = len(self.returns)
        return (
            f"episodes ended: {count}, {self.terminated} terminated; mean return {sum(self.returns) / count:.2f}, "
            f"mean length {sum(self.lengths) / count:.1f} steps"
        )


class Film:
    """The first env's video: a frame every ``skip`` policy steps, written when the block ends."""

    def __init__(self, task, args: Any):
        from rlscale.run.video import video_file
        from rlscale.tasks.mjx.render import WorldRenderer

        self.task = task
        self.path: Path = args.video
        self.skip = max(1, round(1.0 / (args.fps * task.step_dt)))
        self.fps = 1.0 / (self.skip * task.step_dt)
        self.width, self.height = args.size
        self.renderer = WorldRenderer(task.mjcf, self.width, self.height, args.camera, self.skip * task.step_dt)
        self.file = video_file(self.path, self.fps, self.width, self.height)
        self.frames = 0
        self.reset_since_last_frame = False

    def __enter__(self) -> Film:
        self.add = self.file.__enter__()
        return self

    def __exit__(self, *exc_info) -> bool | None:
        self.renderer.close()
        return self.file.__exit__(*exc_info)

    def shoot(self, step: int, new_episode: bool) -> None:
        """Film the first env after policy step ``step`` when it is due (``new_episode``: it has just reset)."""
        self.reset_since_last_frame |= new_episode
        if step % self.skip:
            return
        qpos = self.task.qpos[0].cpu().numpy()
        self.add(self.renderer.frame(qpos, new_episode=self.reset_since_last_frame))
        self.frames += 1
        self.reset_since_last_frame = False

    def report(self) -> str:
        size = self.path.stat().st_size
        return (
            f"wrote {self.path}: {self.frames} frames, {self.width}x{self.height}, {self.fps:.3g} fps "
            f"({self.frames / self.fps:.1f} s), {size / 1e6:.2f} MB"
        )
