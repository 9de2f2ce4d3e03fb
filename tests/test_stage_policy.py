"""Tests of the stage-policy table: every leased stage has a row, its values are the workflow's rule names, and the
row decides both what a rule asks Snakemake for (``resources.gpu``) and how the job's lease holds the host and GPUs."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from test_study_workflow import job_blocks, job_env, snakemake

from rlscale.study import job_runner
from rlscale.study.job import STAGE_OF_KIND
from rlscale.study.job_runner import GRANT_EXIT_CODE, run_leased
from rlscale.study.paths import JobKind
from rlscale.study.stage_policy import STAGE_POLICIES, Stage, StagePolicy

ROOT = Path(__file__).resolve().parents[1]
ROBOTS = str(ROOT / "config" / "studies" / "robots.yaml")

EVERY_STAGE = (
    "world_sizes: [1, 2]\nparity:\n  seeds: [1]\n  max_env_steps: {Rlscale-Go1-Flat: 60000000}\n"
    "  target:\n    Rlscale-Go1-Flat: {metric: Metrics/base_velocity/error_vel_xy, at_most: 0.25}\n"
)
"""Overlay on the robots study that plans a job of every stage: world size 2 adds a probe, the Go1's parity target
parity runs, and the Go1's evaluation an evaluation of each of its runs."""


def stage_of(rule: str) -> Stage:
    """The stage of a leased rule: the one it is named, or its name starts with (``evaluate_train``: evaluate)."""
    return next(stage for stage in Stage if rule == stage or rule.startswith(f"{stage}_"))


def rule_gpus() -> dict[str, str]:
    """Each rule of ``workflow/rules/*.smk`` that asks for GPUs: its ``resources.gpu`` expression."""
    found = {}
    for path in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        for block in re.split(r"\n(?=rule \w+:)", path.read_text()):
            head = re.match(r"rule (\w+):", block)
            gpu = re.search(r"^\s+gpu=(.*),$", block, re.MULTILINE)
            if head and gpu:
                found[head.group(1)] = gpu.group(1)
    return found


def test_every_stage_has_a_row():
    """The rules' resources and the lease look every stage up in the table."""
    assert set(STAGE_POLICIES) == set(Stage)


def test_a_stage_measuring_speed_holds_its_gpus_alone_too():
    """A row that holds the host alone but shares its GPUs contradicts itself, and is refused."""
    with pytest.raises(ValueError, match="holds its GPUs alone too"):
        StagePolicy(shares_gpus=True, holds_host_alone=True, single_device=False)


def test_stages_are_the_workflows_leased_rules():
    """Every rule that asks for GPUs asks for its kind of job's (whose stage's row decides), its name is the kind's,
    and the kind's stage is the one the rule is named after; every stage has such a rule."""
    gpus = rule_gpus()
    assert gpus, "no rule asks for GPUs: the parse found nothing"
    for rule, expression in gpus.items():
        assert expression == f"gpus_of(JobKind.{JobKind(rule).name})", rule
        assert STAGE_OF_KIND[JobKind(rule)] == stage_of(rule), rule
    assert {stage_of(rule) for rule in gpus} == set(Stage)


@pytest.mark.parametrize("stage", list(Stage))
def test_the_lease_follows_the_row(stage, tmp_path, monkeypatch, capsys):
    """Outside SLURM a stage's job holds its GPU alone unless the stage shares them, in which case a grant of 0 is
    right; it holds the host alone only when the stage measures speed."""
    policy = STAGE_POLICIES[stage]
    environ = {**os.environ, "RLSCALE_LEASE_DIR": str(tmp_path / "lease"), "RLSCALE_LEASE_GPUS": "0"}
    environ.pop("SLURM_JOB_ID", None)
    monkeypatch.setattr(job_runner, "run_command", lambda *args, **kwargs: 0)
    command = [sys.executable, "-c", "pass"]
    code = run_leased(command, stage=stage, gpus=1, granted=0, world_size=1, environ=environ)
    assert code == (0 if policy.shares_gpus else GRANT_EXIT_CODE)
    assert run_leased(command, stage=stage, gpus=1, granted=1, world_size=1, environ=environ) == 0
    gpus = "shared" if policy.shares_gpus else "alone"
    host = "alone" if policy.holds_host_alone else "shared"
    assert f"[study] leased GPU(s) 0 ({gpus}), host {host}" in capsys.readouterr().err


@pytest.mark.parametrize("cluster", ["local", "slurm"])
def test_snakemake_asks_for_what_the_row_says(cluster, tmp_path):
    """On a 2-GPU host a stage that holds its GPUs alone asks Snakemake for them (one per rank, or its one device);
    one that shares them asks for none, since the lease shares them. Under SLURM every job asks for its own."""
    overlay = tmp_path / "every_stage.yaml"
    overlay.write_text(EVERY_STAGE + f"cluster: {cluster}\n")
    env = job_env(tmp_path, CUDA_VISIBLE_DEVICES="0,1")
    result = snakemake(tmp_path, "-n", "--resources", "gpu=2", "--configfile", ROBOTS, str(overlay), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    asked = {}  # each leased job's (rule, wildcards): its resources.gpu
    for job in job_blocks(result.stdout):
        gpu = re.search(r"\bgpu=(\d+)", job.get("resources", ""))
        if gpu:
            asked[job["rule"], job["wildcards"]] = int(gpu.group(1))
    assert {stage_of(rule) for rule, _ in asked} == set(Stage), "the dry run left a stage out"
    for (rule, wildcards), gpus in asked.items():
        policy = STAGE_POLICIES[stage_of(rule)]
        size = re.search(r"\bws=(\d+)", wildcards)
        needed = 1 if policy.single_device else int(size.group(1))
        expected = needed if cluster == "slurm" or not policy.shares_gpus else 0
        assert gpus == expected, (rule, wildcards)
