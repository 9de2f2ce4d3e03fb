# Config validation, constants and input/param functions shared by every stage. Logic that needs tests lives in
# rlscale.study; this file only wires it to wildcards.
# A world size's split over nodes is node_split's (job_split): resources, plan and job launchers all read it.
import json
import os
import re
import shlex
import sys
from datetime import datetime
from pathlib import Path

# Snakemake's logger and WorkflowError: used directly, as workflows do (rlscale.study.snakemake_internals says why).
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

from rlscale.launch.ranks import NodeSplit
from rlscale.study.checks import check_gpu_limit, node_split
from rlscale.study.config import StudyConfigError, envs_for, validated_config
from rlscale.study.config_source import (
    check_command_line,
    explicit_keys,
    study_config,
)
from rlscale.study.job_args import tracker_args
from rlscale.study.job_times import JOB_TIMES_ENV, STUDY_CALL_ENV
from rlscale.study.plan_summary import plan_lines
from rlscale.study.profiles import (
    check_resources,
    profile_config_dropped,
    read_command_line,
)
from rlscale.study.snakemake_internals import (
    append_config_args,
    config_given,
    configfiles_given,
    gpu_limit,
)
from rlscale.study.stage_policy import STAGE_POLICIES, Stage
from rlscale.study.time_left import report_time_left
from rlscale.study.verdict import PARITY_METRICS_ENV

# Schema (defaults filled in, as snakemake.utils.validate does), task ids, then device: auto resolved (cpu_fallback
# applied on a host without a GPU) and the cross-field checks, then the GPU limit (--resources gpu=N) against the
# world sizes and the profiles' and the command line's resource values; a bad config is one line naming the key.
# Rules read STUDY. A user's --configfile replaces config/config.yaml unless it is named first (the Snakefile).
USER_CONFIG, CONFIG_SOURCE, CONFIG_BASE = study_config(
    config,
    configfiles_given(workflow),
    Path(workflow.basedir, "config", "config.yaml"),
)
COMMAND_LINE = read_command_line(sys.argv, Path(workflow.basedir))
# Snakemake lets a --config on the command line replace a profile's whole config: list; the profile's other keys are
# layered back under it, and handed to the jobs Snakemake spawns (a SLURM job parses this file again).
DROPPED = profile_config_dropped(COMMAND_LINE.layers, config_given(workflow))
for key, layer in DROPPED.items():
    USER_CONFIG[key] = layer.values[key]
append_config_args(workflow, [layer.entries[key] for key, layer in DROPPED.items()])
config.clear()
config.update(USER_CONFIG)
if CONFIG_SOURCE:
    logger.info(CONFIG_SOURCE)
if DROPPED:
    logger.info(
        "config: --config sets only its own keys; kept from the profiles: "
        + ", ".join(
            f"{layer.entries[key]} ({layer.source})" for key, layer in DROPPED.items()
        )
    )
try:
    try:
        check_command_line(COMMAND_LINE.layers)
        check_resources(COMMAND_LINE.resources)
    except ValueError as error:
        raise StudyConfigError(f"config: {error}") from None
    STUDY = validated_config(
        config,
        Path(workflow.basedir, "workflow", "schemas", "config.schema.yaml"),
        explicit=explicit_keys(
            configfiles_given(workflow),
            COMMAND_LINE.layers,
            Path(workflow.basedir, "config", "config.yaml"),
        ),
        base=CONFIG_BASE,
    )
    check_gpu_limit(STUDY, gpu_limit(workflow))
except StudyConfigError as error:
    raise WorkflowError(str(error))

DEVICE = STUDY["device"]
# Which device, and why, at the top of the console and of .snakemake/log/ (summary.md repeats it).
logger.info(STUDY["device_reason"])
for line in plan_lines(STUDY):
    logger.info(line)
