"""How each study stage's jobs hold the host and their GPUs: one :class:`StagePolicy` row per :class:`Stage`.

The table is the one home of this policy. The job lease reads it (:func:`rlscale.study.job_runner.run_leased`: grant
check, host lease, GPU lease), and so do the rules' ``resources.gpu`` (``stage_gpus`` in
``workflow/rules/common.smk``). A new stage that starts ``rlscale`` on leased GPUs is one member and one row.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


class Stage(enum.StrEnum):
    """A study stage whose jobs start ``rlscale`` on leased GPUs (or CPU ranks).

    Its value names its Snakemake rule, or starts the names of its rules: ``benchmark`` and ``benchmark_single_seed``,
    ``evaluate_train`` and ``evaluate_parity``. The job time records name their jobs by it.
    """

    CHECK_TASK = "check_task"
    VALIDATE = "validate"
    PROBE = "probe"
    TRAIN = "train"
    PARITY = "parity"
    BENCHMARK = "benchmark"
    EVALUATE = "evaluate"


@dataclass(frozen=True)
class StagePolicy:
    """How a stage's jobs hold the host and their GPUs, and how many GPUs each needs."""

    shares_gpus: bool
    """Whether its jobs share their GPUs with each other: jobs that time nothing (a contract check, a smoke run, a
    learning curve per env step, an evaluation). On one host they ask Snakemake for no GPU, since the lease shares
    GPUs among them: ``--resources gpu=N`` on an N-GPU host then counts the GPUs held alone and never queues such a
    job behind another. Jobs that time their runs (parity: wall time to a target; benchmarks; the NCCL probe) hold
    their GPUs alone."""
    holds_host_alone: bool
    """Whether its jobs hold the host alone: the jobs that measure speed (the training, runtime and startup
    benchmarks), so that a throughput is never measured beside another job. The others hold it shared."""
    single_device: bool
    """Whether its job runs one process on one device (one GPU, or one CPU core) whatever the study's world sizes;
    else it needs one GPU per rank on its node."""

    def __post_init__(self) -> None:
        if self.holds_host_alone and self.shares_gpus:
            raise ValueError("a stage that holds the host alone measures speed, so it holds its GPUs alone too")

    def requested_gpus(self, needed: int, *, under_slurm: bool) -> int:
        """The ``resources.gpu`` a job of this stage asks Snakemake for, given the GPUs it needs on its node: none when
        it shares them on one host (the lease gives it GPUs to share), else all of them. Under SLURM every job asks
        for its own, since the allocation is the job's."""
        return needed if under_slurm or not self.shares_gpus else 0


STAGE_POLICIES: Mapping[Stage, StagePolicy] = MappingProxyType(
    {
        Stage.CHECK_TASK: StagePolicy(shares_gpus=True, holds_host_alone=False, single_device=True),
        Stage.VALIDATE: StagePolicy(shares_gpus=True, holds_host_alone=False, single_device=True),
        Stage.PROBE: StagePolicy(shares_gpus=False, holds_host_alone=False, single_device=False),
        Stage.TRAIN: StagePolicy(shares_gpus=True, holds_host_alone=False, single_device=False),
        Stage.PARITY: StagePolicy(shares_gpus=False, holds_host_alone=False, single_device=False),
        Stage.BENCHMARK: StagePolicy(shares_gpus=False, holds_host_alone=True, single_device=False),
        Stage.EVALUATE: StagePolicy(shares_gpus=True, holds_host_alone=False, single_device=True),
    }
)
"""Every :class:`Stage`'s policy."""
