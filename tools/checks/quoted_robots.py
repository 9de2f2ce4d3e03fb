"""docs/robots.md's figures, recomputed from results/h200/robots/ (evaluations, console logs, check_task logs and
the runtime bundles of the 5 interleaved repeats) and results/h200/first_hour/ (the one-GPU study's Go1 training
bundles), for tools/checks/quoted_figures.py."""

from __future__ import annotations

import json
import re
import statistics
from datetime import datetime
from pathlib import Path

from quoted_common import RESULTS_DOC, Quote

ROBOTS_DOC = "docs/robots.md"
RESULTS = Path("results/h200/robots")
STUDY_TRAINING = Path("results/h200/first_hour/outputs/benchmark/training/Rlscale-Go1-Flat")
STUDY_PARITY = Path("results/h200/first_hour/second_run/outputs/parity/Rlscale-Go1-Flat/rsl_rl/ws1")
CONSOLE = re.compile(r"it (\d+)/\d+\s+([\d,]+) steps/s")
FROM_ITERATION = 10
"""Training throughput leaves the first nine iterations out (startup and the first updates)."""


def evaluation_quotes(root: Path, robot: str, file: str, rows: bool = True) -> list[Quote]:
    """The evaluation's summary, and with ``rows`` its table row per command."""
    evaluation = json.loads((root / RESULTS / file).read_text())
    summary = evaluation["summary"]
    quotes = [
        Quote(
            ROBOTS_DOC,
            f"{robot} evaluation ({file})",
            f"{summary['lin_vel_error_mps']:.3f} m/s linear, {summary['ang_vel_error_radps']:.3f} rad/s yaw, "
            f"{100 * summary['fall_rate']:.1f} % falls",
        )
    ]
    for entry in evaluation["per_command"] if rows else ():
        command = ", ".join(f"{value:g}" for value in entry["command"])
        row = (
            f"| {robot} | ({command}) | {entry['envs']} | {entry['lin_vel_error_mps']:.3f} | "
            f"{entry['ang_vel_error_radps']:.3f} | {100 * entry['fall_rate']:.1f} % |"
        )
        quotes.append(Quote(ROBOTS_DOC, f"{robot} evaluation row ({command})", row))
    return quotes


def training_rate(log: Path) -> tuple[int, float]:
    """Last iteration and median env steps/s of the iterations from :data:`FROM_ITERATION` on."""
    lines = [(int(iteration), float(rate.replace(",", ""))) for iteration, rate in CONSOLE.findall(log.read_text())]
    return lines[-1][0], statistics.median(rate for iteration, rate in lines if iteration >= FROM_ITERATION)


def wide_run_quotes(root: Path) -> list[Quote]:
    """The Go1 run at 16 384 envs: its wall time, when its training error first reached 0.25 m/s, its evaluation."""
    run = root / RESULTS / "go1_16384"
    manifest = json.loads((run / "train_manifest.json").read_text())
    wall = datetime.fromisoformat(manifest["end_time"]) - datetime.fromisoformat(manifest["start_time"])
    first = next(
        record for record in manifest["iterations"] if record["metrics"]["Metrics/base_velocity/error_vel_xy"] <= 0.25
    )
    summary = json.loads((run / "evaluation.json").read_text())["summary"]
    last, rate = training_rate(run / "train.log")
    text = (
        f"{len(manifest['iterations'])} iterations in {wall.total_seconds():.0f} s from start to stop. The training "
        "episodes' tracking error (`Metrics/base_velocity/error_vel_xy`, with noise and pushes) first fell to 0.25 m/s "
        f"at iteration {first['iteration']}, {first['elapsed_s']:.0f} s and {first['env_steps'] / 1e6:.1f} M env steps "
        f"into the run. Its iteration-625 checkpoint tracks with {summary['lin_vel_error_mps']:.3f} m/s linear, "
        f"{summary['ang_vel_error_radps']:.3f} rad/s yaw, {100 * summary['fall_rate']:.1f} % falls."
    )
    quotes = [Quote(ROBOTS_DOC, "Go1 at 16384 envs", text)]
    quotes.append(
        Quote(
            ROBOTS_DOC,
            "Go1 training rate at 16384 envs",
            f"16 384 envs: {rate / 1e3:.0f} k env steps/s to iteration {last}",
        )
    )
    for envs, label in ((4096, "4096"), (16384, "16 384")):
        rates = [
            json.loads(path.read_text())["runtime"]["total_fps"]["mean"]
            for path in sorted((root / STUDY_TRAINING / "rl_games" / "ws1" / f"envs{envs}").glob("seed*.json"))
        ]
        assert len(rates) == 3, rates
        text = f"at {label} envs: {statistics.median(rates) / 1e3:.0f} k env steps/s"
        quotes.append(Quote(ROBOTS_DOC, f"Go1 rl_games study benchmark at {envs} envs", text))
    return quotes