# Under each progress line, an estimate of the time left (rlscale.study.time_left).
report_time_left()
# Each validate job refuses a parity metric its task does not log (rlscale.study.verdict), told through the
# environment its jobs inherit.
os.environ[PARITY_METRICS_ENV] = json.dumps(
    {
        task: target["metric"]
        for task, target in (STUDY["parity"].get("target") or {}).items()
        if task in STUDY["tasks"]
    }
)
# MJX tasks compile their step once per process: with JAX's persistent cache, every later job of the study loads it
# (about 15 s of compile on an H200 otherwise). A JAX_COMPILATION_CACHE_DIR of the user's own is kept.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    str(Path("logs", STUDY["study"], "jax_cache").resolve()),
)
# MuJoCo Warp tasks load their kernels from Warp's cache: the first job of a study compiles them, the others load them.
os.environ.setdefault(
    "WARP_CACHE_PATH", str(Path("logs", STUDY["study"], "warp_cache").resolve())
)
# Every leased job command appends its waits and run time here (rlscale.study.job_times); the aggregate rule tables
# them, each Snakemake call apart (a study continued by a later call keeps both). A job step that parses the workflow
# again (a SLURM job) keeps the call it inherited from the Snakemake that submitted it.
os.environ[JOB_TIMES_ENV] = str(
    Path("logs", STUDY["study"], "job_times.jsonl").resolve()
)
os.environ.setdefault(
    STUDY_CALL_ENV, datetime.now().astimezone().isoformat(timespec="seconds")
)
LIBRARIES = {entry["name"]: entry for entry in STUDY["libraries"]}
ENV_ONLY = "env-only"  # The library segment of runtime bundles: the runtime benchmark steps the env without one.
WORLD_SIZES = sorted(STUDY["world_sizes"])
MULTI_NODE = [
    size
    for size in WORLD_SIZES
    if node_split(size, STUDY["gpus_per_node"], DEVICE).nodes > 1
]
SINGLE_NODE = [size for size in WORLD_SIZES if size not in MULTI_NODE]
SEEDS = STUDY["seeds"]
# Training runs (one per world size) use the first seed and their task's largest per-rank env count (train_envs).
TRAIN_SEED = SEEDS[0]


# The thin launchers in scripts/, run by this interpreter (the venv's, whatever PATH holds). Shell commands name them
# through these globals, not params: Snakemake reruns a job whose params changed, but its code trigger compares the
# unformatted command, so a venv made anew or a checkout moved leaves finished jobs finished.
PYTHON = sys.executable
SCRIPTS = Path(workflow.basedir, "scripts")


def train_envs(task):
    """Per-rank env count of a task's train runs (and its startup/runtime bundles): the largest of envs_for."""
    return max(envs_for(STUDY, task))


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
    return expand(
        "results/{study}/{name}",
        study=STUDY["study"],
        name=[
            "scaling.csv",
            "throughput.png",
            "efficiency.png",
            "learning_curves.png",
            "summary.md",
        ],
    )


# --- Resources -------------------------------------------------------------------------------------------------


def job_split(wildcards):
    """The job's world size (wildcard ws) over its nodes."""
    return node_split(int(wildcards.ws), STUDY["gpus_per_node"], DEVICE)


def rank_gpus(wildcards):
    """GPUs a single-node job needs: one per rank on cuda, none for CPU ranks."""
    return job_split(wildcards).gpus_per_node(DEVICE)


def single_device_gpus(wildcards):
    """GPUs a single-device job needs (one process on one device, whatever the world size)."""
    return NodeSplit(1).gpus_per_node(DEVICE)


# A rule's resources.gpu comes from its stage's row of rlscale.study.stage_policy.STAGE_POLICIES, which the job's lease
# reads too; StagePolicy says why a stage shares its GPUs (none from Snakemake on one host) or holds them alone.
def stage_gpus(stage):
    """The resources.gpu function of stage (a Stage): the GPUs its jobs need, or none where they share them."""
    policy = STAGE_POLICIES[stage]
    needed = single_device_gpus if policy.single_device else rank_gpus

    def requested_gpus(wildcards):
        return policy.requested_gpus(
            needed(wildcards), under_slurm=STUDY["cluster"] == "slurm"
        )

    return requested_gpus


def rank_threads(wildcards):
    """One core per rank: CPU ranks use one thread each, GPU ranks at least one to feed their GPU."""
    return int(wildcards.ws)


def node_threads(wildcards):
    """Cores per node of a multi-node job: one per local rank (SLURM's --cpus-per-task of its launcher task)."""
    return STUDY["gpus_per_node"]


def node_count(wildcards):
    """Nodes a multi-node job spans (also its srun task count: one launcher per node)."""
    return job_split(wildcards).nodes


