"""Where a study's files go: one template per kind of job, for its output, its log and its run directories.

A job's id is its log path under ``logs/<study>/`` without ``.log`` (``train/Rlscale-Go1-Flat/rsl_rl/ws2``): the rules
name their outputs and logs from these templates, and :mod:`rlscale.study.plan` files each job under its id. The
templates use the rules' wildcard names (``study``, ``task``, ``library``, ``ws``, ``envs``, ``seed``, ``variant``,
``workflow``), so a rule and the plan format the same string.
"""

from __future__ import annotations

import enum
from pathlib import Path


class JobKind(enum.StrEnum):
    """A kind of study job, one per rule family (a multi-node twin is the same kind)."""

    CHECK_TASK = "check_task"
    VALIDATE = "validate"
    PROBE = "probe"
    TRAIN = "train"
    TRAINING_BENCHMARK = "benchmark"
    SINGLE_SEED_BENCHMARK = "benchmark_single_seed"
    PARITY = "parity"
    EVALUATE_TRAIN = "evaluate_train"
    EVALUATE_PARITY = "evaluate_parity"


JOB_IDS: dict[JobKind, str] = {
    JobKind.CHECK_TASK: "validate/{task}/check_task",
    JobKind.VALIDATE: "validate/{task}/{library}",
    JobKind.PROBE: "probe/ws{ws}",
    JobKind.TRAIN: "train/{task}/{library}/ws{ws}",
    JobKind.TRAINING_BENCHMARK: "benchmark/training/{task}/{library}/ws{ws}/envs{envs}",
    JobKind.SINGLE_SEED_BENCHMARK: "benchmark/{workflow}/{task}/{library}/ws{ws}/envs{envs}/seed{seed}",
    JobKind.PARITY: "parity/{task}/{library}/ws{ws}/{variant}/seed{seed}",
    JobKind.EVALUATE_TRAIN: "evaluate/train/{task}/{library}/ws{ws}",
    JobKind.EVALUATE_PARITY: "evaluate/parity/{task}/{library}/ws{ws}/{variant}/seed{seed}",
}
"""Each kind's job id, formatted with the job's wildcards."""


def job_log(kind: JobKind) -> str:
    """The log template of a kind's jobs: ``logs/{study}/<job id>.log``."""
    return f"logs/{{study}}/{JOB_IDS[kind]}.log"


RESULTS = "results/{study}"
CHECK_TASK_REPORT = f"{RESULTS}/validate/{{task}}/check_task.txt"
VERDICT = f"{RESULTS}/validate/{{task}}/{{library}}.json"
VALIDATE_RUN_ROOT = f"{RESULTS}/validate/{{task}}/{{library}}"
PROBE_REPORT = f"{RESULTS}/probe/ws{{ws}}.txt"
PLAN = f"{RESULTS}/plan/{{task}}/{{library}}/ws{{ws}}.txt"
TRAIN_MANIFEST = f"{RESULTS}/train/{{task}}/{{library}}/ws{{ws}}/manifest.json"
TRAIN_RUN_ROOT = f"{RESULTS}/train/{{task}}/{{library}}/ws{{ws}}/run"
"""Checkpoints and TensorBoard of a train run, next to its manifest."""
BUNDLE = f"{RESULTS}/benchmark/{{workflow}}/{{task}}/{{library}}/ws{{ws}}/envs{{envs}}/seed{{seed}}.json"
TRAINING_BUNDLE = BUNDLE.replace("{workflow}", "training")
BENCHMARK_LOG_ROOT = "logs/{study}/benchmark_runs/training/{task}/{library}/ws{ws}/envs{envs}"
"""Run directories (``seed<seed>/`` each) of a training benchmark cell: with the logs, not the results."""
SINGLE_SEED_LOG_ROOT = "logs/{study}/benchmark_runs/{workflow}/{task}/{library}/ws{ws}/envs{envs}/seed{seed}"
PARITY_RECORD = f"{RESULTS}/parity/{{task}}/{{library}}/ws{{ws}}/{{variant}}/seed{{seed}}.json"
PARITY_LOG_ROOT = "logs/{study}/parity_runs/{task}/{library}/ws{ws}/{variant}/seed{seed}"
"""Run directories of a parity run: with the logs (its record is the manifest)."""
EVALUATION_OF_TRAIN = f"{RESULTS}/evaluate/train/{{task}}/{{library}}/ws{{ws}}.json"
EVALUATION_OF_PARITY = f"{RESULTS}/evaluate/parity/{{task}}/{{library}}/ws{{ws}}/{{variant}}/seed{{seed}}.json"
JOB_TIMES = "logs/{study}/job_times.jsonl"
JAX_CACHE = "logs/{study}/jax_cache"
WARP_CACHE = "logs/{study}/warp_cache"
AGGREGATES = ("scaling.csv", "throughput.png", "efficiency.png", "learning_curves.png", "rank_time.png", "summary.md")
"""The aggregate rule's outputs in ``results/<study>/`` that the workflow's default target asks for."""


def probe_sweep_of(report: str | Path) -> Path:
    """The probe's sweep over message sizes, beside its report (:data:`PROBE_REPORT`): ``probe/ws<N>.json``.

    No rule declares it: a study probed before the sweep existed would otherwise rerun its probes, and with them every
    job that waits on a probe. The aggregate reads the sweeps there are."""
    return Path(report).with_suffix(".json")