def study_parity_quotes(root: Path) -> list[Quote]:
    """The one Go1 parity run the one-GPU study's second run completed: when it first tracked within its target."""
    records = sorted((root / STUDY_PARITY / "lr-none_norm-library").glob("seed*.json"))
    assert len(records) == 1, records
    manifest = json.loads(records[0].read_text())
    first = next(
        record for record in manifest["iterations"] if record["metrics"]["Metrics/base_velocity/error_vel_xy"] <= 0.25
    )
    envs = f"{manifest['num_envs']:,}".replace(",", " ")
    text = (
        f"seed {manifest['args']['seed']} at {envs} envs reached the target after {first['env_steps'] / 1e6:.1f} M env "
        f"steps, {first['elapsed_s']:.0f} s into the run"
    )
    return [Quote(ROBOTS_DOC, "Go1 parity run of the study's second run", text)]


def training_throughput_quotes(root: Path) -> list[Quote]:
    """rsl_rl's Go1 training benchmark at four env counts, 5 interleaved repeats: throughput (median, range) and the
    median iteration split into rollout and update; the env-only share of the rollout where the runtime benchmark
    measured the same env count."""
    physics = {
        envs: statistics.median(
            json.loads(path.read_text())["runtime"]["environment_step_timing"]["environment_step_fps"]["mean"]
            for path in (root / RESULTS / "throughput" / f"e{envs}").glob("repeat*.json")
        )
        for envs in (4096, 16384, 32768)
    }
    quotes = []
    for envs in (4096, 8192, 16384, 32768):
        runtimes = [
            json.loads(path.read_text())["runtime"]
            for path in sorted((root / RESULTS / "training_throughput" / f"e{envs}").glob("repeat*.json"))
        ]
        rates = [runtime["total_fps"]["mean"] / 1e3 for runtime in runtimes]
        iteration, rollout, update = (
            statistics.median(runtime[key]["mean"] for runtime in runtimes)
            for key in ("iteration_time_s", "collection_time_s", "learning_time_s")
        )
        steps = runtimes[0]["steps_per_iteration"]
        in_physics = f"{100 * steps / physics[envs] / rollout:.0f} %" if envs in physics else "not measured"
        row = (
            f"| {envs:,} | {len(rates)} | {statistics.median(rates):,.0f} | {min(rates):,.0f}–{max(rates):,.0f} | "
            f"{iteration:.3f} | {rollout:.3f} ({100 * rollout / iteration:.0f} %) | {update:.3f} | {in_physics} |"
        )
        quotes.append(Quote(ROBOTS_DOC, f"Go1 training throughput at {envs} envs", row))
        if envs == 32768:
            text = f"rsl_rl trains it at {statistics.median(rates) / 1e3:.2f} M env steps/s at 32 768 envs"
            quotes.append(Quote(RESULTS_DOC, "Go1 training throughput at 32768 envs", text))
    return quotes


def brax_anchor_quotes(root: Path) -> list[Quote]:
    """Brax PPO beside rlscale (results/h200/robots/brax_anchor/): its steady throughput over the completed runs, the
    time before its first training iteration, its tracking errors, and rlscale's evaluated checkpoints."""
    anchor = root / RESULTS / "brax_anchor"
    runs = [json.loads(path.read_text()) for path in sorted((anchor / "throughput").glob("brax_repeat*.json"))]
    done = [run for run in runs if run["status"] == "completed"]
    rates = [run["throughput"]["env_steps_per_s"] / 1e3 for run in done]
    starts = [run["start_to_first_progress_s"] for run in done]
    text = (
        f"{len(done)} of {len(runs)} runs completed: a steady {statistics.median(rates):.0f} k env steps/s (range "
        f"{min(rates):.0f}–{max(rates):.0f} k), after {min(starts):.0f}–{max(starts):.0f} s from process start"
    )
    quotes = [Quote(ROBOTS_DOC, "Brax PPO throughput at 8192 envs", text)]
    text = f"a steady {statistics.median(rates):.0f} k env steps/s at its 8192"
    quotes.append(Quote(RESULTS_DOC, "Brax PPO throughput at 8192 envs", text))
    brax = json.loads((anchor / "to_target" / "brax_to_target.json").read_text())
    errors = ", ".join(
        f"{entry['lin_vel_error']:.3f} m/s at {entry['env_steps'] / 1e6:.1f} M" for entry in brax["tracking"]
    )
    quotes.append(Quote(ROBOTS_DOC, "Brax PPO tracking errors", errors))
    reward = brax["records"][-1]
    text = f"eval reward {reward['eval_episode_reward']:.1f} at {reward['env_steps'] / 1e6:.1f} M env steps"
    quotes.append(Quote(ROBOTS_DOC, "Brax PPO eval reward", text))
    rlscale = anchor / "to_target" / "rlscale_to_target_16384"
    started = json.loads((rlscale / "start.json").read_text())["process_start_unix_s"]
    for evaluation in sorted((rlscale / "evaluations").glob("model_*.json"), key=lambda path: int(path.stem[6:])):
        summary = json.loads(evaluation.read_text())["summary"]
        since = float(evaluation.with_suffix(".mtime").read_text()) - started
        row = (
            f"| {evaluation.stem[6:]} | {since:.0f} | {summary['lin_vel_error_mps']:.3f} | "
            f"{100 * summary['fall_rate']:.0f} % |"
        )
        quotes.append(Quote(ROBOTS_DOC, f"rlscale to-target checkpoint {evaluation.stem}", row))
    return quotes


