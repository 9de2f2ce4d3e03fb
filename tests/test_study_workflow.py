"""Tests of the Snakemake study itself: a tiny CPU study end to end, dry runs (local and SLURM), the grant check
under Snakemake, and the linters.

The end-to-end study runs once per session (about a minute on 2 cores) in a temporary working directory, with the
CI overlay ``.test/config/config.yaml`` on ``config/config.yaml``.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from rlscale_command import rlscale

from rlscale.launch.probe_sweep import read_probe_sweep
from rlscale.study import stages
from rlscale.study.aggregate import SCALING_COLUMNS
from rlscale.study.job import Job

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
SNAKEFMT = str(Path(sys.executable).with_name("snakefmt"))
CONFIG = str(ROOT / "config" / "config.yaml")
CI_OVERLAY = str(ROOT / ".test" / "config" / "config.yaml")
PROFILE = str(ROOT / "workflow" / "profiles" / "default")
SLURM_PROFILE = str(ROOT / "config" / "profiles" / "slurm")
STUDY = "ci_tiny"


def snakemake(
    workdir: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 120
) -> subprocess.CompletedProcess:
    """Run Snakemake on this repository's Snakefile in ``workdir`` (results and .snakemake stay there)."""
    command = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, cwd=workdir)


def job_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The environment of a test run: a private lease directory, one thread per CPU rank."""
    return {**os.environ, "RLSCALE_LEASE_DIR": str(tmp / "lease"), "OMP_NUM_THREADS": "1", **extra}


def shell_commands(output: str) -> list[str]:
    """The resolved ``Shell command:`` lines of ``snakemake -n -p`` output."""
    return [line.removeprefix("Shell command: ") for line in output.splitlines() if line.startswith("Shell command: ")]


def job_blocks(output: str) -> list[dict[str, str]]:
    """Each job of ``snakemake -n -p`` output: its rule, wildcards, resources and shell command."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        head = re.match(r"(?:local)?rule (\w+):", block)
        if not head:
            continue
        fields = dict(re.findall(r"^\s+(wildcards|resources): (.*)$", block, re.MULTILINE))
        command = re.search(r"^Shell command: (.*)$", block, re.MULTILINE)
        jobs.append({"rule": head.group(1), **fields, "shell": command.group(1) if command else ""})
    return jobs


