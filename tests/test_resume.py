"""``rlscale train --resume auto`` and atomic checkpoints: which run it continues (the latest of its --run_name and kind
of command; one of another task, library or framework refused), continuing it in place (on every library path:
tests/test_train.py), from its newest checkpoint that loads, on one device, elastically across world sizes with every
segment kept in the manifest, after torchrun restarted a failed group (``--max_restarts``), and as a Snakemake train
job rerun after its ``snakemake`` was SIGKILLed; and what a resume restores on each library path (weights, optimizer,
adapted learning rate, normalizers, skrl's timestep count), checked against the checkpoint file read without the
library."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
from library_paths import PATH_PARAMS
from rlscale_command import rlscale
from run_manifests import manifest_data, run_manifest
from test_bad_inputs import case, run_case, tree

from rlscale.dist import worker_attempt
from rlscale.manifest import Continued, Segment, read_manifest
from rlscale.paths import atomic_path
from rlscale.resume import (
    RunIdentity,
    TrainingShape,
    latest_run,
    newest_loadable,
    shape_to_keep,
    start_over_note,
    why_segment_began,
)
from rlscale.rl.common import parameter_digest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
TRAIN = ["--task", "Isaac-Cartpole-Direct", "--num_envs", "16", "--device", "cpu", "--resume", "auto"]


def rank0_manifests(log_root: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in log_root.glob("*/*/*/manifest.json")]


IDENTITY = ("Isaac-Cartpole-Direct", "rsl_rl", "torch")
"""Task, library and framework of :func:`recorded_run`'s runs unless told otherwise (:data:`TRAIN`'s)."""


def recorded_run(
    log_root: Path, directory: str, run_name: str | None = None, manifest: dict | None = None, **args
) -> Path:
    """A run directory ``log_root/directory`` holding only a rank-0 manifest with these ``args`` (by default an
    ``rlscale train`` run of :data:`IDENTITY`, which trained no iteration) and other ``manifest`` fields, written
    after every one made before."""
    task, rl_library, ml_framework = IDENTITY
    defaults = {"command": "rlscale train", "task": task, "rl_library": rl_library, "ml_framework": ml_framework}
    path = log_root / directory / "manifest.json"
    path.parent.mkdir(parents=True)
    fields = (manifest or {}) | {"args": defaults | args | {"run_name": run_name}}
    path.write_text(json.dumps(manifest_data(fields)))
    newest = max((other.stat().st_mtime for other in log_root.rglob("manifest.json")), default=0)
    os.utime(path, (newest + 1, newest + 1))  # distinct modification times, in the order made
    return path.parent


ELASTIC_PATHS = [
    PATH_PARAMS[0],
    *(pytest.param(*param.values, marks=pytest.mark.extras, id=param.id) for param in PATH_PARAMS[1:3]),
]
"""Each library on torch, for a run continued at three world sizes: make test trains rsl_rl's, make test-extras
rl_games' and skrl's (five invocations of up to 4 ranks each)."""

NAMED = "--device cpu --run_name long --resume auto"
REFUSED = [
    (case("other-task", f"train --task Isaac-Cartpole {NAMED}", "rlscale train: error: --resume auto: run 'long' "
          "under logs", "ran with --task Isaac-Cartpole-Direct, not Isaac-Cartpole",
          "pass another --run_name to start a new run, or drop --resume"), {"run_name": "long"}),
    (case("other-library-launcher", f"train_multigpu --num_gpus 2 --task Isaac-Cartpole-Direct --rl_library rl_games "
          f"{NAMED}", "rlscale train_multigpu: error:", "ran with --rl_library rsl_rl, not rl_games",
          "pass another --run_name"), {"run_name": "long"}),
    (case("other-framework", f"train --task Isaac-Cartpole-Direct --rl_library skrl --ml_framework jax {NAMED}",
          "ran with --ml_framework torch, not jax", "pass another --run_name"),
     {"run_name": "long", "rl_library": "skrl"}),
    (case("unnamed-other-task", "train --task Isaac-Cartpole --device cpu --resume auto", "the unnamed run under logs",
          "--task Isaac-Cartpole-Direct, not Isaac-Cartpole", "pass --run_name NAME to start a new run"), {}),
    (case("other-lr-scaling", f"train --task Isaac-Cartpole-Direct --num_envs 64 {NAMED}", "rlscale train: error: "
          "--resume auto: continuing logs/", "would change --lr_scaling from linear to none; continue it as it ran",
          "or pass --resume_elastic to change it on purpose"),
     {"run_name": "long", "lr_scaling": "linear", "manifest": {"iterations_completed": 2}}),
]  # fmt: skip
"""Commands whose ``--resume auto`` finds, under ``logs``, a run (made by :func:`recorded_run` with these args) of
another task, library or ML framework, or one it would continue with another learning rate."""


class TestAtomicWrite:
    def test_interrupted_write_leaves_nothing_under_the_name(self, tmp_path):
        """An exception (Ctrl-C, SIGTERM) during the write removes the temporary; the name never appears."""
        with pytest.raises(KeyboardInterrupt), atomic_path(tmp_path / "model_9.pt") as temporary:
            temporary.write_bytes(b"half a checkpoint")
            raise KeyboardInterrupt
        assert list(tmp_path.iterdir()) == []

    def test_sigkilled_write_leaves_only_a_hidden_file(self, tmp_path):
        """SIGKILL during the write runs no cleanup: a hidden temporary stays, which no discovery picks."""
        code = (
            "import os, signal, sys\n"
            "from rlscale.paths import atomic_path\n"
            "with atomic_path(sys.argv[1]) as temporary:\n"
            "    temporary.write_bytes(b'half a checkpoint')\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n"
        )
        result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "model_9.pt")], env=ENV)
        assert result.returncode == -signal.SIGKILL
        assert [path.name.startswith(".") for path in tmp_path.iterdir()] == [True]
        from rlscale.rl import rsl_rl

        assert rsl_rl.find_checkpoints(tmp_path, {}, "torch") == []

    def test_completed_write_is_renamed_into_place(self, tmp_path):
        with atomic_path(tmp_path / "model_9.pt") as temporary:
            torch.save({"iter": 9}, temporary)
        assert [path.name for path in tmp_path.iterdir()] == ["model_9.pt"]
        assert torch.load(tmp_path / "model_9.pt", weights_only=True) == {"iter": 9}


class TestSelection:
    def test_newest_loadable_below_the_total(self, tmp_path):
        """The most iterations wins, unless it does not load or leaves nothing to train; skips are reported."""
        for iterations in (2, 4, 6, 8):
            torch.save({"iter": iterations}, tmp_path / f"{iterations}.pt")
        (tmp_path / "6.pt").write_bytes((tmp_path / "6.pt").read_bytes()[:100])  # truncated
        candidates = [(iterations, tmp_path / f"{iterations}.pt") for iterations in (2, 4, 6, 8)]
        skipped = []
        chosen = newest_loadable(candidates, "torch", below=8, skipped=lambda path, error: skipped.append(path))
        assert chosen == tmp_path / "4.pt" and skipped == [tmp_path / "6.pt"]
        assert newest_loadable(candidates, "torch", below=2, skipped=skipped.append) is None

    def test_latest_run_of_the_same_name_and_kind_of_command(self, tmp_path):
        """Only runs of the same --run_name (none: only unnamed ones) and kind of command qualify, whatever their
        task or library; the one written last wins. train_multigpu continues train's runs, never a benchmark's."""
        named = recorded_run(tmp_path, "rsl_rl/Isaac-Cartpole/1_x", run_name="x")
        unnamed = recorded_run(tmp_path, "rl_games/Isaac-Cartpole-Direct/2", rl_library="rl_games")
        newer_named = recorded_run(tmp_path, "rsl_rl/Isaac-Cartpole/3_x", run_name="x")
        benchmark = recorded_run(tmp_path, "rsl_rl/Isaac-Cartpole/4", command="rlscale benchmark training_multigpu")
        recorded_run(tmp_path, "rsl_rl/Isaac-Cartpole/5_y", run_name="y")
        (tmp_path / "rsl_rl" / "Isaac-Cartpole" / "6").mkdir()  # no manifest: not a run
        asked = RunIdentity("rlscale train_multigpu", None, "Isaac-Cartpole", "rsl_rl", "torch")
        recorded = RunIdentity("rlscale train", None, "Isaac-Cartpole-Direct", "rl_games", "torch")
        assert latest_run(tmp_path, asked) == (unnamed, recorded)
        assert latest_run(tmp_path, dataclasses.replace(asked, run_name="x"))[0] == newer_named != named
        assert latest_run(tmp_path, dataclasses.replace(asked, command="rlscale benchmark training"))[0] == benchmark
        assert latest_run(tmp_path, dataclasses.replace(asked, run_name="z")) is None


class TestTrainingShape:
    SHAPE = TrainingShape(world_size=2, num_envs_per_rank=8, lr_scaling="none", normalizer_sync=False)

    def test_another_split_of_the_same_global_batch_changes_nothing(self):
        for world_size, num_envs in ((1, 16), (2, 8), (4, 4)):
            now = dataclasses.replace(self.SHAPE, world_size=world_size, num_envs_per_rank=num_envs)
            assert self.SHAPE.changes_to(now) == []

    def test_each_change_of_how_the_run_learns_is_named(self):
        """The global batch, --lr_scaling, a learning rate that --lr_scaling ties to the world size, and the
        normalizer sync; a recorded run without an env count changes its batch by definition."""
        replace = functools.partial(dataclasses.replace, self.SHAPE)
        assert self.SHAPE.changes_to(replace(world_size=4)) == [
            "the global batch from 2 rank(s) x 8 envs (16) to 4 rank(s) x 8 envs (32)"
        ]
        assert self.SHAPE.changes_to(replace(lr_scaling="linear")) == ["--lr_scaling from none to linear"]
        scaled = replace(lr_scaling="sqrt")
        assert scaled.changes_to(dataclasses.replace(scaled, world_size=1, num_envs_per_rank=16)) == [
            "the learning rate, which --lr_scaling sqrt scales from 2 to 1 rank(s)"
        ]
        assert self.SHAPE.changes_to(replace(normalizer_sync=True)) == ["--sync_normalizer from off to on"]
        assert len(replace(num_envs_per_rank=None).changes_to(self.SHAPE)) == 1

    def test_a_run_that_trained_nothing_has_no_shape_to_keep(self):
        assert shape_to_keep(run_manifest({"iterations_completed": 0})) is None
        assert shape_to_keep(run_manifest({"iterations_completed": 3, "world_size": 2})) == TrainingShape(
            2, 64, "none", False
        )


class TestStartOverNote:
    ARGV = ["--task", "Isaac-Cartpole-Direct", "--device", "cpu", "--resume", "path/model_9.pt", "--seed=3"]

    @staticmethod
    def stopped(status: str, last_iteration: int) -> dict:
        """A manifest's fields of a run that ended with this status after this iteration."""
        segment = Segment("2026-01-01T00:00:00+00:00", 1, 16, 0, last_iteration, 1.0, status, "start")
        return {"status": status, "segments": [dataclasses.asdict(segment)]}

    def note(self, log_root: Path) -> str | None:
        asked = RunIdentity("rlscale train", None, *IDENTITY)
        return start_over_note(log_root, asked, "rlscale train", self.ARGV)

    @pytest.mark.parametrize("status", ["interrupted", "crashed"])
    def test_a_rerun_says_it_starts_over_and_how_to_continue(self, tmp_path, status):
        run_dir = recorded_run(tmp_path, "rsl_rl/Isaac-Cartpole-Direct/a", manifest=self.stopped(status, 9))
        assert self.note(tmp_path) == (
            f"[rlscale] starting a new run: the unnamed run's latest, {run_dir}, {status} after iteration 10; to "
            "continue it instead: rlscale train --task Isaac-Cartpole-Direct --device cpu --seed=3 --resume auto"
        )

    def test_nothing_to_say_after_a_finished_run_or_one_that_trained_nothing(self, tmp_path):
        assert self.note(tmp_path) is None  # no run yet
        recorded_run(tmp_path, "rsl_rl/Isaac-Cartpole-Direct/a", manifest={"status": "interrupted"})
        assert self.note(tmp_path) is None  # it finished no iteration
        recorded_run(tmp_path, "rsl_rl/Isaac-Cartpole-Direct/b", manifest=self.stopped("completed", 9))
        assert self.note(tmp_path) is None


