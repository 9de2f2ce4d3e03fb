"""Tests of the study's evaluation stage without running it: which runs it evaluates, their checkpoints, the typed
records the aggregate rule reads, the summary's tables, the plan line and the config's refusal."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from physics_support import requires_warp
from run_manifests import manifest_data, run_manifest

from rlscale.study.aggregate import SCALING_COLUMNS
from rlscale.study.config import StudyConfigError, validated_config
from rlscale.study.evaluation import env_steps_at, evaluated_tasks, evaluation_cells, run_checkpoints
from rlscale.study.evaluation_table import CheckpointResult, RunEvaluation, evaluation_table, read_evaluation
from rlscale.study.job import Job, RunArgs
from rlscale.study.paths import JobKind
from rlscale.study.plan_summary import plan_lines
from rlscale.study.stage_policy import Stage
from rlscale.study.summary import evaluation_markdown, summary_markdown

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config" / "config.yaml"
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def result(iterations: int, error: float, falls: float, env_steps: int | None = None) -> CheckpointResult:
    return CheckpointResult(
        iterations=iterations,
        env_steps=env_steps,
        lin_vel_error_mps=error,
        ang_vel_error_radps=error / 2,
        fall_rate=falls,
        envs=1000,
    )


def run(stage: str, world_size: int, *checkpoints: CheckpointResult, seed: int | None = None) -> RunEvaluation:
    return RunEvaluation(
        stage=stage,
        task="Rlscale-Go1-Flat",
        rl_library="rsl_rl",
        world_size=world_size,
        variant=None if stage == "train" else "lr-none_norm-library",
        seed=seed,
        checkpoints=checkpoints,
    )


RUNS = [
    run("train", 1, result(50, 0.08, 0.01, 1000)),
    run("train", 2, result(50, 0.12, 0.03, 2000)),
    run("parity", 1, result(1, 0.6, 0.0, 10), result(20, 0.30, 0.10, 400), seed=1),
    run("parity", 1, result(1, 0.6, 0.0, 10), result(20, 0.20, 0.04, 400), seed=2),
    run("parity", 1, result(1, 0.6, 0.0, 10), result(20, 0.25, 0.00, 400), seed=3),
]


class TestEvaluationTable:
    def test_one_row_per_world_size_of_each_stage(self):
        """A train run's final checkpoint is its row; a parity cell's row is the median of its seeds' final
        checkpoints (never the earlier ones)."""
        table = evaluation_table(RUNS)
        assert table[["stage", "world size", "runs"]].values.tolist() == [
            ["train", 1, 1],
            ["train", 2, 1],
            ["parity", 1, 3],
        ]
        assert table["tracking error, m/s"].tolist() == pytest.approx([0.08, 0.12, 0.25])
        assert table["fall rate"].tolist() == pytest.approx([0.01, 0.03, 0.04])
        assert table["yaw-rate error, rad/s"].tolist() == pytest.approx([0.04, 0.06, 0.125])
        assert table["env steps"].tolist() == [1000, 2000, 400]
        assert table["variant"].tolist() == ["–", "–", "lr-none_norm-library"]

    def test_summary_section_has_a_table_per_task(self):
        """The summary's evaluation section says how the runs were measured and tables each task's rows."""
        lines = evaluation_markdown(RUNS, 1000)
        text = "\n".join(lines)
        assert lines[0] == "## Evaluation: tracking error and falls per world size"
        assert "1000 envs per checkpoint" in text and "### Rlscale-Go1-Flat" in text
        assert "| stage | library | variant | world size | runs | env steps | tracking error, m/s |" in text
        assert "| train | rsl_rl | – | 2 | 1 | 2,000 | 0.12 | 0.06 | 0.03 |" in text
        assert "| parity | rsl_rl | lr-none_norm-library | 1 | 3 | 400 | 0.25 | 0.125 | 0.04 |" in text

    def test_a_study_without_evaluations_has_no_section(self):
        """No evaluated run: no section, and summary.md is what it was without the stage."""
        assert evaluation_markdown([], 1000) == []
        empty = pd.DataFrame()
        args = ("unit", "cpu", "why", pd.DataFrame(columns=SCALING_COLUMNS), empty, empty, [])
        assert summary_markdown(*args) == summary_markdown(*args, evaluation=evaluation_markdown([], 1000))
        assert "Evaluation" not in summary_markdown(*args)


class TestEvaluationFiles:
    CELL = {"stage": "parity", "task": "Rlscale-G1-Flat", "rl_library": "rsl_rl", "world_size": 2, "seed": 3,
            "variant": "lr-none_norm-library"}  # fmt: skip

    @staticmethod
    def entry(iterations: int, error: float, task: str = "Rlscale-G1-Flat") -> dict:
        summary = {"envs": 10, "lin_vel_error_mps": error, "ang_vel_error_radps": 0.1, "fall_rate": 0.2}
        return {"task": task, "rl_library": "rsl_rl", "iterations": iterations, "env_steps": iterations * 8,
                "summary": summary, "per_command": []}  # fmt: skip

    def test_read_as_a_typed_record(self, tmp_path):
        """The evaluation file of a run becomes its cell with each checkpoint's result, in the order of iterations."""
        path = tmp_path / "seed3.json"
        path.write_text(json.dumps({"record": "r.json", "checkpoints": [self.entry(9, 0.2), self.entry(1, 0.7)]}))
        record = read_evaluation(path, self.CELL)
        assert (record.stage, record.task, record.world_size, record.seed) == ("parity", "Rlscale-G1-Flat", 2, 3)
        assert [point.iterations for point in record.checkpoints] == [1, 9]
        assert record.final == CheckpointResult(9, 72, 0.2, 0.1, 0.2, 10)

    def test_another_task_is_refused(self, tmp_path):
        """A file whose results are of another task than the cell it was filed under is refused, naming both."""
        path = tmp_path / "seed3.json"
        path.write_text(json.dumps({"checkpoints": [self.entry(9, 0.2, task="Rlscale-Go1-Flat")]}))
        with pytest.raises(ValueError, match="evaluates Rlscale-Go1-Flat with rsl_rl, but was filed under Rlscale-G1"):
            read_evaluation(path, self.CELL)


