"""``rlscale train --resume auto``: which run directory to continue, and from which of its checkpoints.

A run under a log root is named by its ``--run_name`` (or by having none) and by the kind of command that made it;
``--resume auto`` continues the latest such run, and only with the task, library and ML framework it ran with. Where
a library keeps its checkpoints, and which iteration each holds, is its adapter's business (``find_checkpoints``);
this module only chooses among what the adapter found.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlscale.dist import Attempt
from rlscale.manifest import MANIFEST_NAME, InvalidManifest, RunArgs, RunManifest, read_manifest

AUTO = "auto"
"""The ``--resume`` value that continues the latest run in place."""

MUST_MATCH = {"task": "--task", "rl_library": "--rl_library", "ml_framework": "--ml_framework"}
"""What a continuation must share with the run it continues → the option that sets it."""

ELASTIC_OPTION = "--resume_elastic"
"""The option that continues a run at another :class:`TrainingShape` on purpose."""


@dataclass(frozen=True)
class TrainingShape:
    """How a run's invocation trains, beyond its task and library.

    The global batch is ``world_size × num_envs_per_rank`` envs' steps per iteration (the ranks average their
    gradients, so the split among ranks does not change the update), and ``lr_scaling`` makes the learning rate a
    function of the world size.
    """

    world_size: int
    num_envs_per_rank: int | None
    lr_scaling: str
    normalizer_sync: bool

    @property
    def global_envs(self) -> int | None:
        return None if self.num_envs_per_rank is None else self.world_size * self.num_envs_per_rank

    def describe(self) -> str:
        return f"{self.world_size} rank(s) x {self.num_envs_per_rank} envs"

    def changes_to(self, now: TrainingShape) -> list[str]:
        """What a continuation from this shape at ``now`` would change of how the run learns, each as a phrase; empty:
        the same global batch, learning rate and normalizers (another split among ranks is not a change)."""
        changes = []
        if self.global_envs is None or self.global_envs != now.global_envs:
            changes.append(
                f"the global batch from {self.describe()} ({self.global_envs or '?'}) to {now.describe()} "
                f"({now.global_envs})"
            )
        if self.lr_scaling != now.lr_scaling:
            changes.append(f"--lr_scaling from {self.lr_scaling} to {now.lr_scaling}")
        elif self.lr_scaling != "none" and self.world_size != now.world_size:
            changes.append(
                f"the learning rate, which --lr_scaling {self.lr_scaling} scales from {self.world_size} to "
                f"{now.world_size} rank(s)"
            )
        if self.normalizer_sync != now.normalizer_sync:
            changes.append(f"--sync_normalizer from {_on_off(self.normalizer_sync)} to {_on_off(now.normalizer_sync)}")
        return changes


def shape_to_keep(manifest: RunManifest) -> TrainingShape | None:
    """The shape of a run's last invocation, as its manifest records it (an older one without segments: its
    arguments); None when the run finished no iteration, so that a continuation starts it afresh whatever its shape."""
    trained = any(segment.last_iteration is not None for segment in manifest.segments)
    if not (trained or manifest.iterations_completed):
        return None
    last = manifest.segments[-1] if manifest.segments else None
    return TrainingShape(
        world_size=last.world_size if last else manifest.world_size,
        num_envs_per_rank=last.num_envs_per_rank if last else manifest.num_envs,
        lr_scaling=manifest.args.lr_scaling,
        normalizer_sync=manifest.args.normalizer_sync,
    )


def _on_off(flag: bool) -> str:
    return "on" if flag else "off"


def continuation_changes(directory: Path, now: TrainingShape, elastic: bool) -> tuple[TrainingShape, list[str]] | None:
    """What continuing the run in ``directory`` at ``now`` changes (:meth:`TrainingShape.changes_to`), with the shape
    of its last invocation; None when it finished no iteration (:func:`shape_to_keep`).

    Raises:
        ValueError: when it changes something and the continuation is not elastic (:data:`ELASTIC_OPTION`), naming
            each change, and how to keep the shape or change it on purpose; :class:`InvalidManifest` for a manifest
            that cannot be read.
    """
    before = shape_to_keep(read_manifest(directory / MANIFEST_NAME))
    if before is None:
        return None
    changes = before.changes_to(now)
    if changes and not elastic:
        raise ValueError(
            f"--resume auto: continuing {directory} would change {'; and '.join(changes)}; continue it as it ran "
            f"(a split of {before.global_envs or '?'} envs among the ranks keeps the global batch), or pass "
            f"{ELASTIC_OPTION} to change it on purpose"
        )
    return before, changes


def continue_command(program: str, argv: Sequence[str]) -> str:
    """The command line that continues, in place, a run that ``PROGRAM ARGV`` (``rlscale train``, say) started or
    continued: the same arguments with ``--resume auto`` instead of any other ``--resume``."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--resume":
            skip = True
        elif not arg.startswith("--resume="):
            kept.append(arg)
    return shlex.join([*program.split(), *kept, "--resume", AUTO])