@pytest.mark.parametrize(
    ("first_iteration", "environ", "began"),
    [
        (0, {}, "start"),
        (0, {"TORCHELASTIC_RESTART_COUNT": "0", "SLURM_RESTART_COUNT": ""}, "start"),
        (40, {}, "resume"),
        (40, {"SLURM_RESTART_COUNT": "1"}, "requeue"),
        (0, {"SLURM_RESTART_COUNT": "2"}, "requeue"),  # requeued before its first checkpoint
        (40, {"SLURM_RESTART_COUNT": "1", "TORCHELASTIC_RESTART_COUNT": "1"}, "restart"),
    ],
)
def test_why_a_segment_began(first_iteration, environ, began):
    assert why_segment_began(first_iteration, worker_attempt(environ), environ) == began


class TestResumeAuto:
    def test_truncated_newest_checkpoint_is_skipped(self, tmp_path):
        """A damaged newest checkpoint is passed over, with a line saying so, for the one before it."""
        args = [*TRAIN, "--checkpoint_interval", "2", "--log_root", str(tmp_path)]
        first = rlscale("train", *args, "--max_iterations", "6", env=ENV)
        assert first.returncode == 0, first.stderr[-3000:]
        run_dir = Path(rank0_manifests(tmp_path)[0]["run_dir"])
        assert sorted(path.name for path in run_dir.glob("model_*.pt")) == [f"model_{i}.pt" for i in (0, 2, 4, 5)]
        newest = run_dir / "model_5.pt"
        newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
        second = rlscale("train", *args, "--max_iterations", "8", env=ENV)
        assert second.returncode == 0, second.stderr[-3000:]
        assert f"--resume auto: skipping {newest}, it cannot be loaded (" in second.stderr
        [manifest] = rank0_manifests(tmp_path)
        assert manifest["resumed_from"] == str(run_dir / "model_4.pt")
        assert (manifest["start_iteration"], manifest["iterations_completed"]) == (5, 8)

    @pytest.mark.parametrize("path", ELASTIC_PATHS)
    def test_a_run_continues_on_1_2_and_4_ranks(self, tmp_path, path):
        """A run of 2 ranks x 4 envs continues on 1 rank x 8 (the same global batch: said, not refused); on 2 ranks x
        8 it would double the global batch, refused in one line (exit 2) until --resume_elastic asks for it; then on 4
        ranks x 4. Every rank of a job picks the same run directory and rank 0's checkpoint, the ranks end in sync, and
        rank 0's manifest keeps every segment (rank 1's those it ran in). The final line counts this invocation's
        iterations, not the run's."""
        library, framework = path
        args = [*TRAIN, "--rl_library", library, "--ml_framework", framework, "--log_root", str(tmp_path)]

        def train(ranks: int, num_envs: int, iterations: int, *more: str):
            command = ["train"] if ranks == 1 else ["train_multigpu", "--num_gpus", str(ranks)]
            return rlscale(
                *command, *args, "--num_envs", str(num_envs), "--max_iterations", str(iterations), *more, env=ENV
            )

        first = train(2, 4, 2)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        assert "completed 2 iterations in" in first.stdout
        on_one = train(1, 8, 3)
        assert on_one.returncode == 0, on_one.stdout[-3000:] + on_one.stderr[-3000:]
        assert "continuing on 1 rank(s) x 8 envs; the previous invocation ran 2 rank(s) x 4 envs" in on_one.stdout
        assert "completed iteration 3 of 3 in" in on_one.stdout
        [manifest] = rank0_manifests(tmp_path)
        before = tree(tmp_path)
        doubled = train(2, 8, 4)
        assert doubled.returncode == 2 and tree(tmp_path) == before
        assert [line for line in doubled.stderr.splitlines() if "error" in line] == [
            f"rlscale train_multigpu: error: --resume auto: continuing {manifest['run_dir']} would change the global "
            "batch from 1 rank(s) x 8 envs (8) to 2 rank(s) x 8 envs (16); continue it as it ran (a split of 8 envs "
            "among the ranks keeps the global batch), or pass --resume_elastic to change it on purpose"
        ]
        elastic = train(2, 8, 4, "--resume_elastic")
        assert elastic.returncode == 0, elastic.stdout[-3000:] + elastic.stderr[-3000:]
        assert (
            "--resume auto (--resume_elastic): changing the global batch from 1 rank(s) x 8 envs (8) to 2"
            in elastic.stdout
        )
        on_four = train(4, 4, 6)
        assert on_four.returncode == 0, on_four.stdout[-3000:] + on_four.stderr[-3000:]
        assert "completed iterations 5-6 of 6 in" in on_four.stdout
        [manifest] = rank0_manifests(tmp_path)
        rank1 = json.loads(Path(manifest["run_dir"], "rank_1", "manifest.json").read_text())
        assert manifest["resumed_from"] == rank1["resumed_from"]
        assert Path(manifest["resumed_from"]).parent.is_relative_to(manifest["run_dir"])
        assert (rank1["start_iteration"], rank1["iterations_completed"]) == (4, 6)
        assert len(manifest["rank_param_digests"]) == 4 and len(set(manifest["rank_param_digests"])) == 1

        def shape(segments) -> list[tuple]:
            return [
                (segment.world_size, segment.num_envs_per_rank, segment.first_iteration, segment.last_iteration)
                for segment in segments
            ]

        segments = read_manifest(Path(manifest["run_dir"], "manifest.json")).segments
        assert shape(segments) == [(2, 4, 0, 1), (1, 8, 2, 2), (2, 8, 3, 3), (4, 4, 4, 5)]
        assert all(segment.status == "completed" and segment.wall_time_s > 0 for segment in segments)
        assert sorted(segment.start_time for segment in segments) == [segment.start_time for segment in segments]
        assert shape(read_manifest(Path(manifest["run_dir"], "rank_1", "manifest.json")).segments) == [
            (2, 4, 0, 1),
            (2, 8, 3, 3),
            (4, 4, 4, 5),
        ]

    def test_a_named_and_an_unnamed_run_continue_only_themselves(self, tmp_path):
        """Without --run_name, --resume auto continues neither a named run nor a benchmark's unnamed one (a new run
        starts, theirs are untouched); with --run_name it continues that run, not the unnamed one written since."""
        runs = tmp_path / "rsl_rl" / "Isaac-Cartpole-Direct"
        named = recorded_run(tmp_path, "rsl_rl/Isaac-Cartpole-Direct/2020-01-01_00-00-00_a", run_name="a")
        benchmark = recorded_run(
            tmp_path, "rsl_rl/Isaac-Cartpole-Direct/2020-01-01_00-00-01", command="rlscale benchmark training"
        )
        before = {run: (run / "manifest.json").read_text() for run in (named, benchmark)}
        args = [*TRAIN, "--log_root", str(tmp_path), "--max_iterations", "1"]
        unnamed = rlscale("train", *args, env=ENV)
        assert unnamed.returncode == 0, unnamed.stderr[-3000:]
        [new] = set(runs.iterdir()) - {named, benchmark}
        assert f"--resume auto: starting from scratch in {new}\n" in unnamed.stdout
        assert {run: (run / "manifest.json").read_text() for run in before} == before
        again = rlscale("train", *args, "--run_name", "a", env=ENV)
        assert again.returncode == 0, again.stderr[-3000:]
        assert f"--resume auto: starting from scratch in {named}\n" in again.stdout
        assert set(runs.iterdir()) == {named, benchmark, new}
        assert json.loads((named / "manifest.json").read_text())["args"]["run_name"] == "a"
        assert len(read_manifest(new / "manifest.json").segments) == 1

    @pytest.mark.parametrize(("item", "recorded"), REFUSED, ids=[item.id for item, _ in REFUSED])
    def test_a_run_of_another_task_library_or_framework_is_refused(self, item, recorded, tmp_path, monkeypatch, capsys):
        """The run --resume auto would continue ran with another task, library or ML framework, or would learn at
        another rate: one line naming the option, both values and the fix; exit 2; nothing written (the launcher
        refuses before it launches)."""
        monkeypatch.chdir(tmp_path)
        library = recorded.get("rl_library", IDENTITY[1])
        name = f"{library}/{IDENTITY[0]}/2020-01-01_00-00-00{'_long' if recorded.get('run_name') else ''}"
        recorded_run(tmp_path / "logs", name, **recorded)
        before = tree(tmp_path)
        code, out, lines = run_case(item, tmp_path, monkeypatch, capsys)
        assert (code, out, len(lines)) == (2, "", 1), lines
        assert [text for text in item.needs if text not in lines[0]] == [], lines[0]
        assert tree(tmp_path) == before

    def test_bad_checkpoint_interval_is_refused(self, tmp_path):
        result = rlscale("train", *TRAIN, "--checkpoint_interval", "0", "--log_root", str(tmp_path / "logs"), env=ENV)
        assert result.returncode == 2
        assert [line for line in result.stderr.splitlines() if "error:" in line] == [
            "rlscale train: error: --checkpoint_interval must be at least 1 (got 0)"
        ]
        assert not (tmp_path / "logs").exists()