def node_gres(wildcards):
    """Per-node GPUs of a multi-node job (SLURM --gres; --gpus would be the job's total)."""
    return f"gpu:{STUDY['gpus_per_node']}"


# --- Arguments ---------------------------------------------------------------------------------------------------


def library_args(library):
    """--rl_library/--ml_framework of a library key, then the config's agent_overrides of that library."""
    entry = LIBRARIES[library]
    overrides = STUDY["agent_overrides"].get(entry["name"], [])
    return shlex.join(
        [
            "--rl_library",
            entry["name"],
            "--ml_framework",
            entry["ml_framework"],
            *overrides,
        ]
    )


def validate_args(wildcards):
    """Arguments of the validate run's `rlscale train` (the launcher adds iterations and the log root): at the task's
    train env count, so that its compile is the one every later job of the task loads.
    """
    return (
        f"--task {wildcards.task} {library_args(wildcards.library)} --num_envs {train_envs(wildcards.task)} "
        f"--seed {TRAIN_SEED} --run_name validate"
    )


def train_args(wildcards):
    """Per-rank arguments of a train run, as the plan shows them (the job adds --device, --num_gpus and the
    port/rendezvous).

    --resume auto: a rerun of the job (--rerun-incomplete after a crash or a kill) continues the run from its last
    checkpoint, so at most checkpoint_interval iterations are trained twice; the first attempt starts from scratch.
    """
    return (
        f"--task {wildcards.task} {library_args(wildcards.library)} --num_envs {train_envs(wildcards.task)} "
        f"--max_iterations {STUDY['iterations']['train']} --seed {TRAIN_SEED} "
        f"--run_name ws{wildcards.ws} --log_root {train_run_root(wildcards)} "
        f"--resume auto --checkpoint_interval {STUDY['checkpoint_interval']}"
        + tracker_line("train")
    )


def tracker_line(stage):
    """The tracker options of a run of stage (the study's logger), as the end of its arguments."""
    return "".join(f" {shlex.quote(arg)}" for arg in tracker_args(STUDY, stage))


def train_run_root(wildcards):
    """Run directory of a train run (checkpoints, TensorBoard), next to its manifest.

    Kept for a rerun of the same job, which continues it, else recreated (rlscale.study.stages.keep_for_same_job).
    """
    return f"results/{wildcards.study}/train/{wildcards.task}/{wildcards.library}/ws{wildcards.ws}/run"


def plan_launch_args(wildcards):
    """Topology options as the train job will pass them; values known only inside the allocation are placeholders
    (FIRST_NODE, RDZV_PORT = rdzv_port + SLURM_JOB_ID % 1000, SLURM_JOB_ID)."""
    split = job_split(wildcards)
    if split.nodes > 1:
        return (
            f"--nnodes {split.nodes} --num_gpus {split.ranks_per_node} --rdzv_backend c10d "
            "--rdzv_endpoint FIRST_NODE:RDZV_PORT --rdzv_id SLURM_JOB_ID"
        )
    return f"--num_gpus {split.world_size}"


def plan_visible_gpus(wildcards):
    """GPUs the dry run assumes visible on the job's node (the plan runs on the submit host)."""
    return job_split(wildcards).gpus_per_node(DEVICE)


TRAINING_BUNDLE = "results/{study}/benchmark/training/{task}/{library}/ws{ws}/envs{envs}/seed{seed}.json"


def training_bundles():
    """The bundles of one training cell, one per seed (the benchmark rule's outputs)."""
    return expand(TRAINING_BUNDLE, seed=SEEDS, allow_missing=True)


def training_bundle_pattern(wildcards):
    """The cell's bundle path with {seed} left for `rlscale benchmark --seeds` to fill in."""
    cell = {
        name: wildcards[name] for name in ("study", "task", "library", "ws", "envs")
    }
    return TRAINING_BUNDLE.format(**cell, seed="{seed}")