def why_segment_began(first_iteration: int, attempt: Attempt, environ: Mapping[str, str]) -> str:
    """Why an invocation starting at ``first_iteration`` began (:data:`rlscale.manifest.SEGMENT_CAUSES`): a restarted
    worker group's ``attempt``, or a job that SLURM counts as requeued in its environment; otherwise a checkpoint to
    start from makes it a resume."""
    if attempt.restarted:
        return "restart"
    if int(environ.get("SLURM_RESTART_COUNT") or 0) > 0:
        return "requeue"
    return "resume" if first_iteration > 0 else "start"


@dataclass(frozen=True)
class RunIdentity:
    """What ``--resume auto`` compares between the command line and a run, as a run's manifest ``args`` record it."""

    command: str
    """The command that made the run (``rlscale train``, ``rlscale benchmark training_multigpu``...)."""
    run_name: str | None
    task: str
    rl_library: str
    ml_framework: str

    @classmethod
    def recorded(cls, args: RunArgs) -> RunIdentity | None:
        """The identity a manifest's ``args`` record; None where they name no command (an older manifest's)."""
        if args.command is None:
            return None
        return cls(args.command, args.run_name, args.task, args.rl_library, args.ml_framework)

    @property
    def kind(self) -> str:
        """Commands whose runs continue one another: a command and its ``_multigpu`` form, so that a run may go on at
        another world size; each benchmark workflow is a kind of its own."""
        return self.command.removesuffix("_multigpu")

    def describe(self) -> str:
        return f"run {self.run_name!r}" if self.run_name is not None else "the unnamed run"


def latest_run(log_root: Path, asked: RunIdentity) -> tuple[Path, RunIdentity] | None:
    """The run directory under ``log_root`` (``<rl_library>/<task>/<run>/``) of ``asked``'s ``--run_name`` (None:
    among the unnamed runs) and command kind whose rank-0 manifest was written last, with the identity it records;
    None if there is none.

    Every rank of a job picks the same one: the directory a rank-0 rerun writes to stays the latest.
    """
    written = []
    for manifest in log_root.glob(f"*/*/*/{MANIFEST_NAME}"):
        with contextlib.suppress(OSError):  # taken back by its run meanwhile
            written.append((manifest.stat().st_mtime, manifest))
    for _, manifest in sorted(written, reverse=True):
        try:
            recorded = RunIdentity.recorded(read_manifest(manifest).args)
        except InvalidManifest:  # not an rlscale run directory, or taken back by its run meanwhile
            continue
        if recorded is not None and (recorded.run_name, recorded.kind) == (asked.run_name, asked.kind):
            return manifest.parent, recorded
    return None


def run_to_continue(log_root: Path, asked: RunIdentity) -> Path | None:
    """The directory ``--resume auto`` continues (:func:`latest_run`); None: the run is a new one.

    Raises:
        ValueError: when that run's task, library or ML framework is not ``asked``'s, naming the option, both values
            and the fix.
    """
    found = latest_run(log_root, asked)
    if found is None:
        return None
    directory, recorded = found
    for name, option in MUST_MATCH.items():
        if getattr(recorded, name) != getattr(asked, name):
            name_it = "another --run_name" if asked.run_name is not None else "--run_name NAME"
            raise ValueError(
                f"--resume auto: {recorded.describe()} under {log_root} ({directory}) ran with {option} "
                f"{getattr(recorded, name)}, not {getattr(asked, name)}; pass {name_it} to start a new run, "
                "or drop --resume"
            )
    return directory


def start_over_note(log_root: Path, asked: RunIdentity, program: str, argv: Sequence[str]) -> str | None:
    """The line a run without ``--resume`` prints when it starts over although the latest run of its name and kind
    (:func:`latest_run`), of the same task, library and ML framework, stopped early (interrupted or crashed) after
    finishing an iteration; None otherwise."""
    found = latest_run(log_root, asked)
    if found is None or any(getattr(found[1], name) != getattr(asked, name) for name in MUST_MATCH):
        return None
    directory = found[0]
    with contextlib.suppress(InvalidManifest):
        manifest = read_manifest(directory / MANIFEST_NAME)
        last = max(
            (segment.last_iteration for segment in manifest.segments if segment.last_iteration is not None),
            default=None,
        )
        if manifest.status in ("interrupted", "crashed") and last is not None:
            return (
                f"[rlscale] starting a new run: {asked.describe()}'s latest, {directory}, {manifest.status} after "
                f"iteration {last + 1}; to continue it instead: {continue_command(program, argv)}"
            )
    return None


def newest_loadable(
    candidates: Iterable[tuple[int, Path]],
    ml_framework: str,
    below: int,
    skipped: Callable[[Path, ValueError], None],
) -> Path | None:
    """The checkpoint with the most finished iterations, fewer than ``below``, that loads as weights only.

    A checkpoint at ``below`` or beyond leaves nothing to train towards a total of ``below``; one that does not load
    (damaged, or a write cut short outside rlscale's atomic saves) is reported to ``skipped`` and passed over.

    Args:
        candidates: (iterations finished, path) pairs from the adapter's ``find_checkpoints``.
        ml_framework: torch or jax, for the weights-only check.
        below: The run's total iterations.
        skipped: Called with each checkpoint that is passed over as unloadable, and why.
    """
    from rlscale.rl.common import check_weights_only

    for iterations, path in sorted(candidates, reverse=True):
        if iterations >= below:
            continue
        try:
            check_weights_only(path, ml_framework)
        except ValueError as error:
            skipped(path, error)
            continue
        return path
    return None