class TestRestarts:
    @pytest.mark.parametrize("path", ELASTIC_PATHS)
    def test_a_restarted_group_continues_from_its_checkpoint(self, tmp_path, path):
        """Rank 1 crashes at iteration 3 of torchrun's first attempt only; under --max_restarts 1 torchrun restarts the
        group, and every rank continues the same run directory from its newest checkpoint, as --resume auto would,
        though none was asked for. The run completes; each rank's manifest keeps the crashed attempt's segment, then
        the restart's from the checkpoint's iteration, with every iteration recorded once."""
        library, framework = path
        result = rlscale(
            "train_multigpu", "--num_gpus", "2", "--task", "Isaac-Cartpole-Direct", "--num_envs", "16",
            "--device", "cpu", "--rl_library", library, "--ml_framework", framework, "--max_iterations", "5",
            "--checkpoint_interval", "2", "--max_restarts", "1", "--log_root", str(tmp_path),
            env={**ENV, "RLSCALE_INJECT_FAULT": "crash:rank=1,iteration=3,attempt=0"},
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        [manifest] = rank0_manifests(tmp_path)
        run_dir, checkpoint = Path(manifest["run_dir"]), Path(manifest["resumed_from"])
        start = manifest["start_iteration"]
        assert checkpoint.is_relative_to(run_dir) and 0 < start <= 3
        assert [line for line in result.stdout.splitlines() if line.startswith("[rlscale] restart")] == [
            f"[rlscale] restart 1 of 1 after a failed rank: continuing from {checkpoint.name} ({start}/5) in {run_dir}"
        ]
        rank1 = json.loads((run_dir / "rank_1" / "manifest.json").read_text())
        assert rank1["resumed_from"] == str(checkpoint) and len(set(manifest["rank_param_digests"])) == 1
        for rank_dir in (run_dir, run_dir / "rank_1"):
            recorded = read_manifest(rank_dir / "manifest.json")
            began = [(segment.began, segment.status, segment.first_iteration) for segment in recorded.segments]
            assert began == [("start", "crashed", 0), ("restart", "completed", start)], rank_dir
            assert recorded.segments[0].last_iteration >= start - 1
            assert [record.iteration for record in recorded.iterations] == list(range(5))


@pytest.mark.parametrize("status", ["interrupted", "running", "crashed"])
def test_a_restart_keeps_the_failed_attempt_crashed(status):
    """torchrun restarts a group only after a rank failed: the attempt's segment is kept as crashed, whatever this rank
    recorded when torchrun stopped it (interrupted), or had no time to (running: SIGKILLed)."""
    earlier = Segment("2026-01-01T00:00:00+00:00", 2, 16, 0, 4, 10.0, "interrupted", "start")
    failed = Segment("2026-01-01T01:00:00+00:00", 2, 16, 5, None, None, status, "resume")
    continued = Continued((earlier, failed), ({"iteration": 0},))
    kept = continued.after_a_failure()
    assert kept == Continued((earlier, dataclasses.replace(failed, status="crashed")), continued.iterations)


RESUME_TASK = "Isaac-Cartpole-Direct"  # its rl_games and skrl configs normalise observations
STRICT_KL = 1e-9
"""A KL threshold that every update exceeds, so each adaptive schedule lowers the learning rate from the first update
on and the checkpoint's rate differs from the config's."""
SKRL_NORMALIZERS = ("observation_preprocessor", "value_preprocessor")


def resume_agent_cfg(library: str) -> dict:
    """The task's agent config with the strict KL threshold, and one epoch of few minibatches, so that the learning
    rate falls by the schedule's 1.5 once per iteration, well above its floor: rl_games and skrl judge the KL after
    the step, rsl_rl before it (two minibatches: the first always sees the rollout's own policy). rsl_rl's
    observation normalizers are on."""
    from rlscale.tasks import load_agent_cfg

    cfg = load_agent_cfg(RESUME_TASK, library)
    if library == "rsl_rl":
        cfg["algorithm"].update(desired_kl=STRICT_KL, num_learning_epochs=1, num_mini_batches=2)
        cfg["actor"]["obs_normalization"] = cfg["critic"]["obs_normalization"] = True
    elif library == "rl_games":
        config = cfg["params"]["config"]
        config.update(kl_threshold=STRICT_KL, mini_epochs=1, minibatch_size_per_env=config["horizon_length"])
    else:
        cfg["agent"].update(learning_epochs=1, mini_batches=1)
        cfg["agent"]["learning_rate_scheduler_kwargs"]["kl_threshold"] = STRICT_KL
    return cfg


def config_learning_rate(library: str, cfg: dict) -> float:
    if library == "rsl_rl":
        return cfg["algorithm"]["learning_rate"]
    if library == "rl_games":
        return cfg["params"]["config"]["learning_rate"]
    return cfg["agent"]["learning_rate"]


def loaded_state(library: str, framework: str, trainer) -> dict:
    """Copies of what the library holds right after loading a checkpoint: the (policy) optimizer's state, the learning
    rate its schedule continues from, and the normalizers' statistics."""
    if library == "rsl_rl":
        alg = trainer.alg
        state = {
            "optimizer": alg.optimizer.state_dict(),
            "learning_rate": alg.learning_rate,
            "normalizers": {model: getattr(alg, model).obs_normalizer.state_dict() for model in ("actor", "critic")},
        }
    elif library == "rl_games":
        state = {
            "optimizer": trainer.optimizer.state_dict(),
            "learning_rate": trainer.last_lr,
            "normalizers": {
                name: getattr(trainer.model, name).state_dict() for name in ("running_mean_std", "value_mean_std")
            },
        }
    elif framework == "torch":
        state = {
            "optimizer": trainer.optimizer.state_dict(),
            "learning_rate": trainer.optimizer.param_groups[0]["lr"],  # skrl's KLAdaptiveLR steps the param groups
            "normalizers": {name: trainer.checkpoint_modules[name].state_dict() for name in SKRL_NORMALIZERS},
        }
    else:
        import flax.serialization
        import jax

        state = jax.device_get(
            {
                "optimizer": flax.serialization.to_state_dict(trainer.policy_optimizer),
                "learning_rate": trainer.policy_learning_rate,
                "normalizers": {name: trainer.checkpoint_modules[name].state_dict.params for name in SKRL_NORMALIZERS},
            }
        )
    return copy.deepcopy(state)


def checkpoint_state(library: str, framework: str, path: Path) -> dict:
    """The same as :func:`loaded_state`, with the policy's parameters and the optimizer's step count, read from the
    checkpoint file by the library's own key names, without the library."""
    if framework == "jax":
        import flax.serialization
        import jax

        with open(path, "rb") as file:
            saved = {name: flax.serialization.msgpack_restore(data) for name, data in pickle.load(file).items()}
        optimizer = saved["policy_optimizer"]
        return {
            "policy": {
                jax.tree_util.keystr(key): leaf for key, leaf in jax.tree_util.tree_leaves_with_path(saved["policy"])
            },
            "optimizer": optimizer,
            "adam_steps": int(optimizer["state"]["1"]["count"]),  # optax.chain(clip_by_global_norm, scale_by_adam)
            "learning_rate": saved["policy_learning_rate"],
            "normalizers": {name: saved[name] for name in SKRL_NORMALIZERS},
            "iteration": None,  # skrl counts timesteps, in the checkpoint's name
        }
    saved = torch.load(path, map_location="cpu", weights_only=True)
    if library == "rsl_rl":
        optimizer = saved["optimizer_state_dict"]
        prefix = "obs_normalizer."
        policy = {key: value for key, value in saved["actor_state_dict"].items() if not key.startswith(prefix)}
        normalizers = {
            model: {
                key.removeprefix(prefix): value
                for key, value in saved[f"{model}_state_dict"].items()
                if key.startswith(prefix)
            }
            for model in ("actor", "critic")
        }
    elif library == "rl_games":
        optimizer = saved["optimizer"]
        buffers = ("running_mean_std", "value_mean_std")
        policy = {key: value for key, value in saved["model"].items() if key.split(".")[0] not in buffers}
        normalizers = {
            name: {
                key.removeprefix(f"{name}."): value
                for key, value in saved["model"].items()
                if key.startswith(f"{name}.")
            }
            for name in buffers
        }
    else:
        optimizer = saved["optimizer"]
        policy = saved["policy"]
        normalizers = {name: saved[name] for name in SKRL_NORMALIZERS}
    return {
        "policy": policy,
        "optimizer": optimizer,
        "adam_steps": int(optimizer["state"][0]["step"]),
        "learning_rate": optimizer["param_groups"][0]["lr"],
        "normalizers": normalizers,
        "iteration": saved.get("iter", saved.get("epoch")),  # rsl_rl's and rl_games' own counters; skrl has none
    }


def second_moments(framework: str, optimizer: dict) -> list[np.ndarray]:
    """Adam's running averages of squared gradients, one array per parameter, from a checkpoint's optimizer."""
    if framework == "jax":
        import jax

        return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(optimizer["state"]["1"]["nu"])]
    return [np.asarray(state["exp_avg_sq"]) for _, state in sorted(optimizer["state"].items())]


