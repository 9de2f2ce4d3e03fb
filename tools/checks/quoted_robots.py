"""docs/robots.md's figures, recomputed from results/h200/robots/ (evaluations, console logs, check_task logs and
the runtime bundles of the 5 interleaved repeats) and results/h200/first_hour/ (the one-GPU study's Go1 training
bundles), for tools/checks/quoted_figures.py."""

from __future__ import annotations

import json
import re
import statistics
from datetime import datetime
from pathlib import Path

import pandas as pd
from quoted_common import RESULTS_DOC, Quote

ROBOTS_DOC = "docs/robots.md"
RESULTS = Path("results/h200/robots")
STUDY_TRAINING = Path("results/h200/first_hour/outputs/benchmark/training/Rlscale-Go1-Flat")
ROBOTS_STUDY = Path("results/h200/robots_study/evaluate/train")
WARP_LEARNING = Path("results/h100/warp_learning")
WARP_LEARNING_H200 = Path("results/h200/warp_learning")
TARGETS = {"go1": (0.25, 0.05), "g1": (0.35, 0.10)}
"""Each robot's evaluated target: the most linear error (m/s) and the fall rate to stay under."""
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
    """Brax PPO's throughput (results/h200/robots/brax_anchor/throughput/): its steady env steps/s over the completed
    runs and the time before its first training iteration."""
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
    return quotes


TARGET = (0.25, 0.05)
"""The Go1's evaluated target: linear error at most 0.25 m/s, falls below 5 %."""
DRIVER_LINE = re.compile(r"rlscale:\d+ model_(\d+) at ([\d.]+) s: lin ([\d.]+) falls ([\d.]+) %")
"""A seed's evaluation summary as the GPU call's log printed it (seed 1 keeps only that and two of its JSON files)."""


def rlscale_checkpoints(run: Path) -> list[tuple[int, float, float, float]]:
    """(iteration, s since process start, linear error, fall rate) per evaluated checkpoint, from its JSON files and,
    where a run has ``driver.log``, from the summaries printed there (checked against the JSON files it has)."""
    times = json.loads((run / "checkpoint_times.json").read_text())
    from_files = {}
    for path in run.glob("eval_model_*.json"):
        summary = json.loads(path.read_text())["summary"]
        iteration = int(path.stem.removeprefix("eval_model_"))
        from_files[iteration] = (times[f"model_{iteration}"], summary["lin_vel_error_mps"], summary["fall_rate"])
    if not (run / "driver.log").exists():
        return sorted((iteration, *values) for iteration, values in from_files.items())
    printed = {
        int(it): (float(at), float(lin), float(falls) / 100)
        for it, at, lin, falls in DRIVER_LINE.findall((run / "driver.log").read_text())
    }
    for iteration, (at, lin, falls) in from_files.items():
        assert printed[iteration] == (round(at, 1), round(lin, 3), round(falls, 3)), (run, iteration)
    return sorted((iteration, *values) for iteration, values in printed.items())