def training_args(wildcards):
    """Per-rank arguments of a training cell: every seed in one warm process (the benchmark puts each repeat in
    <log_root>/seed<seed>); with peer_baseline the job runs one process per seed (rlscale.study.stages.benchmark).
    """
    return (
        f"--task {wildcards.task} --num_envs {wildcards.envs} --seeds {' '.join(map(str, SEEDS))} "
        f"{library_args(wildcards.library)} "
        f"--max_iterations {STUDY['iterations']['benchmark']} "
        f"--warmup_iterations {STUDY['warmup_iterations']}"
        + (" --peer" if STUDY["peer_baseline"] else "")
        + tracker_line("benchmark")
    )


def single_seed_args(wildcards):
    """Per-rank arguments of a startup or runtime run; each workflow refuses the options that do not apply to it."""
    common = (
        f"--task {wildcards.task} --num_envs {wildcards.envs} --seed {wildcards.seed}"
    )
    if wildcards.workflow == "runtime":
        steps = STUDY["runtime_steps"]
        return (
            f"{common} --warmup_steps {steps['warmup']} --num_steps {steps['measured']}"
        )
    return f"{common} {library_args(wildcards.library)}"


def benchmark_log_root(wildcards):
    """Run directories (checkpoints, TensorBoard) of a training cell, seed<seed>/ each: with the logs, not the
    results."""
    return (
        f"logs/{wildcards.study}/benchmark_runs/training/{wildcards.task}/{wildcards.library}/"
        f"ws{wildcards.ws}/envs{wildcards.envs}"
    )


def single_seed_log_root(wildcards):
    """Run directories of a startup or runtime run."""
    return (
        f"logs/{wildcards.study}/benchmark_runs/{wildcards.workflow}/{wildcards.task}/{wildcards.library}/"
        f"ws{wildcards.ws}/envs{wildcards.envs}/seed{wildcards.seed}"
    )


# --- Inputs ------------------------------------------------------------------------------------------------------


def validation_of(wildcards):
    """The task's contract check and task × library validation a job waits for: a task that breaks the contract or
    does not train stops the study there."""
    libraries = (
        list(LIBRARIES)
        if wildcards.get("library", ENV_ONLY) == ENV_ONLY
        else [wildcards.library]
    )
    return [
        f"results/{wildcards.study}/validate/{wildcards.task}/check_task.txt",
        *expand(
            "results/{study}/validate/{task}/{library}.json",
            study=wildcards.study,
            task=wildcards.task,
            library=libraries,
        ),
    ]


def probe_of(wildcards):
    """The NCCL/gloo probe at the job's world size, run before any long job there (none at world size 1)."""
    if int(wildcards.ws) == 1:
        return []
    return f"results/{wildcards.study}/probe/ws{wildcards.ws}.txt"


def training_cells():
    """Every training benchmark cell: (path, the cell the bundle must measure)."""
    cells = []
    for task in STUDY["tasks"]:
        for library, entry in LIBRARIES.items():
            for world_size in WORLD_SIZES:
                for envs in envs_for(STUDY, task):
                    for seed in STUDY["seeds"]:
                        path = (
                            f"results/{STUDY['study']}/benchmark/training/{task}/{library}/ws{world_size}/envs{envs}/"
                            f"seed{seed}.json"
                        )
                        cell = {
                            "task": task,
                            "rl_library": entry["name"],
                            "ml_framework": entry["ml_framework"],
                        }
                        cells.append(
                            (
                                path,
                                {
                                    **cell,
                                    "num_envs_per_rank": envs,
                                    "world_size": world_size,
                                },
                            )
                        )
    return cells


def other_bundles():
    """Startup (per library) and runtime (env only) bundles at the largest world size and the task's train_envs."""
    largest, study = WORLD_SIZES[-1], STUDY["study"]
    paths = []
    for task in STUDY["tasks"]:
        envs = train_envs(task)
        for library in [*LIBRARIES, ENV_ONLY]:
            workflow = "runtime" if library == ENV_ONLY else "startup"
            paths.append(
                f"results/{study}/benchmark/{workflow}/{task}/{library}/ws{largest}/envs{envs}/seed{TRAIN_SEED}.json"
            )
    return paths


def train_cells():
    """Every train run: (manifest path, its task, library and world size)."""
    return [
        (
            f"results/{STUDY['study']}/train/{task}/{library}/ws{world_size}/manifest.json",
            {"task": task, "library": library, "world_size": world_size},
        )
        for task in STUDY["tasks"]
        for library in LIBRARIES
        for world_size in WORLD_SIZES
    ]
