"""Where a run starts: its directory, the checkpoint it continues from, and its base seed."""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path

from rlscale.dist import RUN_TIMESTAMP_ENV, Attempt, RankInfo
from rlscale.manifest import MANIFEST_NAME, Continued, continued_run, run_directory_of, tracker_id_of
from rlscale.resume import AUTO, ELASTIC_OPTION, continuation_changes, newest_loadable, run_to_continue
from rlscale.rl import LIBRARIES
from rlscale.rl.tracking import DEFAULT_PROJECT, TrackerRun, new_run_id
from rlscale.run.spec import RunSpec


def run_directory(spec: RunSpec) -> Path:
    """``<log_root>/<rl_library>/<task>/<timestamp>[_<run_name>]``, rank 0's; other ranks write in its ``rank_<r>/``.

    With ``--resume auto`` it is the directory of the run it continues (:func:`rlscale.resume.run_to_continue`), if
    any, so that a rerun goes on in place: its checkpoints, TensorBoard events and console log in the same directory.
    Resolving the spec refused a run of this name with another task, library or ML framework.

    A worker group that torchrun restarts names its failed attempt's directory: the launcher's timestamp
    (:data:`~rlscale.dist.RUN_TIMESTAMP_ENV`) holds for every attempt, and the failed attempt's rank 0 wrote the latest
    manifest that ``--resume auto`` looks for.
    """
    if spec.resume == AUTO and (continued := run_to_continue(Path(spec.log_root), spec.identity)) is not None:
        return continued
    stamp = os.environ.get(RUN_TIMESTAMP_ENV) or datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return Path(spec.log_root, spec.rl_library, spec.task, f"{stamp}_{spec.run_name}" if spec.run_name else stamp)


def continues_in_place(spec: RunSpec, attempt: Attempt) -> bool:
    """Whether this invocation goes on with the record of the run in its directory (its checkpoints, segments,
    iterations and tracker run): with ``--resume auto``, and in a worker group that torchrun restarted, which goes on
    with the directory its failed attempt began."""
    return spec.resume == AUTO or attempt.restarted


def starting_point(
    spec: RunSpec, adapter, run_dir: Path, iterations: int, attempt: Attempt, report: bool
) -> tuple[Path | None, int, int]:
    """The checkpoint this invocation starts from, the iterations it had finished and the iterations left to train.

    ``--resume auto`` and a restarted worker group (:func:`continues_in_place`) take the newest loadable checkpoint in
    ``run_dir`` (:func:`auto_resume`); a restart that finds none starts over as its first attempt did, from
    ``--resume``'s checkpoint or from scratch.

    Args:
        spec: The run's spec.
        adapter: The library's adapter.
        run_dir: Rank 0's run directory.
        iterations: ``--max_iterations`` or the agent config's: with ``--resume auto`` the run's total, otherwise the
            iterations to train after ``--resume``'s checkpoint.
        attempt: This worker group's attempt.
        report: Say where it starts, in one line (rank 0 only, so that a job says it once).
    """
    given = spec.resume_path
    first = adapter.checkpoint_iteration(given, spec.agent_cfg) if given else 0
    if not continues_in_place(spec, attempt):
        return given, first, iterations
    total = first + iterations
    label = f"{attempt.describe()} after a failed rank" if attempt.restarted else "--resume auto"
    cfg, framework = spec.agent_cfg, spec.ml_framework
    checkpoint, start = auto_resume(adapter, run_dir, cfg, framework, total, label if report else None)
    if report:
        if checkpoint is not None:
            found = f"continuing from {checkpoint.name} ({start}/{total})"
        elif attempt.restarted:
            found = "no checkpoint written yet, starting over" + (f" from {given}" if given else "")
        else:
            found = "starting from scratch"
        print(f"[rlscale] {label}: {found} in {run_dir}", flush=True)
    if checkpoint is None:
        checkpoint, start = given, first
    return checkpoint, start, total - start