def go1_to_target_quotes(root: Path) -> list[Quote]:
    """Brax PPO and rlscale to the Go1's evaluated target, 3 seeds each from empty compilation caches: a row per seed,
    the medians and their ratio, and where each side's time goes."""
    folder = root / RESULTS / "brax_anchor" / "to_target"
    quotes, brax_times, rlscale_times = [], [], []
    brax_starts, brax_first, brax_rates, rlscale_starts, rlscale_rates, samples, iterations, relapses = (
        [] for _ in range(8)
    )
    for seed in (1, 2, 3):
        brax = json.loads((folder / f"brax_s{seed}.json").read_text())
        reached = brax["target_reached"]
        brax_times.append(reached["training_wall_s"])
        brax_starts.append(brax["tracking"][0]["training_wall_s"])
        brax_first.append(brax["tracking"][1]["training_wall_s"])
        brax_rates.append(brax["throughput"]["env_steps_per_s"])
        run = folder / f"rlscale_s{seed}"
        checkpoints = rlscale_checkpoints(run)
        iteration, at, lin, falls = next(c for c in checkpoints if c[2] <= TARGET[0] and c[3] < TARGET[1])
        rlscale_times.append(at)
        iterations.append(iteration)
        later = [c for c in checkpoints if c[0] > iteration]
        worst = max(later, key=lambda c: c[3], default=None)
        if worst and worst[3] >= TARGET[1]:
            relapses.append((worst[3], seed, worst[0]))
        rlscale_starts.append(json.loads((run / "checkpoint_times.json").read_text())["model_0"])
        first = iteration == checkpoints[0][0]  # met at the first evaluated checkpoint: maybe sooner
        rlscale_time = (
            f"≤ {at:.0f} (iteration {iteration}, the first evaluated)" if first else f"{at:.0f} (iteration {iteration})"
        )
        row = (
            f"| {seed} | {reached['training_wall_s']:.0f} ({reached['env_steps'] / 1e6:.1f} M) | {rlscale_time} | "
            f"{lin:.3f} m/s, {100 * falls:.1f} % |"
        )
        quotes.append(Quote(ROBOTS_DOC, f"Go1 to target, seed {seed}", row))
        if (run / "train.log").exists():
            rlscale_rates.append(training_rate(run / "train.log")[1])
            manifest = json.loads((run / "manifest.json").read_text())
            samples.append(manifest["iterations"][0]["env_steps"])  # env steps per iteration
    brax_median, rlscale_median = statistics.median(brax_times), statistics.median(rlscale_times)
    text = (
        f"Medians: Brax PPO {brax_median:.0f} s, rlscale {rlscale_median:.0f} s, "
        f"{rlscale_median / brax_median:.2f} × Brax PPO's time"
    )
    for document in (ROBOTS_DOC, RESULTS_DOC, str(RESULTS / "brax_anchor" / "README.md")):
        quotes.append(Quote(document, "Go1 to target, medians", text))
    sooner = "Every" if max(rlscale_times) < min(brax_times) else "Not every"
    text = f"{sooner} rlscale seed was sooner than every Brax seed"
    quotes.append(Quote(ROBOTS_DOC, "Go1 to target, seeds compared", text))
    text = "Later checkpoints fell in up to " + " and ".join(
        f"{100 * falls:.1f} %{' of episodes' if index == 0 else ''} (seed {seed}, iteration {iteration})"
        for index, (falls, seed, iteration) in enumerate(relapses)
    )
    quotes.append(Quote(ROBOTS_DOC, "rlscale's falls after the target", text))
    (per_iteration,) = set(samples)
    text = (
        f"Brax PPO's untrained policy exists {min(brax_starts):.0f}–{max(brax_starts):.0f} s after its start, and its "
        f"first 10.6 M env steps end {min(brax_first):.0f}–{max(brax_first):.0f} s after it"
    )
    quotes.append(Quote(ROBOTS_DOC, "Brax PPO's start", text))
    text = f"a steady {min(brax_rates) / 1e3:.0f}–{max(brax_rates) / 1e3:.0f} k env steps/s"
    quotes.append(Quote(ROBOTS_DOC, "Brax PPO's rate in the to-target runs", text))
    text = (
        f"rlscale writes its iteration-0 checkpoint {min(rlscale_starts):.0f}–{max(rlscale_starts):.0f} s after its "
        f"start and trains at {statistics.median(rlscale_rates) / 1e6:.2f} M env steps/s"
    )
    quotes.append(Quote(ROBOTS_DOC, "rlscale's start and rate in the to-target runs", text))
    filmed = json.loads((folder / "rlscale_s3" / "checkpoint_times.json").read_text())["model_299"]
    text = f"its last checkpoint (iteration 299, {filmed:.0f} s after its start), filmed on the H200"
    quotes.append(Quote(ROBOTS_DOC, "the Go1 GIF's checkpoint", text))
    low, high = min(iterations), max(iterations)
    text = (
        f"iterations {low}–{high}, {(low + 1) * per_iteration / 1e6:.0f}–{(high + 1) * per_iteration / 1e6:.0f} M env "
        "steps"
    )
    quotes.append(Quote(ROBOTS_DOC, "rlscale's samples to the target", text))
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


def warp_learning_quotes(root: Path) -> list[Quote]:
    """The robots on MuJoCo Warp on one H100 (results/h100/warp_learning/): the G1's first evaluated checkpoint, the
    Go1's fewest falls at any evaluated checkpoint, and the sweep's fastest rate per robot."""
    folder = root / WARP_LEARNING
    g1 = json.loads((folder / "g1_seed1" / "eval_model_250.json").read_text())["summary"]
    go1_falls = min(
        json.loads(path.read_text())["summary"]["fall_rate"] for path in folder.glob("go1_seed*/eval_model_*.json")
    )
    sweep = pd.read_csv(folder / "sweep.csv")
    fastest = sweep.groupby("robot").env_steps_per_s.max()
    return [
        Quote(
            ROBOTS_DOC,
            "G1 on MuJoCo Warp, iteration 250",
            f"{g1['lin_vel_error_mps']:.3f} m/s linear, {g1['ang_vel_error_radps']:.3f} rad/s yaw, "
            f"{100 * g1['fall_rate']:.1f} % falls",
        ),
        Quote(
            ROBOTS_DOC, "Go1 on MuJoCo Warp, fewest falls", f"fell in {100 * go1_falls:.1f} % of the episodes or more"
        ),
        Quote(
            ROBOTS_DOC,
            "sweep's fastest rates",
            f"the G1 at {fastest['G1'] / 1e3:.0f} k env steps/s "
            f"and the Go1 at {fastest['Go1'] / 1e6:.2f} M env steps/s",
        ),
    ]


