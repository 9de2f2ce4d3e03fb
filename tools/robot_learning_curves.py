"""Learning curves of the H200 robot runs (results/h200/robots/): episode length, return and the training tracking
error against training time, from the runs' console logs (Go1; its interrupted manifest kept no iterations) and
rsl_rl's TensorBoard logs (G1 with Isaac Lab's configuration, whose second file continues the first from its
iteration-275 checkpoint); and the walking G1's (g1_walks/), from its two manifests, with its evaluations.

Usage: python tools/robot_learning_curves.py [results/h200/robots]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

LINE = re.compile(r"it (\d+)/\d+\s+([\d,]+) steps/s\s+return (-?[\d.]+)\s+ep_len ([\d.]+)")
STEPS_PER_ITERATION = 4096 * 24  # both runs: 4096 envs, 24 steps per env


def console_curve(log: Path) -> dict[str, list[float]]:
    """Iteration, training seconds (summed from each iteration's steps/s), return and episode length."""
    curve: dict[str, list[float]] = {"time_s": [], "return": [], "episode_length": []}
    elapsed = 0.0
    for match in LINE.finditer(log.read_text()):
        elapsed += STEPS_PER_ITERATION / float(match.group(2).replace(",", ""))
        curve["time_s"].append(elapsed)
        curve["return"].append(float(match.group(3)))
        curve["episode_length"].append(float(match.group(4)))
    return curve


def tensorboard_curve(files: list[Path]) -> dict[str, list[float]]:
    """The files one after the other, each one's wall time continuing where the last ended."""
    tags = {
        "return": "Train/mean_reward",
        "episode_length": "Train/mean_episode_length",
        "error_vel_xy": "Metrics/base_velocity/error_vel_xy",
    }
    curve: dict[str, list[float]] = {"time_s": [], **{name: [] for name in tags}}
    offset = 0.0
    for file in files:
        events = EventAccumulator(str(file), size_guidance={"scalars": 0})
        events.Reload()
        series = {name: events.Scalars(tag) for name, tag in tags.items()}
        start = series["return"][0].wall_time
        curve["time_s"] += [offset + event.wall_time - start for event in series["return"]]
        for name, values in series.items():
            curve[name] += [event.value for event in values]
        offset = curve["time_s"][-1]
    return curve


def walking_g1_curve(run: Path) -> tuple[dict[str, list[float]], list[tuple[float, float, float]]]:
    """The walking G1's training curve against seconds of its training processes since their starts, and its
    evaluations as (seconds, linear error, fall rate). The second process continued from the first one's
    iteration-175 checkpoint; each manifest's iterations are placed by the checkpoint written right after them."""
    times = json.loads((run / "checkpoint_times.json").read_text())
    first = json.loads((run / "manifest_first_segment.json").read_text())["iterations"]
    second = json.loads((run / "manifest.json").read_text())["iterations"]
    resumed_at = second[0]["iteration"] - 1

    def offset(records: list[dict], iteration: int, written_s: float) -> float:
        return written_s - next(record["elapsed_s"] for record in records if record["iteration"] == iteration)

    before = times["model_175.pt"]["s_since_process_start"]
    placed = [
        (first, offset(first, resumed_at, before), lambda it: it <= resumed_at),
        (second, before + offset(second, 375, times["model_375.pt"]["s_since_second_process_start"]), lambda it: True),
    ]
    curve: dict[str, list[float]] = {"time_s": [], "return": [], "episode_length": [], "error_vel_xy": []}
    for records, shift, kept in placed:
        for record in filter(lambda record: kept(record["iteration"]), records):
            curve["time_s"].append(shift + record["elapsed_s"])
            curve["return"].append(record["mean_return"])
            curve["episode_length"].append(record["mean_episode_length"])
            curve["error_vel_xy"].append(record["metrics"]["Metrics/base_velocity/error_vel_xy"])
    seconds = {
        75: times["model_75.pt"]["s_since_process_start"],
        175: before,
        375: times["model_375.pt"]["s_of_training_processes"],
    }
    evaluations = []
    for iteration, at in seconds.items():
        summary = json.loads((run / f"evaluation_it{iteration}.json").read_text())["summary"]
        evaluations.append((at, summary["lin_vel_error_mps"], summary["fall_rate"]))
    return curve, evaluations


def walking_g1_figure(run: Path) -> Path:
    curve, evaluations = walking_g1_curve(run)
    figure, axes = plt.subplots(1, 3, figsize=(15, 4))
    axes[0].plot(curve["time_s"], curve["error_vel_xy"], label="training (noise, pushes)")
    axes[0].plot([t for t, _, _ in evaluations], [e for _, e, _ in evaluations], "o", label="evaluated (deterministic)")
    axes[0].axhline(0.35, color="grey", linestyle="--", label="target 0.35 m/s")
    axes[1].plot(curve["time_s"], curve["return"])
    axes[2].plot(curve["time_s"], curve["episode_length"])
    titles = ("linear tracking error |v_cmd - v| (m/s)", "mean return", "mean episode length (steps of 1000)")
    for axis, title in zip(axes, titles, strict=True):
        axis.set(title=title, xlabel="seconds since process start (one H200, 16 384 envs)")
        axis.grid(alpha=0.3)
        # The continuing process starts every env afresh: its first episodes are short, whatever the policy.
        axis.axvline(evaluations[1][0], color="grey", linewidth=0.8, label="continued from iteration 175")
    axes[0].legend()
    figure.suptitle("Rlscale-G1-Flat, rsl_rl")
    figure.tight_layout()
    path = run / "learning_curves.png"
    figure.savefig(path, dpi=100)
    return path


def main(folder: Path) -> Path:
    go1 = console_curve(folder / "go1_learning" / "train.log")
    g1 = tensorboard_curve(sorted((folder / "g1_learning").glob("events.out.tfevents.*")))
    figure, axes = plt.subplots(1, 3, figsize=(15, 4))
    for name, curve in (("Rlscale-Go1-Flat", go1), ("Rlscale-G1-Flat", g1)):
        axes[0].plot(curve["time_s"], curve["episode_length"], label=name)
        axes[1].plot(curve["time_s"], curve["return"], label=name)
    axes[2].plot(g1["time_s"], g1["error_vel_xy"], label="Rlscale-G1-Flat", color="C1")
    titles = ("mean episode length (steps of 1000)", "mean return", "training tracking error |v_cmd - v| (m/s)")
    for axis, title in zip(axes, titles, strict=True):
        axis.set(title=title, xlabel="training time (s), one H200, rsl_rl, 4096 envs")
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    path = folder / "learning_curves.png"
    figure.savefig(path, dpi=110)
    return path


if __name__ == "__main__":
    robots = Path(sys.argv[1] if len(sys.argv) > 1 else "results/h200/robots")
    print(main(robots))
    print(walking_g1_figure(robots / "g1_walks"))