def walking_g1_time_quotes(root: Path) -> list[Quote]:
    """The walking G1's seconds from its processes' starts to its evaluated checkpoints."""
    times = json.loads((root / RESULTS / "g1_walks" / "checkpoint_times.json").read_text())
    first, last = times["model_175.pt"]["s_since_process_start"], times["model_375.pt"]
    text = (
        f"{last['s_of_training_processes']:.0f} s after the processes' starts ({first:.0f} s of the first, to its "
        f"iteration-175 checkpoint, and {last['s_since_second_process_start']:.0f} s of the second)"
    )
    return [
        Quote(ROBOTS_DOC, "walking G1's time to its iteration-375 checkpoint", text),
        Quote(ROBOTS_DOC, "walking G1's time to its iteration-175 checkpoint", f"At iteration 175 ({first:.0f} s)"),
    ]


def robot_quotes(root: Path) -> list[Quote]:
    quotes = evaluation_quotes(root, "Go1", "go1_learning/evaluation.json")
    quotes.append(Quote(RESULTS_DOC, "Go1 evaluation", quotes[0].text))
    quotes += evaluation_quotes(root, "G1", "g1_learning/evaluation_it275.json", rows=False)
    quotes += evaluation_quotes(root, "G1", "g1_learning/evaluation_it475.json")
    quotes += evaluation_quotes(root, "G1, walking", "g1_walks/evaluation_it175.json", rows=False)
    quotes += evaluation_quotes(root, "G1, walking", "g1_walks/evaluation_it375.json")
    quotes += evaluation_quotes(root, "Go1, walking", "go1_walks/evaluation.json", rows=False)
    quotes += walking_g1_time_quotes(root)
    manifest = json.loads((root / RESULTS / "go1_learning" / "manifest.json").read_text())
    wall = datetime.fromisoformat(manifest["end_time"]) - datetime.fromisoformat(manifest["start_time"])
    for document in (ROBOTS_DOC, RESULTS_DOC):
        quotes.append(Quote(document, "Go1 run's wall time", f"{wall.total_seconds():.0f} s from start to stop"))
    for robot, log in (("Go1", "go1_learning/train.log"), ("G1", "g1_learning/train.log")):
        last, rate = training_rate(root / RESULTS / log)
        quotes.append(
            Quote(ROBOTS_DOC, f"{robot} training rate", f"{robot}: {rate / 1e3:.0f} k env steps/s to iteration {last}")
        )
    for robot in ("Go1", "G1"):
        log = (root / RESULTS / "check_task" / f"Rlscale-{robot}-Flat.log").read_text()
        (rate,) = re.findall(r"throughput: ([\d,]+) env steps/s", log)
        conforms = log.strip().splitlines()[-1]
        quotes.append(Quote(ROBOTS_DOC, f"{robot} check_task", f"| Rlscale-{robot}-Flat | {conforms} | {rate} |"))
    medians = {}
    for envs in (4096, 16384, 32768):
        rates = [
            json.loads(path.read_text())["runtime"]["environment_step_timing"]["environment_step_fps"]["mean"] / 1e3
            for path in sorted((root / RESULTS / "throughput" / f"e{envs}").glob("repeat*.json"))
        ]
        row = f"| {envs:,} | {len(rates)} | {statistics.median(rates):,.0f} | {min(rates):,.0f}–{max(rates):,.0f} |"
        quotes.append(Quote(ROBOTS_DOC, f"Go1 runtime throughput at {envs} envs", row))
        medians[envs] = statistics.median(rates) / 1e3
    text = f"{medians[4096]:.2f} M env steps/s at 4096 envs and {medians[16384]:.2f} M at 16 384"
    quotes.append(Quote(RESULTS_DOC, "Go1 runtime throughput", text))
    return [
        *quotes,
        *wide_run_quotes(root),
        *study_parity_quotes(root),
        *training_throughput_quotes(root),
        *brax_anchor_quotes(root),
    ]