def checkpoint_after(library: str, framework: str, run_dir: Path, iterations: int) -> Path:
    """The checkpoint a run saved after its ``iterations``-th iteration (counted from the start of training), by the
    library's own naming."""
    if library == "rsl_rl":
        return run_dir / f"model_{iterations - 1}.pt"
    if library == "rl_games":
        return sorted((run_dir / "nn").glob(f"last_*_ep_{iterations}_rew_*.pth"))[0]
    rollouts = resume_agent_cfg(library)["agent"]["rollouts"]
    return run_dir / "checkpoints" / f"agent_{iterations * rollouts}{'.pickle' if framework == 'jax' else '.pt'}"


def assert_same_state(loaded, saved, where: str = "") -> None:
    if isinstance(saved, dict):
        assert loaded.keys() == saved.keys(), where
        for key in saved:
            assert_same_state(loaded[key], saved[key], f"{where}/{key}")
    else:
        assert np.array_equal(np.asarray(loaded), np.asarray(saved)), where


def train_then_resume(library: str, framework: str, out: Path) -> None:
    """Run in a process of its own (the libraries change process globals): train 3 iterations with a checkpoint
    after each, then resume from the last for 2 more, keeping what the library held right after its load; the results
    go to ``out/resume.pkl``."""
    from rlscale.dist import RankInfo
    from rlscale.rl import load_adapter
    from rlscale.rl.common import TrainContext
    from rlscale.tasks import make_task

    adapter = load_adapter(library)
    cfg = resume_agent_cfg(library)
    loaded = {}

    def train(name: str, iterations: int, resume: Path | None = None):
        ctx = TrainContext(
            device="cpu", max_iterations=iterations, seed=1, log_dir=out / name, rank=RankInfo(), resume=resume,
            ml_framework=framework, checkpoint_interval=1,
            on_resumed=lambda trainer: loaded.update(loaded_state(library, framework, trainer)),
        )  # fmt: skip
        return adapter.train(make_task(RESUME_TASK, num_envs=16, device="cpu", seed=1), cfg, ctx)

    first = train("first", 3)
    resumed = train("resumed", 2, resume=first.checkpoint)
    train("straight", 4)  # uninterrupted, same seed, to the resumed run's first iteration
    with open(out / "resume.pkl", "wb") as file:
        pickle.dump(
            {"checkpoint": first.checkpoint, "resumed_param_digest": resumed.resumed_param_digest, "loaded": loaded},
            file,
        )


