"""SLURM's warning signal of a train job, checked against the job's time limit.

The SLURM profile gives train jobs ``--signal=USR1@300`` (their ``slurm_extra``): 300 s before the time limit, every
rank stops at the next iteration boundary with a checkpoint, and the job requeues itself
(:func:`rlscale.study.job_runner.requeue_if_asked`). A time limit no longer than that lead sends the signal as the job
starts: the job would stop and requeue itself again and again, an iteration at a time. The train rules check each
job's ``runtime`` against its ``slurm_extra`` before Snakemake submits any job.
"""

from __future__ import annotations

import math
import re

SIGNAL_OPTION = re.compile(r"--signal[= ]['\"]?(?P<value>(?:[RB]+:)?\w+(?:@(?P<lead>\d+))?)")
"""sbatch's ``--signal=[{R|B}:]<sig_num>[@sig_time]``."""
DEFAULT_LEAD_S = 60
"""sbatch's lead when ``--signal`` names no ``@sig_time``."""
EARLY_BY_S = 60
"""sbatch(1): "the signal may be sent up to 60 seconds earlier than specified"."""


def check_time_limit(rule: str, runtime_min: object, slurm_extra: object) -> None:
    """Refuse a job whose time limit (``runtime``, minutes) does not outlast its warning signal's lead and SLURM's
    60 s resolution: the signal would stop it as it starts.

    Raises:
        ValueError: one line naming the rule, both settings and the shortest runtime that works.
    """
    found = SIGNAL_OPTION.search(str(slurm_extra or ""))
    if found is None or not isinstance(runtime_min, int | float):  # no signal, or a runtime SLURM's default decides
        return
    lead = int(found["lead"]) if found["lead"] is not None else DEFAULT_LEAD_S
    if runtime_min * 60 <= lead + EARLY_BY_S:
        shortest, option = math.floor((lead + EARLY_BY_S) / 60) + 1, f"--signal={found['value']}"
        raise ValueError(
            f"{rule}: runtime={runtime_min:g} minutes is not longer than its warning signal ({option}, sent "
            f"up to {lead + EARLY_BY_S} s before the time limit), so every job would stop and requeue itself as it "
            f"starts; set --set-resources {rule}:runtime={shortest} or more, or a shorter @seconds in its slurm_extra"
        )