def auto_resume(
    adapter, run_dir: Path, agent_cfg: dict, ml_framework: str, total: int, report: str | None
) -> tuple[Path | None, int]:
    """The newest checkpoint in ``run_dir`` that loads and leaves iterations to train.

    Args:
        adapter: The library's adapter, which knows where its checkpoints are.
        run_dir: Rank 0's run directory, which holds the checkpoints.
        agent_cfg: The agent config.
        ml_framework: torch or jax.
        total: The run's total iterations.
        report: What its line for each checkpoint it skips begins with (rank 0 only, so that a job says it once);
            None: print nothing.

    Returns:
        The checkpoint (None: there is none) and the iterations it had finished.
    """

    def skipped(path: Path, error: ValueError) -> None:
        if report:
            cause = error.__cause__ or error
            reason = next(iter(str(cause).splitlines()), "")  # torch's weights-only errors run to many lines
            why = f"it cannot be loaded ({type(cause).__name__}: {reason})"
            print(f"[rlscale] {report}: skipping {path}, {why}", file=sys.stderr)

    candidates = adapter.find_checkpoints(run_dir, agent_cfg, ml_framework)
    checkpoint = newest_loadable(candidates, ml_framework, total, skipped)
    return checkpoint, adapter.checkpoint_iteration(checkpoint, agent_cfg) if checkpoint else 0


def continued_record(spec: RunSpec, attempt: Attempt, manifest: Path, start: int) -> Continued:
    """What this invocation keeps of its rank's ``manifest``: the segments and the iterations before ``start`` of a run
    it continues in place (:func:`continues_in_place`), a failed attempt's segment marked crashed; nothing otherwise.
    Each rank keeps those of the invocations it ran in."""
    if not continues_in_place(spec, attempt):
        return Continued()
    continued = continued_run(manifest, start)
    return continued.after_a_failure() if attempt.restarted else continued


def check_continuation(spec: RunSpec, rank: RankInfo, run_dir: Path) -> None:
    """Before a ``--resume auto`` rank rewrites the manifest in ``run_dir``: refuse a continuation that changes how the
    run learns unless it is elastic (the launcher refused it already where it knew the world size), and say what it
    changes or how it splits the run otherwise (global rank 0)."""
    if spec.resume != AUTO or not (run_dir / MANIFEST_NAME).is_file():
        return
    now = spec.shape(rank.world_size)
    found = continuation_changes(run_dir, now, spec.resume_elastic)
    if found is None or not rank.is_main:
        return
    before, changes = found
    if changes:
        print(f"[rlscale] --resume auto ({ELASTIC_OPTION}): changing {'; and '.join(changes)}", flush=True)
    elif before.describe() != now.describe():
        print(
            f"[rlscale] --resume auto: continuing on {now.describe()}; the previous invocation ran {before.describe()}",
            flush=True,
        )


def resolve_seed(spec: RunSpec) -> int:
    """The base seed: ``--seed``, else the agent config's, where its library's record says (``Library.seed_key``)."""
    if spec.seed is not None:
        return spec.seed
    return LIBRARIES[spec.rl_library].seed(spec.agent_cfg)


def tracker_run(spec: RunSpec, rank: RankInfo, run_dir: Path, seed: int, attempt: Attempt) -> TrackerRun | None:
    """The tracker run this rank opens: global rank 0's with ``--logger wandb``, none on any other rank or without.

    Named and configured after the cell. A resumed run continues the tracker run that the manifest of the run it
    continues names: with ``--resume auto`` or after a restart the one in ``run_dir``, with a checkpoint the run
    directory's that holds it (rl_games and skrl keep theirs one folder down).
    """
    if spec.logger == "tensorboard" or not rank.is_main:
        return None
    if continues_in_place(spec, attempt):
        continued = tracker_id_of(run_dir / MANIFEST_NAME)
    elif spec.resume_path is not None and (folder := run_directory_of(spec.resume_path)) is not None:
        continued = tracker_id_of(folder / MANIFEST_NAME)
    else:
        continued = None
    library = spec.rl_library if spec.ml_framework == "torch" else f"{spec.rl_library}_{spec.ml_framework}"
    cell = {
        "task": spec.task,
        "rl_library": spec.rl_library,
        "ml_framework": spec.ml_framework,
        "world_size": rank.world_size,
        "num_envs_per_rank": spec.num_envs,
        "seed": seed,
    }
    return TrackerRun(
        project=spec.log_project_name or DEFAULT_PROJECT,
        run_id=continued or new_run_id(),
        name=f"{spec.task}_{library}_ws{rank.world_size}_envs{spec.num_envs}_seed{seed}",
        group=spec.log_group,
        job_type=spec.log_job_type,
        directory=run_dir,
        config=cell,
    )