class TestEvaluatedRuns:
    def test_the_task_says_whether_it_has_an_evaluation(self):
        """The robots define an evaluation; Cartpole and Ant do not."""
        tasks = ["Isaac-Cartpole-Direct", "Rlscale-Go1-Flat", "Rlscale-Ant", "Rlscale-G1-Flat"]
        assert evaluated_tasks(tasks) == ["Rlscale-Go1-Flat", "Rlscale-G1-Flat"]

    def test_cells_of_the_evaluated_tasks_only(self):
        """Each train and parity run of an evaluated task gets an evaluation under evaluate/<stage>/, beside its
        record's path; the other tasks' runs get none."""
        study = {"study": "s", "evaluated_tasks": ["Rlscale-Go1-Flat"]}
        trains = [
            (f"results/s/train/{task}/rsl_rl/ws{size}/manifest.json",
             {"task": task, "library": "rsl_rl", "world_size": size})
            for task in ("Isaac-Cartpole-Direct", "Rlscale-Go1-Flat")
            for size in (1, 2)
        ]  # fmt: skip
        parity = [
            {"path": f"results/s/parity/{task}/rsl_rl/ws1/lr-none_norm-library/seed1.json", "task": task,
             "rl_library": "rsl_rl", "world_size": 1, "variant": "lr-none_norm-library", "seed": 1}
            for task in ("Isaac-Cartpole-Direct", "Rlscale-Go1-Flat")
        ]  # fmt: skip
        cells = evaluation_cells(study, trains, parity)
        assert [cell["path"] for cell in cells] == [
            "results/s/evaluate/train/Rlscale-Go1-Flat/rsl_rl/ws1.json",
            "results/s/evaluate/train/Rlscale-Go1-Flat/rsl_rl/ws2.json",
            "results/s/evaluate/parity/Rlscale-Go1-Flat/rsl_rl/ws1/lr-none_norm-library/seed1.json",
        ]
        assert cells[1]["record"] == "results/s/train/Rlscale-Go1-Flat/rsl_rl/ws2/manifest.json"
        assert cells[2]["record"] == parity[1]["path"] and cells[2]["stage"] == "parity"
        assert evaluation_cells({"study": "s", "evaluated_tasks": []}, trains, parity) == []

    def test_checkpoints_of_a_run(self, tmp_path):
        """A train run is evaluated at its final checkpoint; a parity run at each it saved, in order, each with the
        iterations it had finished and the global env steps then."""
        (tmp_path / "manifest.json").write_text("{}")
        for index in (0, 4, 9):
            (tmp_path / f"model_{index}.pt").write_bytes(b"")
        fields = {
            "checkpoint": str(tmp_path / "model_9.pt"),
            "iterations_completed": 10,
            "args": {"rl_library": "rsl_rl", "ml_framework": "torch"},
            "iterations": [{"iteration": index, "env_steps": 64 * (index + 1)} for index in range(10)],
        }
        manifest = run_manifest(fields)
        assert run_checkpoints(manifest, every=False) == [(10, tmp_path / "model_9.pt")]
        assert run_checkpoints(manifest, every=True) == [(1, tmp_path / "model_0.pt"), (5, tmp_path / "model_4.pt"),
                                                         (10, tmp_path / "model_9.pt")]  # fmt: skip
        assert [env_steps_at(manifest, iterations) for iterations in (1, 5, 10, 11)] == [64, 320, 640, None]
        with pytest.raises(ValueError, match="no final checkpoint"):
            run_checkpoints(run_manifest({**fields, "checkpoint": None}), every=False)


