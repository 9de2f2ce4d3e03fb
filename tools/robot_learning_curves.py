"""Learning curves of the H200 robot runs (results/h200/robots/): episode length, return and the training tracking
error against training time, from the runs' console logs (Go1; its interrupted manifest kept no iterations) and
rsl_rl's TensorBoard logs (G1, whose second file continues the first from its iteration-275 checkpoint).

Usage: python tools/robot_learning_curves.py [results/h200/robots]
"""

from __future__ import annotations

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
    print(main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/h200/robots")))