def first_within_target(run: Path, robot: str) -> float:
    """When a run's first evaluated checkpoint within the robot's target was written: seconds after the process's
    start (the run's ``checkpoint_times.json``)."""
    most_error, falls_under = TARGETS[robot]
    times = json.loads((run / "checkpoint_times.json").read_text())
    for name, seconds in sorted(times.items(), key=lambda item: item[1]):
        path = run / f"eval_{name}.json"
        if path.exists():
            summary = json.loads(path.read_text())["summary"]
            if summary["lin_vel_error_mps"] <= most_error and summary["fall_rate"] < falls_under:
                return seconds
    raise ValueError(f"{run}: no evaluated checkpoint within the target")


def warp_learning_h200_quotes(root: Path) -> list[Quote]:
    """The robots on MuJoCo Warp on one H200 (results/h200/warp_learning/): the times to the targets, and the
    training throughput's medians."""
    folder = root / WARP_LEARNING_H200
    rates = {
        (robot, variant["name"]): variant["throughput"]["median"]
        for robot in ("g1", "go1")
        for variant in json.loads((folder / f"{robot}_training" / "comparison.json").read_text())["variants"]
    }
    quotes = [
        Quote(
            ROBOTS_DOC,
            "training throughput on MuJoCo Warp",
            f"trains the G1 at {rates['g1', 'e32768_m4'] / 1e3:.0f} k env steps/s and the Go1, with 3 solver "
            f"iterations, at {rates['go1', 'iterations_3'] / 1e3:.0f} k",
        )
    ]
    for robot, goal in (("Go1", "75 s"), ("G1", "5 minutes")):
        times = sorted(first_within_target(run, robot.lower()) for run in folder.glob(f"{robot.lower()}_seed[0-9]"))
        row = f"| {len(times)} | {statistics.median(times):.1f} (median; {times[0]:.1f}–{times[-1]:.1f}) | {goal} |"
        quotes.append(Quote(ROBOTS_DOC, f"{robot} on MuJoCo Warp, time to target", row))
    return quotes


def robots_study_quotes(root: Path) -> list[Quote]:
    """The robots study's evaluations of its two train runs' final checkpoints (results/h200/robots_study/)."""
    evaluations = [
        json.loads((root / ROBOTS_STUDY / f"Rlscale-{robot}-Flat/rsl_rl/ws1.json").read_text())
        for robot in ("Go1", "G1")
    ]
    go1, g1 = (evaluation["checkpoints"][-1]["summary"] for evaluation in evaluations)
    text = (
        f"with {go1['lin_vel_error_mps']:.3f} m/s and {100 * go1['fall_rate']:.1f} % falls (Go1) and "
        f"{g1['lin_vel_error_mps']:.3f} m/s and {100 * g1['fall_rate']:.1f} % falls (G1)"
    )
    return [Quote(ROBOTS_DOC, "robots study's evaluations", text)]


def robot_quotes(root: Path) -> list[Quote]:
    quotes = evaluation_quotes(root, "Go1", "go1_learning/evaluation.json")
    quotes.append(Quote(RESULTS_DOC, "Go1 evaluation", quotes[0].text))
    quotes += evaluation_quotes(root, "G1", "g1_learning/evaluation_it275.json", rows=False)
    quotes += evaluation_quotes(root, "G1", "g1_learning/evaluation_it475.json")
    quotes += evaluation_quotes(root, "G1, walking", "g1_walks/evaluation_it175.json", rows=False)
    quotes += evaluation_quotes(root, "G1, walking", "g1_walks/evaluation_it375.json")
    quotes += evaluation_quotes(root, "Go1, walking", "go1_walks/evaluation.json", rows=False)
    quotes += walking_g1_time_quotes(root)
    quotes += robots_study_quotes(root)
    quotes += warp_learning_quotes(root)
    quotes += warp_learning_h200_quotes(root)
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
        *go1_to_target_quotes(root),
    ]