@pytest.fixture(scope="module", params=PATH_PARAMS)
def resumed_run(request, tmp_path_factory) -> tuple[str, str, Path, dict]:
    """:func:`train_then_resume` of one library path: its library, framework, folder and results."""
    library, framework = request.param
    out = tmp_path_factory.mktemp(f"resume-{library}-{framework}")
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_resume; "
        f"test_resume.train_then_resume({library!r}, {framework!r}, test_resume.Path({str(out)!r}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out / "resume.pkl", "rb") as file:
        return library, framework, out, pickle.load(file)


STOP_PATHS = [pytest.param(*param.values, marks=pytest.mark.extras, id=param.id) for param in PATH_PARAMS[1:]]
"""rl_games and skrl (torch and JAX) for a run stopped at an iteration boundary: make test-extras trains them; rsl_rl's
two-rank stop is test_reliability's TestCtrlC, in make test."""


@pytest.mark.parametrize("path", STOP_PATHS)
def test_ctrl_c_keeps_a_checkpoint_of_the_iteration_it_stopped_at(tmp_path, path):
    """Ctrl-C waits for the iteration's end, writes the library's checkpoint of every finished iteration, records it,
    and prints the command that continues the run; that command goes on from that checkpoint."""
    library, framework = path
    args = [*TRAIN, "--rl_library", library, "--ml_framework", framework, "--log_root", str(tmp_path)]
    command = [sys.executable, "-m", "rlscale", "train", *args, "--max_iterations", "100000"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV) as run:
        lines = []
        for line in run.stdout:
            lines.append(line)
            if "[rlscale] it 3/" in line:
                run.send_signal(signal.SIGINT)
        output = "".join(lines)
    assert run.returncode == 128 + signal.SIGINT, output[-3000:]
    [manifest] = rank0_manifests(tmp_path)
    stop = manifest["stop"]
    assert (manifest["status"], stop["signal"]) == ("interrupted", "SIGINT")
    assert stop["iterations"] == len(manifest["iterations"]) >= 3  # every finished iteration, none trained in vain
    assert f"stopped after iteration {stop['iterations']}; checkpoint {stop['checkpoint']}" in output
    continued = re.search(r"to continue this run: (.*)", output).group(1).split()
    assert continued[:2] == ["rlscale", "train"] and continued[-2:] == ["--resume", "auto"]
    total = str(stop["iterations"] + 1)
    resumed = rlscale(*continued[1:], "--max_iterations", total, env=ENV)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    name = Path(stop["checkpoint"]).name
    assert f"--resume auto: continuing from {name} ({stop['iterations']}/{total})" in resumed.stdout