class TestEvaluationJob:
    @staticmethod
    def parity_run(tmp_path: Path) -> Path:
        """A parity run's directory with checkpoints after 1 and 3 iterations, and its record; returns the record."""
        run_dir = tmp_path / "logs" / "run"
        run_dir.mkdir(parents=True)
        (run_dir / "manifest.json").write_text("{}")
        for index in (0, 2):
            (run_dir / f"model_{index}.pt").write_bytes(b"")
        manifest = {
            "checkpoint": str(run_dir / "model_2.pt"),
            "iterations_completed": 3,
            "args": {"rl_library": "rsl_rl", "ml_framework": "torch"},
            "iterations": [{"iteration": index, "env_steps": 100 * (index + 1)} for index in range(3)],
        }
        record = tmp_path / "seed1.json"
        record.write_text(json.dumps(manifest_data(manifest)))
        return record

    def test_one_process_on_one_gpu_for_every_checkpoint(self, tmp_path, monkeypatch):
        """The job runs one `rlscale evaluate` of every checkpoint on one leased GPU, and writes each result with the
        iterations it had finished and the global env steps then."""
        from rlscale.study import stages

        leased = []

        def fake_run_leased(command, **lease):
            leased.append((command, lease))
            pattern = command[command.index("--output") + 1]
            for checkpoint in command[command.index("--checkpoint") + 1 : command.index("--output")]:
                stem = Path(checkpoint).stem
                Path(pattern.replace("{checkpoint}", stem)).write_text(json.dumps({"checkpoint": checkpoint}))
            return 0

        monkeypatch.setattr(stages, "run_leased", fake_run_leased)
        output = tmp_path / "evaluate" / "seed1.json"
        record = self.parity_run(tmp_path)
        job = evaluation_job(record, output, "cuda", RunArgs(num_envs=1000, seed=0), every_checkpoint=True)
        assert stages.evaluate(job, granted=1) == 0
        [(command, lease)] = leased
        assert command[3:6] == ["evaluate", "--checkpoint", str(tmp_path / "logs/run/model_0.pt")]
        assert command[-6:] == ["--num_envs", "1000", "--seed", "0", "--device", "cuda"]
        assert lease == {
            "gpus": 1,
            "granted": 1,
            "world_size": 1,
            "stage": Stage.EVALUATE,
            "timed": job.timed("evaluate"),
        }
        written = json.loads(output.read_text())
        assert written["record"] == str(record)
        assert [(entry["iterations"], entry["env_steps"]) for entry in written["checkpoints"]] == [(1, 100), (3, 300)]
        assert sorted(path.name for path in output.parent.iterdir()) == ["seed1.json"]  # the per-checkpoint files gone

    def test_a_failed_evaluation_writes_nothing(self, tmp_path, monkeypatch):
        """When `rlscale evaluate` fails, the job fails with its exit code and leaves no result for Snakemake."""
        from rlscale.study import stages

        monkeypatch.setattr(stages, "run_leased", lambda command, **lease: 2)
        output = tmp_path / "evaluate" / "seed1.json"
        record = self.parity_run(tmp_path)
        assert stages.evaluate(evaluation_job(record, output, "cpu", RunArgs(num_envs=5)), granted=0) == 2
        assert not output.exists() and list(output.parent.iterdir()) == []


def evaluation_job(record: Path, output: Path, device: str, run: RunArgs, every_checkpoint: bool = False) -> Job:
    """The record of an evaluation job of the run whose manifest is ``record``."""
    kind = JobKind.EVALUATE_PARITY if every_checkpoint else JobKind.EVALUATE_TRAIN
    return Job(
        id="evaluate/x", kind=kind, device=device, output=str(output), run=run,
        record=str(record), every_checkpoint=every_checkpoint,
    )  # fmt: skip


def test_plan_names_the_evaluation_only_where_a_task_has_one():
    """The plan printed at parse time lists the evaluation stage for a study of a robot, and nothing for one without."""
    study = {
        "study": "s", "device": "cuda", "tasks": ["Rlscale-Go1-Flat"], "libraries": [{"name": "rsl_rl"}],
        "world_sizes": [1, 2], "seeds": [1], "num_envs_per_rank": [64], "num_envs_per_task": {},
        "iterations": {"validate": 2, "train": 3, "benchmark": 4}, "validate_num_envs": 8, "warmup_iterations": 1,
        "parity": {}, "evaluation": {"num_envs": 1000, "seed": 0},
    }  # fmt: skip
    lines = plan_lines({**study, "evaluated_tasks": ["Rlscale-Go1-Flat"]})
    evaluation = [line for line in lines if line.startswith("plan evaluation")]
    assert len(evaluation) == 1 and "Rlscale-Go1-Flat" in evaluation[0] and "2 train run(s)" in evaluation[0]
    assert "1000 envs and seed 0" in evaluation[0]
    assert not [line for line in plan_lines({**study, "evaluated_tasks": []}) if "evaluation" in line]