def job_of(shell: str) -> Job:
    """The job record a rule's shell command hands to ``python -m rlscale.study run`` (or ``plan``)."""
    words = shlex.split(shell)
    return Job.from_json(words[words.index("rlscale.study") + 2])


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory) -> Path:
    """Run the tiny CPU study (world sizes 1 and 2, rsl_rl, one seed) with the default profile, and the peer
    baseline (off by default) to cover it; return its dir."""
    workdir = tmp_path_factory.mktemp("study")
    result = snakemake(
        workdir,
        "--workflow-profile",
        PROFILE,
        "--cores",
        "2",
        "--configfile",
        CONFIG,
        CI_OVERLAY,
        "--config",
        "peer_baseline=True",
        env=job_env(workdir),
        timeout=480,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return workdir


@pytest.mark.study  # make test-study: the tiny study takes both cores for about two minutes
class TestEndToEnd:
    def test_scaling_csv_columns(self, tiny_study):
        """scaling.csv has the required columns, one row per world size."""
        table = pd.read_csv(tiny_study / "results" / STUDY / "scaling.csv")
        assert list(table.columns) == SCALING_COLUMNS
        assert table["world_size"].tolist() == [1, 2]
        assert set(table["task"]) == {"Isaac-Cartpole-Direct"} and set(table["rl_library"]) == {"rsl_rl"}
        assert table["n_runs"].tolist() == [1, 1]

    def test_efficiency_recomputed_from_bundles(self, tiny_study):
        """The CSV's FPS and efficiency equal what the training bundles' runtime.total_fps.mean give by hand."""
        bundles = {
            size: json.loads(path.read_text())
            for size in (1, 2)
            for path in (tiny_study / "results" / STUDY / "benchmark" / "training").rglob(f"ws{size}/*/seed1.json")
        }
        assert set(bundles) == {1, 2}
        fps = {size: bundle["runtime"]["total_fps"]["mean"] for size, bundle in bundles.items()}
        assert bundles[2]["extra"]["world_size"] == 2 and bundles[2]["extra"]["num_envs_per_rank"] == 32
        table = pd.read_csv(tiny_study / "results" / STUDY / "scaling.csv").set_index("world_size")
        assert table.loc[1, "global_fps_median"] == pytest.approx(fps[1])
        assert table.loc[2, "global_fps_median"] == pytest.approx(fps[2])
        assert table.loc[2, "efficiency"] == pytest.approx(fps[2] / (2 * fps[1]))
        assert table.loc[1, "efficiency"] == pytest.approx(1.0)
        # peer_baseline: each bundle ran the peer side by side; one seed, so the row's ratio is that bundle's own.
        for size, bundle in bundles.items():
            peer = bundle["runtime"]["peer"]
            assert peer["ratio_total_fps_median"] == pytest.approx(
                peer["rlscale_total_fps_median"] / peer["total_fps_median"]
            )
            assert table.loc[size, "peer_ratio_median"] == pytest.approx(peer["ratio_total_fps_median"])

    def test_plots_and_summary(self, tiny_study):
        """The three plots are PNG images and summary.md holds the table and links them."""
        results = tiny_study / "results" / STUDY
        for name in ("throughput.png", "efficiency.png", "learning_curves.png"):
            data = (results / name).read_bytes()
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
        summary = (results / "summary.md").read_text()
        assert "Device: **cpu**" in summary and f"Why: device: cpu, as {CI_OVERLAY} sets." in summary
        assert "| Isaac-Cartpole-Direct | rsl_rl | 32 | 2 | 1 |" in summary
        assert "![efficiency](efficiency.png)" in summary
        # The 2-rank cell predicted from the 1-rank bundle, its collectives priced by the probe's sweep.
        assert re.search(r"\| Isaac-Cartpole-Direct \| rsl_rl \| 32 \| 2 \| .* \| probe sweep: .* GB/s \|", summary)

    def test_every_stage_left_its_output(self, tiny_study):
        """validate wrote a passing verdict, probe its report, train its manifests, startup/runtime their bundles."""
        results = tiny_study / "results" / STUDY
        verdict = json.loads((results / "validate" / "Isaac-Cartpole-Direct" / "rsl_rl.json").read_text())
        assert verdict["ok"] and verdict["iterations_completed"] == 3
        assert "nccl_probe: all 2 ranks ok" in (results / "probe" / "ws2.txt").read_text()
        sweep = read_probe_sweep(results / "probe" / "ws2.json")
        assert (sweep.world_size, sweep.backend, len(sweep.sizes_bytes)) == (2, "gloo", len(stages.PROBE_SIZES))
        for size in (1, 2):
            manifest = json.loads(
                (results / "train" / "Isaac-Cartpole-Direct" / "rsl_rl" / f"ws{size}" / "manifest.json").read_text()
            )
            assert manifest["status"] == "completed" and manifest["world_size"] == size
        assert len(list((results / "benchmark" / "startup").rglob("*.json"))) == 1
        assert len(list((results / "benchmark" / "runtime").rglob("*.json"))) == 1

    def test_parity_verdicts_recomputed_from_records(self, tiny_study):
        """parity.csv's medians, ratio, verdict and speedup equal what the parity runs' records (their manifests'
        iterations) give by hand; its plots are PNG images and summary.md shows the table."""
        results = tiny_study / "results" / STUDY
        crossings: dict[int, list[tuple[float, float]]] = {}
        for path in sorted((results / "parity").rglob("seed*.json")):
            manifest = json.loads(path.read_text())
            reached = [it for it in manifest["iterations"] if it["mean_episode_length"] >= 40]  # the CI target
            crossing = (reached[0]["env_steps"], reached[0]["elapsed_s"]) if reached else (math.inf, math.inf)
            crossings.setdefault(manifest["world_size"], []).append(crossing)
        assert {size: len(runs) for size, runs in crossings.items()} == {1: 2, 2: 2}  # two seeds each
        steps = {size: float(np.median([s for s, _ in runs])) for size, runs in crossings.items()}
        seconds = {size: float(np.median([t for _, t in runs])) for size, runs in crossings.items()}
        table = pd.read_csv(results / "parity.csv").set_index("world_size")
        for size in (1, 2):
            assert table.loc[size, "env_steps_to_target_median"] == pytest.approx(steps[size])
            assert table.loc[size, "wall_time_to_target_median_s"] == pytest.approx(seconds[size])
        if math.isfinite(steps[1]):
            assert bool(table.loc[2, "learns_as_well"]) == (steps[2] <= 1.2 * steps[1])  # default tolerance 0.2
        if math.isfinite(seconds[2]):
            assert table.loc[2, "wall_time_speedup"] == pytest.approx(seconds[1] / seconds[2])
        for name in ("parity_env_steps.png", "parity_wall_time.png"):
            assert (results / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        summary = (results / "summary.md").read_text()
        assert "## Parity" in summary and "![parity_wall_time](parity_wall_time.png)" in summary

    def test_plan_is_the_launched_command(self, tiny_study):
        """The planned command is what the train job launched: no port is added at run time (torchrun takes a free
        one)."""
        plan = (tiny_study / "results" / STUDY / "plan" / "Isaac-Cartpole-Direct" / "rsl_rl" / "ws2.txt").read_text()
        log = (tiny_study / "logs" / STUDY / "train" / "Isaac-Cartpole-Direct" / "rsl_rl" / "ws2.log").read_text()
        launched = shlex.split(re.search(r"Launching distributed workers with: (.*)", log).group(1))
        assert launched == shlex.split(plan)

    def test_parity_so_far_of_a_finished_study_is_its_parity_tables(self, tiny_study, tmp_path):
        """rlscale parity_so_far, given every run, writes the tables the parity_aggregate rule wrote."""
        results = tiny_study / "results" / STUDY
        flags = ["--config", CONFIG, CI_OVERLAY, "--device", "cpu"]
        result = rlscale("parity_so_far", str(results), str(tmp_path), *flags, cwd=ROOT, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "4 of the plan's 4 parity runs" in result.stdout
        for name in ("parity.csv", "parity_runs.csv"):
            pd.testing.assert_frame_equal(pd.read_csv(tmp_path / name), pd.read_csv(results / name))

    def test_another_venv_path_and_a_moved_checkout_rerun_nothing(self, tiny_study, tmp_path):
        """The finished study is up to date for its venv reached by another path and a copy of the checkout elsewhere:
        neither path is a param of its jobs, which Snakemake would rerun."""
        checkout = tmp_path / "moved"
        checkout.mkdir()
        for name in ("Snakefile", "workflow", "scripts", "config"):
            copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
            copy(ROOT / name, checkout / name)
        (tmp_path / "venv").symlink_to(sys.prefix)
        python = tmp_path / "venv" / "bin" / Path(sys.executable).name
        command = [str(python), "-m", "snakemake", "-s", str(checkout / "Snakefile"), "--directory", str(tiny_study)]
        # The moved checkout's own config/config.yaml is its default, as for a user who moved theirs.
        flags = ["-n", "--configfile", str(checkout / "config" / "config.yaml"), CI_OVERLAY]
        result = subprocess.run(
            [*command, *flags, "--config", "peer_baseline=True"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tiny_study,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert "Nothing to be done" in result.stdout + result.stderr, (result.stdout + result.stderr)[-3000:]

    def test_report_shows_plots_with_captions(self, tiny_study):
        """snakemake --report builds an HTML report that embeds the plots (each file's bytes, as a data URI) and their
        captions."""
        report = tiny_study / "report.html"
        result = snakemake(tiny_study, "--configfile", CONFIG, CI_OVERLAY, "--report", str(report))
        assert result.returncode == 0, result.stderr[-2000:]
        html = report.read_text()
        for name in ("throughput.png", "efficiency.png", "learning_curves.png"):
            embedded = base64.b64encode((tiny_study / "results" / STUDY / name).read_bytes()).decode()
            assert f"filename={name};base64,{embedded}" in html, name
        assert "Weak-scaling efficiency against the world size" in html
        assert "plan values (source): cluster local (default)" in html  # summary.md's caption: the plan


class TestGrantUnderSnakemake:
    def test_shrunk_gpu_request_fails_the_job(self, tmp_path):
        """Granted 1 GPU for the ws2 probe (here by --set-resources; a low --resources gpu is refused at parse time),
        the job fails, saying so, instead of running."""
        overlay = tmp_path / "gpu.yaml"
        overlay.write_text("device: cuda\nworld_sizes: [1, 2]\n")
        target = f"results/{STUDY}/probe/ws2.txt"
        # The target goes first: --configfile takes every argument after it.
        result = snakemake(
            tmp_path,
            target, "--cores", "2", "--resources", "gpu=2", "--set-resources", "probe:gpu=1",
            "--configfile", CONFIG, CI_OVERLAY, str(overlay),
            env=job_env(tmp_path, RLSCALE_LEASE_GPUS="0,1", CUDA_VISIBLE_DEVICES="0,1"),
        )  # fmt: skip
        assert result.returncode != 0
        log = (tmp_path / "logs" / STUDY / "probe" / "ws2.log").read_text()
        assert "needs 2 GPU(s) for world size 2 but Snakemake granted resources.gpu=1" in log
        assert "Refusing to run on fewer GPUs" in log
        assert not (tmp_path / target).exists()


class TestDryRun:
    def test_default_config_resolves(self, tmp_path):
        """snakemake -n on the default config resolves (the CPU fallback here: Cartpole only, 3 libraries, world
        sizes 1 and 2)."""
        result = snakemake(tmp_path, "-n", "--configfile", CONFIG, env=job_env(tmp_path, CUDA_VISIBLE_DEVICES=""))
        assert result.returncode == 0, result.stderr[-2000:]
        counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.MULTILINE))
        assert counts["validate"] == "3" and counts["train"] == "6" and counts["probe"] == "1"
        assert counts["benchmark"] == str(3 * 2 * 1)  # libraries x sizes x envs: a cell's seeds run in one job
        assert counts["benchmark_single_seed"] == str(3 + 1)  # startup (per library) + runtime
        assert counts["parity"] == str(1 * 2 * 3)  # the fallback's parity: rsl_rl x sizes x seeds
        assert "Rlscale-Ant" not in result.stdout  # The fallback leaves the MJX task out.
        assert "evaluate" not in result.stdout  # No robot on CPU: no evaluation stage.
        reason = "device: auto chose cpu with the cpu_fallback sizes: CUDA_VISIBLE_DEVICES='' hides every GPU"
        assert reason in result.stdout + result.stderr  # The log says which device and why.

    def test_default_config_on_a_gpu_host(self, tmp_path):
        """On a (faked) 2-GPU host the default study runs the Go1 with every library at 16 384 envs per rank: one
        contract check, then per library its validate, train, benchmark and startup runs, and its parity and
        evaluation runs."""
        result = snakemake(tmp_path, "-n", "--configfile", CONFIG, env=job_env(tmp_path, CUDA_VISIBLE_DEVICES="0,1"))
        assert result.returncode == 0, result.stderr[-2000:]
        counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.MULTILINE))
        libraries, sizes, seeds = 3, 2, 2
        assert (counts["check_task"], counts["validate"], counts["probe"]) == ("1", str(libraries), "1")
        assert counts["plan"] == counts["train"] == counts["benchmark"] == str(libraries * sizes)
        assert counts["benchmark_single_seed"] == str(libraries + 1)
        assert "benchmark/training/Rlscale-Go1-Flat/skrl/ws2/envs16384/seed3.json" in result.stdout
        assert counts["parity"] == counts["evaluate_parity"] == str(sizes * seeds)  # rsl_rl only
        assert counts["evaluate_train"] == str(libraries * sizes)
        assert "Isaac-Cartpole-Direct" not in result.stdout and "Rlscale-Ant" not in result.stdout
        reason = "device: auto chose cuda: 2 GPU(s) visible (CUDA_VISIBLE_DEVICES='0,1')"
        assert reason in result.stdout + result.stderr

    def test_full_matrix_on_a_gpu_host(self, tmp_path):
        """On a (faked) 2-GPU host the full-matrix study runs every task, Ant and Go1 at their own two per-rank
        sizes."""
        result = snakemake(
            tmp_path, "-n", "--configfile", CONFIG, str(ROOT / "config" / "studies" / "full_matrix.yaml"),
            env=job_env(tmp_path, CUDA_VISIBLE_DEVICES="0,1"),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.MULTILINE))
        tasks, libraries, sizes, envs, seeds = 3, 3, 2, 2, 3  # Cartpole [4096, 65536], Ant and Go1 [4096, 16384]
        assert counts["check_task"] == str(tasks)
        assert counts["validate"] == str(tasks * libraries) and counts["probe"] == "1"
        assert counts["plan"] == counts["train"] == str(tasks * libraries * sizes)
        # Per task: one job per training cell (every seed), then startup (per library) and runtime (env only).
        assert counts["benchmark"] == str(tasks * libraries * sizes * envs)
        assert counts["benchmark_single_seed"] == str(tasks * (libraries + 1))
        assert "benchmark/training/Rlscale-Ant/rsl_rl/ws2/envs16384/seed3.json" in result.stdout
        assert "Rlscale-Ant/rsl_rl/ws2/envs65536" not in result.stdout
        assert counts["parity"] == str((libraries + 2) * sizes * seeds)  # Cartpole x 3 libraries, Ant, Go1 x rsl_rl
        assert "parity/Rlscale-Ant/rsl_rl/ws2/lr-none_norm-library/seed3.json" in result.stdout
        assert "parity/Rlscale-Go1-Flat/rsl_rl/ws2/lr-none_norm-library/seed3.json" in result.stdout
        # The Go1 alone defines an evaluation: its train runs (every library) and its parity runs (rsl_rl).
        assert counts["evaluate_train"] == str(libraries * sizes) and counts["evaluate_parity"] == str(sizes * seeds)
        assert not re.search(r"evaluate/\w+/(Isaac-Cartpole-Direct|Rlscale-Ant)/", result.stdout)

    def test_robots_study_evaluates_every_robot_run(self, tmp_path):
        """The robots study on one GPU trains and evaluates both robots and plans no parity run. An overlay that gives
        the Go1 and Cartpole parity targets adds their parity runs, and an evaluation of each Go1 run (the parity runs'
        at every checkpoint) but of no Cartpole run. Every evaluation uses one GPU, shared through the lease. The plan
        printed at parse time names the stage."""
        robots = str(ROOT / "config" / "studies" / "robots.yaml")
        env = job_env(tmp_path, CUDA_VISIBLE_DEVICES="0")
        command = ["-n", "-p", "--cores", "all", "--resources", "gpu=1", "--configfile", robots]
        alone = snakemake(tmp_path, *command, env=env)
        assert alone.returncode == 0, alone.stderr[-2000:]
        runs = {
            (job["rule"], job["wildcards"]) for job in job_blocks(alone.stdout) if job["rule"] in ("train", "parity")
        }
        assert {rule for rule, _ in runs} == {"train"} and len(runs) == 2

        overlay = tmp_path / "parity.yaml"
        overlay.write_text(
            "tasks: [Rlscale-Go1-Flat, Rlscale-G1-Flat, Isaac-Cartpole-Direct]\nparity:\n  seeds: [1, 2]\n"
            "  max_env_steps: {Rlscale-Go1-Flat: 60000000, Isaac-Cartpole-Direct: 8000000}\n"
            "  target:\n    Rlscale-Go1-Flat: {metric: Metrics/base_velocity/error_vel_xy, at_most: 0.25}\n"
            "    Isaac-Cartpole-Direct: {metric: mean_episode_length, at_least: 290}\n"
        )
        result = snakemake(tmp_path, *command, str(overlay), env=env)
        assert result.returncode == 0, result.stderr[-2000:]
        jobs = job_blocks(result.stdout)
        runs = {(job["rule"], job["wildcards"]) for job in jobs if job["rule"] in ("train", "parity")}
        evaluations = {
            (job["rule"].removeprefix("evaluate_"), job["wildcards"]): job for job in jobs if "evaluate" in job["rule"]
        }
        robot_runs = {run for run in runs if "task=Rlscale-" in run[1]}
        parity_robots = {run[1].split("task=")[1].split(",")[0] for run in robot_runs if run[0] == "parity"}
        assert len(robot_runs) == 2 + 2 and parity_robots == {"Rlscale-Go1-Flat"}  # two robots' train, Go1's 2 seeds
        assert any("Isaac-Cartpole-Direct" in run[1] for run in runs)
        assert set(evaluations) == robot_runs  # each robot run once, no Cartpole run
        for (stage, _), job in evaluations.items():  # one GPU each, shared through the lease: none from Snakemake
            assert "gpu=0" in job["resources"] and " --granted_gpus 0 " in job["shell"]
            record = job_of(job["shell"])
            assert (record.device, record.gpus) == ("cuda", 1)
            assert record.rlscale_args() == ["--num_envs", "1000", "--seed", "0", "--device", "cuda"]
            assert record.every_checkpoint == (stage == "parity")
        plan = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("plan evaluation")]
        assert len(plan) == 1 and "Rlscale-Go1-Flat, Rlscale-G1-Flat:" in plan[0] and "Cartpole" not in plan[0]

    def test_gpu_commands_carry_world_size_and_grant(self, tmp_path):
        """On a 4-GPU host every rule whose jobs hold their GPUs alone asks for gpu = world size, and Snakemake grants
        it; the rules whose jobs share their GPUs through the lease (check_task, validate, train) ask for none, so that
        `--resources gpu=N` never queues one of them behind another."""
        env = job_env(tmp_path, CUDA_VISIBLE_DEVICES="0,1,2,3")
        overlay = tmp_path / "gpu.yaml"
        overlay.write_text(
            "world_sizes: [1, 2, 4]\nlibraries: [{name: rsl_rl}]\nseeds: [1]\nnum_envs_per_rank: [1024]\n"
            "tasks: [Isaac-Cartpole-Direct, Rlscale-Ant]\nnum_envs_per_task: {Rlscale-Ant: [4096, 16384]}\n"
            "parity: {max_env_steps: null, target: null, num_envs_per_rank: null, libraries: null}\n"
        )
        result = snakemake(tmp_path, "-n", "-p", "--resources", "gpu=4", "--configfile", CONFIG, str(overlay), env=env)
        assert result.returncode == 0, result.stderr[-2000:]
        jobs = job_blocks(result.stdout)
        trains = {job["wildcards"]: job for job in jobs if job["rule"] == "train"}
        train4 = next(job for wildcards, job in trains.items() if "ws=4" in wildcards and "Cartpole" in wildcards)
        assert "gpu=0" in train4["resources"] and " --granted_gpus 0 " in train4["shell"]
        record = job_of(train4["shell"])
        assert (record.world_size, record.nodes, record.device, record.gpus) == (4, 1, "cuda", 4)
        grants: dict[str, set[tuple[int, int]]] = {}  # rule: its jobs' (world size, gpu)
        for job in jobs:
            gpu = re.search(r"\bgpu=(\d+)", job.get("resources", ""))
            if gpu:
                size = re.search(r"\bws=(\d+)", job.get("wildcards", ""))
                grants.setdefault(job["rule"], set()).add((int(size.group(1)) if size else 1, int(gpu.group(1))))
        for rule in ("check_task", "validate", "train"):
            assert {gpu for _, gpu in grants[rule]} == {0}, rule
        for rule in ("probe", "benchmark", "benchmark_single_seed"):
            assert all(size == gpu for size, gpu in grants[rule]), rule
        assert (4, 4) in grants["benchmark"]
        assert (record.run.num_envs, record.run.max_iterations) == (1024, 30)
        ant4 = next(job for wildcards, job in trains.items() if "ws=4" in wildcards and "Rlscale-Ant" in wildcards)
        assert (job_of(ant4["shell"]).run.num_envs, job_of(ant4["shell"]).run.max_iterations) == (16384, 30)  # largest

    def test_agent_overrides_reach_every_run_of_their_library(self, tmp_path):
        """A library's agent_overrides are on its validate, plan/train, benchmark and parity command lines, and on
        no other library's nor on the runtime benchmark's (which runs none); a cell's seeds are one job."""
        overlay = tmp_path / "overrides.yaml"
        overlay.write_text(
            "libraries: [{name: rsl_rl}, {name: skrl}]\nagent_overrides: {rsl_rl: [agent.algorithm.gamma=0.98]}\n"
        )
        env = job_env(tmp_path, CUDA_VISIBLE_DEVICES="0,1")
        result = snakemake(tmp_path, "-n", "-p", "--configfile", CONFIG, str(overlay), env=env)
        assert result.returncode == 0, result.stderr[-2000:]
        jobs = [job for job in job_blocks(result.stdout) if "library=" in job.get("wildcards", "")]
        carried = {
            job["rule"]
            for job in jobs
            if "agent.algorithm.gamma=0.98" in job["shell"] and "library=rsl_rl" in job["wildcards"]
        }
        assert carried == {"validate", "plan", "train", "benchmark", "benchmark_single_seed", "parity"}
        others = [job for job in jobs if "library=rsl_rl" not in job["wildcards"]]  # skrl's, and env-only runtime
        assert others and not any("agent.algorithm.gamma" in job["shell"] for job in others)
        training = job_of(next(job for job in jobs if job["rule"] == "benchmark")["shell"])
        assert training.run.seeds == (1, 2, 3) and training.run.output_path.endswith("/seed{seed}.json")

    def test_gpu_limit_below_a_world_size_is_refused(self, tmp_path):
        """--resources gpu=2 with world size 4: Snakemake would shrink the ws4 jobs' grant to 2 and they would fail
        when run, so the dry run already stops, in one line naming the limit, the world size and the fix."""
        overlay = tmp_path / "gpu.yaml"
        overlay.write_text("world_sizes: [1, 2, 4]\n")
        env = job_env(tmp_path, CUDA_VISIBLE_DEVICES="0,1,2,3")
        result = snakemake(tmp_path, "-n", "--resources", "gpu=2", "--configfile", CONFIG, str(overlay), env=env)
        assert result.returncode != 0
        output = result.stdout + result.stderr
        refusals = [line for line in output.splitlines() if line.startswith("resources: gpu=2")]
        assert len(refusals) == 1 and "world size 4" in refusals[0] and "--resources gpu=4" in refusals[0]
        assert not (tmp_path / "results").exists()

    def test_unknown_task_is_refused_at_parse_time(self, tmp_path):
        """A task id the registry does not know stops the dry run, naming it, before any validate job could fail."""
        overlay = tmp_path / "task.yaml"
        overlay.write_text("tasks: [No-Such-Task]\nnum_envs_per_task: null\n")
        result = snakemake(tmp_path, "-n", "--configfile", CONFIG, str(overlay), env=job_env(tmp_path))
        assert result.returncode != 0
        assert "config: tasks (from task.yaml): unknown task 'No-Such-Task';" in result.stdout + result.stderr

    def test_bad_config_is_refused_at_parse_time(self, tmp_path):
        """A config violating the schema stops Snakemake before any job, naming the key."""
        overlay = tmp_path / "bad.yaml"
        overlay.write_text("world_sizes: [0]\n")
        result = snakemake(tmp_path, "-n", "--configfile", CONFIG, str(overlay))
        assert result.returncode != 0
        assert "world_sizes" in result.stdout + result.stderr