class TestResumeRestoresTrainingState:
    def test_loaded_state_equals_the_checkpoint(self, resumed_run):
        """Right after the load, the policy, the optimizer's moments and step count, the learning rate the adaptive
        schedule had reached and the normalizers' statistics equal the checkpoint's; skrl's timestep count goes on."""
        library, framework, tmp_path, run = resumed_run
        saved = checkpoint_state(library, framework, run["checkpoint"])
        loaded = run["loaded"]

        assert run["resumed_param_digest"] == parameter_digest(saved["policy"])
        assert saved["adam_steps"] > 0
        assert_same_state(loaded["optimizer"], saved["optimizer"], "optimizer")
        assert saved["learning_rate"] < config_learning_rate(library, resume_agent_cfg(library))
        assert loaded["learning_rate"] == saved["learning_rate"]
        assert any(
            np.any(np.asarray(value) != 0) for stats in saved["normalizers"].values() for value in stats.values()
        )
        assert_same_state(loaded["normalizers"], saved["normalizers"], "normalizers")
        if library == "skrl":  # skrl names periodic checkpoints by the timestep its agent is given (best_agent by none)
            rollouts = resume_agent_cfg(library)["agent"]["rollouts"]
            names = sorted(path.name for path in (tmp_path / "resumed" / "checkpoints").glob("agent_*"))
            assert names == [f"agent_{iterations * rollouts}{Path(run['checkpoint']).suffix}" for iterations in (4, 5)]

    def test_first_update_after_the_resume_continues_the_run(self, resumed_run):
        """After the first update following the resume, the run is where an uninterrupted run of the same seed is
        after as many updates: the same optimizer step count, learning rate and iteration counter. The rollouts differ
        (the envs restart), so the moments are checked by Adam's own rule: after k more steps each second moment is at
        least beta2**k times the checkpoint's, which a fresh optimizer would not carry."""
        library, framework, out, run = resumed_run
        before = checkpoint_state(library, framework, run["checkpoint"])
        after = checkpoint_state(library, framework, checkpoint_after(library, framework, out / "resumed", 4))
        straight = checkpoint_state(library, framework, checkpoint_after(library, framework, out / "straight", 4))
        assert after["adam_steps"] == straight["adam_steps"] > before["adam_steps"]
        assert after["learning_rate"] == straight["learning_rate"] < before["learning_rate"]
        assert after["iteration"] == straight["iteration"]
        decay = 0.999 ** (after["adam_steps"] - before["adam_steps"])  # beta2: torch's and optax's default, kept
        for index, (carried, now) in enumerate(
            zip(
                second_moments(framework, before["optimizer"]),
                second_moments(framework, after["optimizer"]),
                strict=True,
            )
        ):
            assert np.all(now >= decay * carried * (1 - 1e-6)), f"parameter {index}: moments restarted"


SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
STUDY_CONFIG = [str(ROOT / "config" / "config.yaml"), str(ROOT / ".test" / "config" / "config.yaml")]
TOTAL = 40
INTERVAL = 5


def processes_in(directory: Path) -> list[psutil.Process]:
    """Live processes working in ``directory`` (Snakemake's jobs, launchers and ranks all run in its workdir)."""
    found = []
    for process in psutil.process_iter(["cwd", "status"]):
        if process.info["cwd"] == str(directory) and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


@pytest.mark.study
class TestSnakemakeRerun:
    def test_killed_train_job_continues_from_its_last_checkpoint(self, tmp_path):
        """SIGKILL of snakemake's process group mid-training takes the job's launcher and ranks down too; after
        `snakemake --unlock`, `--rerun-incomplete` continues the train job from its last checkpoint to the total, and
        the final checkpoint loads."""
        overlay = tmp_path / "resume.yaml"
        overlay.write_text(
            f"world_sizes: [1]\niterations: {{validate: 2, train: {TOTAL}, benchmark: 4}}\n"
            f"checkpoint_interval: {INTERVAL}\n"
        )
        workdir = tmp_path / "study"
        workdir.mkdir()
        target = "results/ci_tiny/train/Isaac-Cartpole-Direct/rsl_rl/ws1/manifest.json"
        env = {**ENV, "RLSCALE_LEASE_DIR": str(tmp_path / "lease")}

        def snakemake(*args: str) -> list[str]:
            return [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *args]

        job = [target, "--cores", "2", "--rerun-incomplete", "--configfile", *STUDY_CONFIG, str(overlay)]
        run_root = workdir / target.replace("manifest.json", "run")
        first = subprocess.Popen(snakemake(*job), cwd=workdir, env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            # rsl_rl's model_<i>.pt holds i + 1 iterations: wait for the second periodic checkpoint.
            while not list(run_root.rglob(f"model_{INTERVAL}.pt")) and time.monotonic() < deadline:
                assert first.poll() is None, "snakemake ended before it could be killed"
                time.sleep(0.05)
            assert list(run_root.rglob(f"model_{INTERVAL}.pt")), "no checkpoint within 120 s"
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        killed = time.monotonic()
        while processes_in(workdir) and time.monotonic() < killed + 30:
            time.sleep(0.2)
        assert not processes_in(workdir), [process.cmdline()[:4] for process in processes_in(workdir)]
        assert not (workdir / target).exists()
        [stopped] = [json.loads(path.read_text()) for path in run_root.glob("*/*/*/manifest.json")]
        assert stopped["status"] == "interrupted"  # the launcher got SIGTERM as its job script died
        checkpoints = {int(re.search(r"\d+", path.name).group()): path for path in run_root.rglob("model_*.pt")}
        last = max(checkpoints)
        assert last < TOTAL - 1, "the job finished before the kill"
        torch.load(checkpoints[last], weights_only=True)
        print(f"all gone {time.monotonic() - killed:.1f} s after SIGKILL; last checkpoint model_{last}.pt")

        unlock = subprocess.run(snakemake("--unlock", "--configfile", *STUDY_CONFIG, str(overlay)), env=env)
        assert unlock.returncode == 0
        rerun = subprocess.run(snakemake(*job), cwd=workdir, env=env, capture_output=True, text=True, timeout=180)
        assert rerun.returncode == 0, rerun.stderr[-4000:]
        manifest = json.loads((workdir / target).read_text())
        assert manifest["status"] == "completed"
        assert workdir / manifest["resumed_from"] == checkpoints[last]  # paths relative to the workdir
        assert (manifest["start_iteration"], manifest["iterations_completed"]) == (last + 1, TOTAL)
        # The killed attempt's records up to its checkpoint, then the rerun's.
        assert [record["iteration"] for record in manifest["iterations"]] == list(range(TOTAL))
        killed, rerun_segment = read_manifest(workdir / target).segments  # the killed attempt's segment is kept
        assert (killed.status, killed.first_iteration, rerun_segment.status) == ("interrupted", 0, "completed")
        assert killed.last_iteration >= last and killed.wall_time_s > 0
        assert (rerun_segment.first_iteration, rerun_segment.last_iteration) == (last + 1, TOTAL - 1)
        final = torch.load(workdir / manifest["checkpoint"], weights_only=True)
        assert final["iter"] == TOTAL - 1
        log = (workdir / "logs" / "ci_tiny" / "train" / "Isaac-Cartpole-Direct" / "rsl_rl" / "ws1.log").read_text()
        assert f"--resume auto: continuing from model_{last}.pt ({last + 1}/{TOTAL})" in log
