"""`rlscale check_task`: every shipped task keeps the VecTask contract, and each kind of breach is named in one line.

The broken tasks are small subclasses of the example pendulum (examples/pendulum_task), each breaking one rule, in a
module that the ``module:Task-Id`` form imports from a temporary directory.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from example_task import EXAMPLE_TASK, ensure_example_installed
from physics_support import FAST_COMPILE
from rlscale_command import rlscale

BRANCH = "bool(tensor) (Python control flow on a tensor: if, while, and, or)"

BROKEN_TASKS = textwrap.dedent(
    """
    import math
    import time

    import torch
    from pendulum_task.env import PendulumSwingup
    from rlscale.tasks import register_task
    from rlscale.tasks.footprint import EnvFootprint


    class WrongShape(PendulumSwingup):
        def step(self, actions):
            observations, reward, terminated, truncated, extras = super().step(actions)
            return observations, reward.unsqueeze(1), terminated, truncated, extras


    class HostSync(PendulumSwingup):
        def step(self, actions):
            outputs = super().step(actions)
            if outputs[3].any():  # a Python branch on device data: bool() waits for the device
                pass
            return outputs


    class BothDone(PendulumSwingup):
        def step(self, actions):
            observations, reward, terminated, truncated, extras = super().step(actions)
            return observations, reward, truncated.clone(), truncated, extras


    class LongerThanItSays(PendulumSwingup):
        def __init__(self, cfg):
            super().__init__(cfg)
            self.max_episode_length = 150

        def step(self, actions):
            self.max_episode_length = 200  # it truncates at 200 all the same
            try:
                return super().step(actions)
            finally:
                self.max_episode_length = 150


    class IgnoresSeed(PendulumSwingup):
        def __init__(self, cfg):
            super().__init__(cfg)
            self.generator.manual_seed(0)
            self.reset()


    class NotReproducible(PendulumSwingup):
        def __init__(self, cfg):
            super().__init__(cfg)
            self.generator.manual_seed(time.perf_counter_ns())  # each build its own seed, whatever it was given
            self.reset()


    class WrongDtype(PendulumSwingup):
        def step(self, actions):
            observations, reward, terminated, truncated, extras = super().step(actions)
            return observations, reward.double(), terminated, truncated, extras


    class WrongDevice(PendulumSwingup):
        def step(self, actions):
            observations, reward, terminated, truncated, extras = super().step(actions)
            extras["episode_return"] = extras["episode_return"].to("meta")
            return observations, reward, terminated, truncated, extras


    class LengthNotRestarted(PendulumSwingup):
        def step(self, actions):
            outputs = super().step(actions)
            self.episode_length_buf.masked_fill_(outputs[3], 1)  # a finished env's counter restarts at 1, not 0
            return outputs


    class WrongEpisodeLength(PendulumSwingup):
        def step(self, actions):
            observations, reward, terminated, truncated, extras = super().step(actions)
            extras["episode_length"] = extras["episode_length"] + 1
            return observations, reward, terminated, truncated, extras


    class ChangingLogKeys(PendulumSwingup):
        calls = 0

        def step(self, actions):
            observations, reward, terminated, truncated, extras = super().step(actions)
            self.calls += 1
            if self.calls % 2:
                extras["log"]["Episode_Reward/sometimes"] = torch.zeros((), device=self.device)
            return observations, reward, terminated, truncated, extras


    class NotFinite(PendulumSwingup):
        def step(self, actions):
            observations, reward, terminated, truncated, extras = super().step(actions)
            return observations, reward + math.inf, terminated, truncated, extras


    class ResetLeavesLength(PendulumSwingup):
        def reset(self):
            outputs = super().reset()
            self.episode_length_buf.fill_(1)
            return outputs


    class ZeroStepDt(PendulumSwingup):
        def __init__(self, cfg):
            super().__init__(cfg)
            self.step_dt = 0.0


    class ExtraObservationGroup(PendulumSwingup):
        def get_observations(self):
            observations = super().get_observations()
            return {**observations, "critic": observations["policy"]}


    class ReplaysDifferently(PendulumSwingup):  # graph_capturable, but a captured graph freezes its Python counter
        calls = 0

        def step(self, actions):
            self.calls += 1
            return super().step(actions * (self.calls % 2))


    BROKEN = (
        "WrongShape", "HostSync", "BothDone", "LongerThanItSays", "IgnoresSeed", "NotReproducible", "WrongDtype",
        "WrongDevice", "LengthNotRestarted", "WrongEpisodeLength", "ChangingLogKeys", "NotFinite", "ResetLeavesLength",
        "ZeroStepDt", "ExtraObservationGroup", "ReplaysDifferently",
    )
    def host_read(read):
        # A task whose step reads its outputs back to the host as `read` does, and otherwise keeps the contract.

        class HostRead(PendulumSwingup):
            def step(self, actions):
                outputs = super().step(actions)
                read(outputs[1], outputs[3])
                return outputs

        return HostRead


    def masked_write(reward, truncated):
        reward.clone()[truncated] = 0.0


    HOST_READS = {
        "MaskedIndex": lambda reward, truncated: reward[truncated],
        "MaskedWrite": masked_write,
        "ToCpu": lambda reward, truncated: reward.cpu(),
        "ToNumpy": lambda reward, truncated: reward.numpy(),
        "ToList": lambda reward, truncated: reward.tolist(),
        "Item": lambda reward, truncated: reward.sum().item(),
        "WhileOnTensor": lambda reward, truncated: [None for _ in range(3) if truncated.all()],
    }
    for name, read in HOST_READS.items():
        globals()[name] = host_read(read)
    for name in (*BROKEN, *HOST_READS):
        register_task(name, f"{__name__}:{name}", "pendulum_task.env:PendulumCfg", {}, package=__name__)
    register_task(  # the pendulum, said to observe 4 values: the run's memory estimate would read the wrong size
        "WrongFootprint", "pendulum_task.env:PendulumSwingup", "pendulum_task.env:PendulumCfg", {},
        package=__name__, footprint=EnvFootprint(observations=4, actions=1),
    )
    """
)


@pytest.fixture(scope="module", autouse=True)
def example_installed() -> None:
    ensure_example_installed()


def check_task(*args: str, pythonpath: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    return rlscale("check_task", *args, env={"XLA_FLAGS": FAST_COMPILE}, pythonpath=pythonpath, timeout=timeout)


def violations(output: str) -> list[str]:
    return [line.removeprefix("VIOLATION ") for line in output.splitlines() if line.startswith("VIOLATION ")]


@pytest.mark.parametrize("task_id", ["Isaac-Cartpole", "Isaac-Cartpole-Direct", "Pendulum-Swingup"])
def test_shipped_tasks_conform(task_id):
    result = check_task(task_id, "--num_envs", "8")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"check_task {task_id} on cpu, 8 envs" and lines[-1] == "conforms"
    assert not violations(result.stdout)
    assert any(line.startswith("throughput: ") and "env steps/s (eager)" in line for line in lines)


@pytest.mark.slow
def test_ant_conforms():
    """Rlscale-Ant on MJX (about 20 s on CPU: one compile, shared by the checked builds)."""
    result = check_task("Rlscale-Ant", "--num_envs", "4", timeout=600)
    if "needs MuJoCo MJX" in result.stderr:
        pytest.skip("mujoco.mjx not installed (pip install 'rlscale[mjx]')")
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert result.stdout.splitlines()[-1] == "conforms"


@pytest.fixture(scope="module")
def broken_tasks(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("broken")
    (folder / "broken_tasks.py").write_text(BROKEN_TASKS)
    return str(folder)


def test_a_broken_task_fails_naming_its_violation(broken_tasks):
    """The command: exit 1, and the breach is the one violation reported, on its own line."""
    result = check_task("broken_tasks:WrongShape", "--num_envs", "8", pythonpath=broken_tasks)
    assert result.returncode == 1, result.stdout + result.stderr
    assert violations(result.stdout) == ["step reward: has shape (8, 1), expected (8,)"]
    assert result.stdout.splitlines()[-1] == "1 violation(s)"


@pytest.fixture
def in_process_broken_tasks(broken_tasks, monkeypatch, own_registry):
    """The broken tasks importable here, registered by each test anew and dropped after it (they would otherwise be
    listed among the known tasks of every later test)."""
    monkeypatch.syspath_prepend(broken_tasks)
    monkeypatch.delitem(sys.modules, "broken_tasks", raising=False)
    monkeypatch.setenv("XLA_FLAGS", FAST_COMPILE)  # check_task adds to it


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("WrongShape", ["step reward: has shape (8, 1), expected (8,)"]),
        ("WrongDtype", ["step reward: has dtype torch.float64, expected torch.float32"]),
        ("WrongDevice", ["extras['episode_return']: is on meta, expected cpu"]),
        ("HostSync", [f"host sync: step calls {BRANCH}, which waits for the device"]),
        ("BothDone", ["step: terminated and truncated are both set for one env (first at step 199)"]),
        ("NotFinite", ["step: reward is not finite (first at step 0)"]),
        ("LongerThanItSays", ["max_episode_length: an episode ran 151 steps; max_episode_length is 150"]),
        (
            "LengthNotRestarted",
            ["auto-reset: episode_length_buf is not 0 for the finished envs and +1 for the others after step"],
        ),
        ("WrongEpisodeLength", ["auto-reset: extras['episode_length'] of a finished env is not its steps (step 199)"]),
        ("ResetLeavesLength", ["reset: episode_length_buf is not 0 after reset()"]),
        (
            "ChangingLogKeys",
            ["extras: extras['log'] keys change between steps (missing ['Episode_Reward/sometimes'], new [])"],
        ),
        ("ZeroStepDt", ["attributes: step_dt is 0.0, not a positive float"]),
        (
            "WrongFootprint",
            ["footprint: it states 4 observation and 1 action values per env, but the task has 3 and 1"],
        ),
        (
            "ExtraObservationGroup",
            [
                f"{where}: observation groups ['critic', 'policy'] are not ['policy']"
                for where in ("reset", "get_observations", "step")
            ],
        ),
        ("NotReproducible", ["determinism: a second build with seed 0 differs in policy at step 0"]),
        ("IgnoresSeed", ["determinism: seeds 0 and 1 gave the same trajectory"]),
        ("MaskedIndex", ["host sync: step calls masked indexing tensor[mask], which waits for the device"]),
        ("MaskedWrite", ["host sync: step calls a masked write tensor[mask] = ..., which waits for the device"]),
        ("ToCpu", ["host sync: step calls Tensor.cpu(), which waits for the device"]),
        ("ToNumpy", ["host sync: step calls Tensor.numpy(), which waits for the device"]),
        ("ToList", ["host sync: step calls Tensor.tolist(), which waits for the device"]),
        ("Item", ["host sync: step calls Tensor.item(), which waits for the device"]),
        ("WhileOnTensor", [f"host sync: step calls {BRANCH}, which waits for the device"]),
    ],
)
def test_each_check_has_a_task_that_breaks_it(in_process_broken_tasks, task, expected):
    """One broken task per check, each caught by that check alone (in this process: the command is tested above)."""
    from rlscale.tasks.conformance import check_task as check

    assert check(f"broken_tasks:{task}", num_envs=8).violations == expected


@pytest.mark.skipif(not torch.cuda.is_available(), reason="graph_capturable is checked on CUDA only")
def test_a_task_whose_graph_replays_differently_is_caught(in_process_broken_tasks):
    """The eager step alternates its actions by a Python counter, which a captured graph freezes."""
    from rlscale.tasks.conformance import check_task as check

    violations_found = check("broken_tasks:ReplaysDifferently", device="cuda", num_envs=8).violations
    assert [line.split(" differs")[0] for line in violations_found] == ["graph_capturable: the replayed step"]


def test_an_unknown_task_is_a_usage_error():
    result = check_task("No-Such-Task")
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith("rlscale check_task: error: unknown task 'No-Such-Task'")


def test_the_example_is_its_own_distribution():
    """The example installs as a user's package would: its own distribution, outside rlscale's source tree."""
    import importlib.metadata

    import pendulum_task

    distribution = importlib.metadata.distribution("rlscale-pendulum-task")
    assert [entry.value for entry in distribution.entry_points.select(group="rlscale.tasks")] == ["pendulum_task"]
    assert os.path.realpath(pendulum_task.__file__).startswith(os.path.realpath(EXAMPLE_TASK))


def test_the_documented_minimal_task_conforms(tmp_path):
    """docs/tasks.md's minimal task and its registration, as printed there, pass check_task."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "tasks.md").read_text()
    env = re.search(r"A point on a line.*?```python\n(.*?)```", docs, re.S)
    registration = re.search(r"### Register it.*?```python\n(.*?)```", docs, re.S)
    assert env and registration, "docs/tasks.md no longer has the minimal task and its registration"
    (tmp_path / "my_tasks").mkdir()
    (tmp_path / "my_tasks" / "env.py").write_text(env[1])
    (tmp_path / "my_tasks" / "__init__.py").write_text(registration[1])
    result = check_task("my_tasks:My-Reach", "--num_envs", "8", pythonpath=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (None, "--xla_gpu_deterministic_ops=true"),
        (FAST_COMPILE, f"{FAST_COMPILE} --xla_gpu_deterministic_ops=true"),
        ("--xla_gpu_deterministic_ops=false", "--xla_gpu_deterministic_ops=false"),  # the user's own choice wins
    ],
)
def test_check_task_asks_xla_for_deterministic_kernels(monkeypatch, before, after):
    from rlscale.tasks.conformance import use_deterministic_kernels

    if before is None:
        monkeypatch.delenv("XLA_FLAGS", raising=False)
    else:
        monkeypatch.setenv("XLA_FLAGS", before)
    use_deterministic_kernels()
    assert os.environ["XLA_FLAGS"] == after