SLURM_OVERLAY = (
    "gpus_per_node: 4\nworld_sizes: [1, 2, 4, 8]\nlibraries: [{name: rsl_rl}]\nseeds: [1]\nnum_envs_per_rank: [4096]\n"
    "tasks: [Isaac-Cartpole-Direct]\nnum_envs_per_task: null\n"  # null: overlays merge mappings, {} would not clear it
)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> list[dict[str, str]]:
    """Jobs of ``snakemake -n -p --profile config/profiles/slurm`` with 4 GPUs per node and world sizes to 8."""
    workdir = tmp_path_factory.mktemp("slurm")
    overlay = workdir / "overlay.yaml"
    overlay.write_text(SLURM_OVERLAY)
    # A dry run clamps threads to --cores (1 when unset); a real SLURM submission sets no --cores and is not clamped.
    result = snakemake(
        workdir, "-n", "-p", "--cores", "256", "--profile", SLURM_PROFILE, "--configfile", CONFIG, str(overlay)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return job_blocks(result.stdout)


class TestSlurmProfile:
    def test_rules_per_world_size(self, dry_run):
        """World sizes up to 4 run on one node; 8 runs through the multi-node rules."""
        sizes = [re.search(r"ws=(\d+)", job.get("wildcards", "")) for job in dry_run]
        rules = {(job["rule"], size.group(1)) for job, size in zip(dry_run, sizes, strict=True) if size}
        assert ("train", "4") in rules and ("train_multinode", "8") in rules and ("probe_multinode", "8") in rules
        assert ("train", "8") not in rules
        assert [job["rule"] for job in dry_run].count("benchmark_multinode") == 1  # the training cell, every seed
        single_seed = [job for job in dry_run if job["rule"] == "benchmark_single_seed_multinode"]
        workflows = sorted(re.search(r"workflow=(\w+)", job["wildcards"]).group(1) for job in single_seed)
        assert workflows == ["runtime", "startup"]

    def test_multinode_command(self, dry_run):
        """The multi-node train job is srun, one launcher per node with its cores and GPUs, 2 nodes of 4 GPUs."""
        job = next(job for job in dry_run if job["rule"] == "train_multinode")
        assert job["shell"].startswith("srun --ntasks-per-node=1 --cpus-per-task=4 --gres=gpu:4 --nodes=2 --ntasks=2 ")
        assert "--granted_gpus" not in job["shell"]
        record = job_of(job["shell"])
        assert (record.world_size, record.nodes, record.device, record.rdzv_port) == (8, 2, "cuda", 29400)
        assert (record.run.task, record.run.library.name, record.run.num_envs) == (
            "Isaac-Cartpole-Direct",
            "rsl_rl",
            4096,
        )

    def test_single_node_command(self, dry_run):
        """A single-node GPU job is the plain launcher with its grant (the plugin's jobstep wraps it in srun)."""
        job = next(job for job in dry_run if job["rule"] == "train" and "ws=4" in job["wildcards"])
        assert not job["shell"].startswith("srun") and " --granted_gpus 4 " in job["shell"]
        assert (job_of(job["shell"]).world_size, job_of(job["shell"]).nodes) == (4, 1)

    @staticmethod
    def sbatch(job: dict[str, str]) -> str:
        """The plugin's sbatch line for a dry-run job, built by its own submit-string functions."""
        from snakemake_executor_plugin_slurm.submit_string import get_submit_command
        from snakemake_executor_plugin_slurm.utils import set_gres_string

        resources = {}
        for item in job["resources"].split(", "):
            key, _, value = item.partition("=")
            resources[key] = int(value) if value.lstrip("-").isdigit() else value
        fake = SimpleNamespace(resources=SimpleNamespace(**resources, get=resources.get), threads=4)
        params = {
            "run_uuid": "u",
            "slurm_logfile": "log",
            "comment_str": "c",
            "account": "",
            "partition": "",
            "workdir": "",
        }
        return get_submit_command(fake, params) + set_gres_string(fake)

    def test_multinode_sbatch(self, dry_run):
        """The multi-node job asks SLURM for 2 nodes, 2 tasks and 4 GPUs per node, and never --ntasks-per-gpu."""
        line = self.sbatch(next(job for job in dry_run if job["rule"] == "train_multinode"))
        assert "--nodes=2" in line and "--ntasks=2" in line and "--gres=gpu:4" in line
        assert "--ntasks-per-gpu" not in line and "--gpus=" not in line

    def test_single_node_sbatch(self, dry_run):
        """A 4-GPU single-node job asks for --gpus=4 and, having no tasks resource, no --ntasks-per-gpu."""
        line = self.sbatch(next(job for job in dry_run if job["rule"] == "train" and "ws=4" in job["wildcards"]))
        assert "--gpus=4" in line and "--ntasks-per-gpu" not in line and "--nodes" not in line


class TestLinters:
    def test_snakemake_lint(self, tmp_path):
        """snakemake --lint finds nothing but the per-rule conda/container advice (this is a pip/venv project) and the
        interpreter named outside params, which is deliberate (common.smk says why)."""
        result = snakemake(tmp_path, "--lint", "--configfile", CONFIG)
        lints = re.findall(r"^\s+\* (.*?):?$", result.stdout + result.stderr, re.MULTILINE)
        assert lints, "lint printed nothing; did it run?"
        assert set(lints) == {
            "Specify a conda environment or container for each rule.",
            "Shell command directly uses variable PYTHON from outside of the rule",
        }

    def test_snakefmt(self):
        """snakefmt --check passes on the Snakefile and the rules."""
        result = subprocess.run(
            [SNAKEFMT, "--check", "Snakefile", "workflow"], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
