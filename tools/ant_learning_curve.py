"""Learning curves of Rlscale-Ant runs from their TensorBoard events: mean episode return and forward speed.

Each library logs under its own tag names; the forward speed is the task's ``Metrics/forward_speed`` (mean over the
episodes that ended: final x over the episode's duration), which rsl_rl and skrl log and rl_games does not.

Usage: python tools/ant_learning_curve.py OUT_DIR RUN_DIR [RUN_DIR...]
(each RUN_DIR is an ``rlscale train`` run directory, holding manifest.json). Writes OUT_DIR/curves.csv and
OUT_DIR/learning_curve.png.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

# library -> (return tag, forward speed tag or None, what a TensorBoard step counts)
TAGS = {
    "rsl_rl": ("Train/mean_reward", "Metrics/forward_speed", "iteration"),
    "skrl": ("Reward / Total reward (mean)", "Metrics/forward_speed", "env_step"),
    "rl_games": ("rewards/step", None, "global_step"),
}


def run_curves(run_dir: Path) -> pd.DataFrame:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    library, num_envs = manifest["args"]["rl_library"], manifest["args"]["num_envs"]
    return_tag, speed_tag, step_unit = TAGS[library]
    (events,) = run_dir.rglob("events.out.tfevents.*")
    accumulator = EventAccumulator(str(events), size_guidance={"scalars": 0})
    accumulator.Reload()

    def series(tag: str) -> pd.Series:
        return pd.Series({event.step: event.value for event in accumulator.Scalars(tag)}, dtype=float)

    table = pd.DataFrame({"mean_return": series(return_tag)})
    if speed_tag is not None:
        table["forward_speed"] = series(speed_tag)
    scale = {
        "iteration": manifest["agent_cfg"].get("num_steps_per_env", 1) * num_envs,
        "env_step": num_envs,
        "global_step": 1,
    }[step_unit]
    table["env_steps"] = table.index * scale
    table["library"] = library
    return table.reset_index(drop=True)


def main(out_dir: str, *run_dirs: str) -> None:
    curves = pd.concat([run_curves(Path(run_dir)) for run_dir in run_dirs], ignore_index=True)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    curves.to_csv(out / "curves.csv", index=False)
    figure, (returns, speeds) = plt.subplots(1, 2, figsize=(11, 4))
    for color, (library, curve) in zip(("C0", "C1", "C2"), curves.groupby("library"), strict=False):
        x = curve["env_steps"] / 1e6
        returns.plot(x, curve["mean_return"].ewm(alpha=0.1).mean(), color=color, label=library)
        if curve["forward_speed"].notna().any():
            speeds.plot(x, curve["forward_speed"].ewm(alpha=0.1).mean(), color=color, label=library)
    returns.set(xlabel="env steps (millions)", ylabel="mean episode return (EMA 0.1)", title="Rlscale-Ant, 1 H200")
    speeds.set(xlabel="env steps (millions)", ylabel="forward speed, m/s (EMA 0.1)", title="target 1.0 m/s")
    for axes in (returns, speeds):
        axes.grid(alpha=0.3)
        axes.legend()
    figure.tight_layout()
    figure.savefig(out / "learning_curve.png", dpi=120)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
