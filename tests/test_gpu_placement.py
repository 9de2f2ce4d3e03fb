"""Rlscale-Ant's device placement on real GPUs: every JAX array of the task and every tensor it returns sits on the
task's own GPU, and stepping needs no transfer. Skipped without CUDA (CI); run on H200s.

``tests/test_ant.py::TestDevicePlacement`` checks the same on two CPU devices standing in for GPUs.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
import torch

HAS_MJX = importlib.util.find_spec("mujoco") is not None and importlib.util.find_spec("mujoco.mjx") is not None
pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(not HAS_MJX, reason="mujoco.mjx not installed (pip install 'rlscale[mjx]')"),
]

PLACEMENT = """
import jax, sys, torch
from rlscale.tasks import make_task
device = sys.argv[1]
task = make_task("Rlscale-Ant", num_envs=64, seed=0, device=device)
outputs = []
with jax.transfer_guard("disallow"):  # an array left on another device would need a transfer into the step
    for _ in range(3):
        observations, *flags, _ = task.step(torch.zeros(64, task.num_actions, device=device))
        outputs += [*observations.values(), *flags]
leaves = jax.tree_util.tree_leaves(task._state)
jax_devices = sorted({f"{d.platform}:{d.id}" for leaf in leaves for d in leaf.devices()})
torch_devices = sorted({str(t.device) for t in outputs})
print(jax_devices, torch_devices)
"""


def placement(device: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", PLACEMENT, device],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def test_the_task_lives_on_the_first_gpu():
    assert placement("cuda:0") == "['gpu:0'] ['cuda:0']"


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_the_task_lives_on_the_second_gpu_only():
    """JAX's default device is GPU 0 here, as for rank 1 of a job that sees both GPUs."""
    assert placement("cuda:1") == "['gpu:1'] ['cuda:1']"
