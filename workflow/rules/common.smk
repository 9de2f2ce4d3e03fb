# The study's wiring: the config resolved and checked, the plan made from it, and the functions that map a rule's
# wildcards to its job (rlscale.study.plan). Every job is built there, every path is rlscale.study.paths'; a rule
# hands its job's record to `python -m rlscale.study run`, which builds the command from it.
import os
import re
import sys

# Snakemake's logger and WorkflowError: used directly, as workflows do (rlscale.study.snakemake_internals says why).
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

from rlscale.study import paths
from rlscale.study.config import StudyConfigError
from rlscale.study.paths import JobKind
from rlscale.study.plan import ENV_ONLY, StudyPlan
from rlscale.study.stage_policy import STAGE_POLICIES
from rlscale.study.time_left import report_time_left
from rlscale.study.warning_signal import check_time_limit
from rlscale.study.workflow_setup import job_environment, resolved_study

# The config, resolved and checked (a bad one is one line naming the key); rules read STUDY and PLAN.
try:
    STUDY = resolved_study(workflow, config, sys.argv, logger.info)
except StudyConfigError as error:
    raise WorkflowError(str(error))
# Under each progress line, an estimate of the time left (rlscale.study.time_left).
report_time_left()
os.environ.update(job_environment(STUDY, os.environ))
PLAN = StudyPlan(STUDY)
UNDER_SLURM = STUDY["cluster"] == "slurm"
LIBRARIES = [library.name for library in PLAN.config.libraries]
WORLD_SIZES = list(PLAN.config.world_sizes)
MULTI_NODE = [size for size in WORLD_SIZES if PLAN.config.nodes(size) > 1]
SINGLE_NODE = [size for size in WORLD_SIZES if size not in MULTI_NODE]


# The rules run this interpreter (the venv's, whatever PATH holds). Shell commands name it through a global, not
# params: Snakemake reruns a job whose params changed, but its code trigger compares the unformatted command, so a
# venv made anew or a checkout moved leaves finished jobs finished.
PYTHON = sys.executable


def one_of(values):
    """Wildcard regex matching exactly one of values (none at all for an empty list)."""
    return "|".join(re.escape(str(value)) for value in values) or "(?!)"


wildcard_constraints:
    study=re.escape(STUDY["study"]),
    task=one_of(STUDY["tasks"]),
    library=one_of(LIBRARIES),
    ws=r"\d+",
    envs=r"\d+",
    seed=r"\d+",


def get_final_output():
    """The aggregate rule's outputs: everything else is upstream of them."""
    return [
        f"{paths.RESULTS}/{name}".format(study=STUDY["study"])
        for name in paths.AGGREGATES
    ]


# --- A rule's job ------------------------------------------------------------------------------------------------


def job_of(kind):
    """The params.job function of the rules of a kind (JobKind): their job's record (JSON), from the plan."""

    def record(wildcards):
        return PLAN.job(kind, wildcards).to_json()

    return record


def gpus_of(kind):
    """The resources.gpu function of the rules of a kind (JobKind), what each job needs, or none where its stage
    shares GPUs on one host (rlscale.study.stage_policy, which the job's lease reads too).
    """

    def requested(wildcards):
        job = PLAN.job(kind, wildcards)
        return STAGE_POLICIES[job.stage].requested_gpus(
            job.gpus, under_slurm=UNDER_SLURM
        )

    return requested


def grant(wildcards, resources):
    """The launcher's check of a single-node job: the GPUs Snakemake granted it (it shrinks a request to the
    --resources limit silently; the job refuses a grant other than its need)."""
    return f"--granted_gpus {resources.gpu}"


def time_limit_of(rule):
    """The params.time_limit function of a train rule, which refuses, before any job is submitted, jobs whose warning
    signal (slurm_extra's --signal) would come as they start (rlscale.study.warning_signal). Its value is always '',
    which the rule's launcher or grant param holds already: Snakemake reruns a job whose set of param values changed,
    and neither this check nor a new time limit may rerun a finished train run.
    """

    def checked(wildcards, resources):
        runtime, extra = resources.get("runtime"), resources.get("slurm_extra")
        try:
            check_time_limit(rule, runtime, extra)
        except ValueError as error:
            raise WorkflowError(f"config: {error}")
        return ""

    return checked


def rank_threads(wildcards):
    """One core per rank: CPU ranks use one thread each, GPU ranks at least one to feed their GPU."""
    return int(wildcards.ws)


def node_count(wildcards):
    """Nodes a multi-node job spans (also its srun task count: one launcher per node)."""
    return PLAN.config.nodes(int(wildcards.ws))


def srun(wildcards, threads, resources):
    """The prefix of a multi-node job's command: one srun task (launcher) per node. srun names its node and task
    counts: the SLURM executor's job step drops SLURM_NNODES and SLURM_NTASKS from the job's environment, and a bare
    srun then starts one task on one node."""
    nodes = node_count(wildcards)
    return (
        f"{resources.mpi} --ntasks-per-node=1 --cpus-per-task={threads} --gres={resources.gres} "
        f"--nodes={nodes} --ntasks={nodes} "
    )


MULTI_NODE_RESOURCES = dict(
    nodes=node_count,
    tasks=node_count,
    mpi="srun",
    gres=f"gpu:{STUDY['gpus_per_node']}",  # per node (--gpus would be the job's total)
    tasks_per_gpu=0,
)
"""Resources of a multi-node twin: one launcher task per node, with the node's GPUs."""


# --- Inputs ------------------------------------------------------------------------------------------------------


def validation_of(wildcards):
    """The task's contract check and task × library validation a job waits for: a task that breaks the contract or
    does not train stops the study there."""
    libraries = (
        LIBRARIES
        if wildcards.get("library", ENV_ONLY) == ENV_ONLY
        else [wildcards.library]
    )
    cell = {"study": wildcards.study, "task": wildcards.task}
    return [
        paths.CHECK_TASK_REPORT.format(**cell),
        *(paths.VERDICT.format(**cell, library=library) for library in libraries),
    ]


def probe_of(wildcards):
    """The NCCL/gloo probe at the job's world size, run before any long job there (none at world size 1)."""
    if int(wildcards.ws) == 1:
        return []
    return paths.PROBE_REPORT.format(study=wildcards.study, ws=wildcards.ws)