@pytest.mark.parametrize("visible", ["0,1", ""])
def test_too_few_envs_for_the_commands_is_refused(visible):
    """evaluation.num_envs below the evaluation commands of a studied robot (the default study on GPUs studies the
    Go1) is one line naming the key, where it was written and the fix; on CPU the default studies no robot, and the
    value, which would do nothing, passes."""
    config = yaml.safe_load(CONFIG.read_text()) | {"evaluation": {"num_envs": 3}}
    environ = {"CUDA_VISIBLE_DEVICES": visible}
    explicit = {"evaluation.num_envs": "mine.yaml"}
    validate = functools.partial(validated_config, config, SCHEMA, environ, lambda: 0, lambda: None, explicit)
    if not visible:
        assert validate()["evaluated_tasks"] == []
        return
    with pytest.raises(StudyConfigError) as refusal:
        validate()
    assert str(refusal.value) == (
        "config: evaluation.num_envs (from mine.yaml): 3 envs cannot cover the 5 evaluation commands of "
        "Rlscale-Go1-Flat (one env each at least); use at least 5"
    )


TINY_ROBOT_STUDY = """\
study: ci_robot
device: cpu
tasks: [Rlscale-Go1-Flat]
libraries: [{name: rsl_rl}]
world_sizes: [1]
num_envs_per_rank: [8]
seeds: [1]
# 12 validate iterations: the untrained Go1 falls within them, so episodes end and the validation passes.
iterations: {validate: 12, train: 2, benchmark: 3}
checkpoint_interval: 1
warmup_iterations: 1
validate_num_envs: 8
runtime_steps: {warmup: 2, measured: 10}
# One parity run of two iterations (8 envs x 24 steps each).
parity:
  seeds: [1]
  max_env_steps: {Rlscale-Go1-Flat: 384}
  target: {Rlscale-Go1-Flat: {metric: mean_return, at_least: -1000000}}
evaluation: {num_envs: 5, seed: 0}
"""
"""The smallest study of a robot: every stage once, world size 1, the same env count everywhere (one compile)."""


@requires_warp
@pytest.mark.study  # make test-study: about three minutes of both cores, MJX compiling in each job's process
def test_tiny_robot_study_evaluates_its_runs(tmp_path, jax_env):
    """A robot study on CPU runs the evaluation stage: the train run's final checkpoint and each checkpoint of the
    parity run are evaluated, their files read as typed records, and summary.md tables them per world size."""
    config = tmp_path / "robot.yaml"
    config.write_text(TINY_ROBOT_STUDY)
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    command = [
        *(snakemake, "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path), "--cores", "2"),
        *("--workflow-profile", str(ROOT / "workflow" / "profiles" / "default"), "--configfile", str(config)),
    ]
    env = {**os.environ, "RLSCALE_LEASE_DIR": str(tmp_path / "lease"), "OMP_NUM_THREADS": "1", **jax_env}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    results = tmp_path / "results" / "ci_robot"
    cell = {"task": "Rlscale-Go1-Flat", "rl_library": "rsl_rl", "world_size": 1}
    train = read_evaluation(results / "evaluate/train/Rlscale-Go1-Flat/rsl_rl/ws1.json", {**cell, "stage": "train"})
    parity = read_evaluation(
        results / "evaluate/parity/Rlscale-Go1-Flat/rsl_rl/ws1/lr-none_norm-library/seed1.json",
        {**cell, "stage": "parity", "variant": "lr-none_norm-library", "seed": 1},
    )
    assert [point.iterations for point in train.checkpoints] == [2]  # the final checkpoint only
    assert [point.iterations for point in parity.checkpoints] == [1, 2]  # each the run saved
    assert train.final.env_steps == parity.final.env_steps == 2 * 8 * 24 and train.final.envs == 5
    for point in (*train.checkpoints, *parity.checkpoints):
        assert math.isfinite(point.lin_vel_error_mps) and 0 <= point.fall_rate <= 1
    summary = (results / "summary.md").read_text()
    assert "## Evaluation: tracking error and falls per world size" in summary
    assert re.search(r"^\| train \| rsl_rl \| – \| 1 \| 1 \| 384 \| ", summary, re.MULTILINE)
    assert re.search(r"^\| parity \| rsl_rl \| lr-none_norm-library \| 1 \| 1 \| 384 \| ", summary, re.MULTILINE)
