"""A checkpoint's actions twice on the same observations: as its library evaluates it, and as rlscale's adapter's
``inference_policy`` gives them.

Run by ``tests/test_play.py`` in a process of its own (rl_games changes global torch flags, skrl seeds every RNG):
``python evaluation_probe.py CHECKPOINT OUTPUT``. A scripted task hands out the same random observations, a fifth of
them beyond Isaac-Cartpole's observation clipping, to both and records the actions it gets. The library's side is its
own evaluation loop over the wrappers rlscale trains with: rl_games' player (``Runner.run`` in play mode) or skrl's
trainer (``Runner.run("eval")`` after ``agent.load``). ``OUTPUT`` gets ``{"library": ..., "adapter": ...}``, each
shaped (steps, envs, actions).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import torch

from rlscale.manifest import read_checkpoint_manifest
from rlscale.rl import load_adapter
from rlscale.tasks import make_task
from rlscale.tasks.base import VecTask

STEPS = 12
NUM_ENVS = 8
SCALE = 4.0
"""Standard deviation of the scripted observations: about a fifth lie beyond Isaac-Cartpole's clip_observations (5)."""


class ScriptedTask(VecTask):
    """Hands out ``script[0]`` at reset and ``script[k]`` after the k-th step, every env ending at the last step, and
    records the actions it gets."""

    def __init__(self, template: VecTask, script: list[dict[str, torch.Tensor]]) -> None:
        self.cfg = template.cfg
        self.num_envs, self.num_actions, self.device = NUM_ENVS, template.num_actions, template.device
        self.observation_dims = template.observation_dims
        self.max_episode_length = len(script) - 1
        self.step_dt = template.step_dt
        self.episode_length_buf = torch.zeros(NUM_ENVS, dtype=torch.long)
        self.is_finite_horizon = template.is_finite_horizon
        self.script = script
        self.taken: list[torch.Tensor] = []

    def reset(self):
        return self.script[0], {}

    def get_observations(self):
        return self.script[len(self.taken)]

    def step(self, actions: torch.Tensor):
        self.taken.append(actions.detach().clone())
        ended = torch.full((NUM_ENVS,), len(self.taken) == self.max_episode_length)
        return self.get_observations(), torch.zeros(NUM_ENVS), ended, torch.zeros_like(ended), {"log": {}}


def library_evaluates(library: str, ml_framework: str, task: VecTask, agent_cfg: dict, checkpoint: Path) -> None:
    """The library's own evaluation loop over ``task`` for its script's steps."""
    if library == "rl_games":
        from rl_games.torch_runner import Runner

        from rlscale.rl.rl_games import runner_params

        params, _ = runner_params(task, agent_cfg, "cpu")
        params["config"]["player"] = {"games_num": 1, "deterministic": True, "print_stats": False}
        runner = Runner()
        runner.load({"params": params})
        runner.run({"train": False, "play": True, "checkpoint": str(checkpoint), "sigma": None})
    else:
        from rlscale.rl.skrl import build_runner

        cfg = copy.deepcopy(agent_cfg)
        cfg["trainer"]["timesteps"] = STEPS
        cfg["agent"]["experiment"].update(write_interval=0, checkpoint_interval=0)
        runner, _ = build_runner(task, cfg, ml_framework)
        runner.agent.load(str(checkpoint))
        runner.run("eval")


def main(checkpoint: Path, output: Path) -> None:
    manifest = read_checkpoint_manifest(checkpoint)
    run_args, agent_cfg = manifest.args, dict(manifest.agent_cfg)
    template = make_task(run_args.task, num_envs=NUM_ENVS, device="cpu")
    generator = torch.Generator().manual_seed(0)
    dims = template.observation_dims
    script = [
        {group: SCALE * torch.randn(NUM_ENVS, dim, generator=generator) for group, dim in dims.items()}
        for _ in range(STEPS + 1)
    ]
    evaluated = ScriptedTask(template, script)
    library_evaluates(run_args.rl_library, run_args.ml_framework, evaluated, agent_cfg, checkpoint)
    adapter = load_adapter(run_args.rl_library)
    policy = adapter.inference_policy(
        ScriptedTask(template, script), agent_cfg, checkpoint, "cpu", run_args.ml_framework
    )
    with torch.inference_mode():  # as rlscale evaluate and play run it
        inferred = [policy(observations) for observations in script[:STEPS]]
    torch.save({"library": torch.stack(evaluated.taken), "adapter": torch.stack(inferred)}, output)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
