"""The experiment tracker beside TensorBoard (``--logger wandb``): the run global rank 0 opens, and how it ends.

TensorBoard is always written, by each library's own writer. With W&B, only global rank 0 has a
:class:`TrackerRun`; its adapter opens the W&B run once the library has formed the process group (rsl_rl's and skrl's
own W&B support, or rlscale for rl_games, which has none), and :func:`finish_run` ends it. Other ranks never import
wandb. Torch-free, and wandb is imported only where a run opens or ends.
"""

from __future__ import annotations

import importlib.util
import secrets
import string
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlscale.dist import RankInfo

LOGGERS = ("tensorboard", "wandb")
"""``--logger`` values: TensorBoard alone, or W&B beside it."""

DEFAULT_PROJECT = "rlscale"
"""The tracker project of a run that names none (``--log_project_name``)."""

EXTRAS = {"wandb": ("wandb", "rlscale[wandb]")}
"""A tracker → the module of its client and the extra that installs it."""

PROJECT_FORBIDDEN = set("/\\#?%:")
"""Characters W&B refuses in a project name."""


def missing_client(logger: str) -> str | None:
    """The extra to install for ``logger`` when its client cannot be imported here; None when it can (or needs none).

    Looked up without importing it, so that a launcher checks its ranks' option cheaply.
    """
    if logger not in EXTRAS:
        return None
    module, extra = EXTRAS[logger]
    return extra if importlib.util.find_spec(module) is None else None


def keep_client_off(rank: RankInfo, logger: str) -> None:
    """On any rank but global rank 0, make importing ``logger``'s client fail, so that the rank never imports it:
    rsl_rl imports wandb along with its logger whenever it is installed (and does without it)."""
    if not rank.is_main and logger in EXTRAS:
        sys.modules.setdefault(EXTRAS[logger][0], None)


def new_run_id() -> str:
    """A fresh tracker run id, as W&B makes them (8 characters of lowercase letters and digits)."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


@dataclass(frozen=True)
class TrackerRun:
    """The W&B run of one training run, as global rank 0 opens it.

    A resumed run has the id of the run it continues, so that the tracker continues it too.
    """

    project: str
    run_id: str
    name: str
    """The cell: task, library, world size, envs per rank and seed."""
    group: str | None
    """The study that made the run (None: a run of its own)."""
    job_type: str
    """The stage: ``train``, ``benchmark`` or ``parity``."""
    directory: Path
    """Where W&B writes its run folder (``wandb/`` in it): the run directory."""
    config: dict[str, Any] = field(default_factory=dict)
    """The cell as values: task, rl_library, ml_framework, world_size, num_envs_per_rank, seed."""

    def init_kwargs(self) -> dict[str, Any]:
        """The arguments of ``wandb.init`` that open (or, with a known id, continue) this run."""
        return {
            "project": self.project,
            "id": self.run_id,
            "resume": "allow",
            "name": self.name,
            "group": self.group,
            "job_type": self.job_type,
            "config": dict(self.config),
            "dir": str(self.directory),
        }

    def record(self) -> dict[str, Any]:
        """What the manifest keeps of it."""
        return {"logger": "wandb", "project": self.project, "id": self.run_id, "name": self.name}


def start_run(run: TrackerRun) -> None:
    """Open ``run`` with rlscale's own ``wandb.init`` (for a library without W&B support), syncing the scalars of the
    TensorBoard writers made after it."""
    import wandb

    sync_tensorboard_scalars()
    wandb.init(**run.init_kwargs(), sync_tensorboard=True)


def sync_tensorboard_scalars() -> None:
    """Make the W&B run that opens next read the scalars of each TensorBoard writer made after it, leaving the event
    files where they are.

    W&B's own sync (``sync_tensorboard=True`` alone) also links each event file into its run folder, under the path of
    the writer's log directory. That folder lies in the run directory, which is, or holds, the log directory; W&B's
    watcher then finds its own links as new event files and links them again, one level deeper each time, until the
    paths outgrow the file system's limit. TensorBoard, pointed at the log root, would also show each run twice.
    """
    import wandb

    if not wandb.patched["tensorboard"]:  # wandb.init patches no further once patched
        wandb.tensorboard.patch(save=False)


def finish_run(exit_code: int) -> None:
    """End this process's W&B run, if one is open: exit code 0 marks it finished, any other failed.

    A no-op where wandb was never imported or the library already ended the run (rsl_rl does when it completes).
    """
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish(exit_code=exit_code)
