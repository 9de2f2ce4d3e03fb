"""The CUDA-graph step (rlscale.tasks.graph): same results as the eager step, outputs that outlive the next step.

The equivalence tests need a GPU; the copy-out and the CPU fallbacks run everywhere.
"""

from types import SimpleNamespace

import pytest
import torch

from rlscale.tasks import graph, make_task
from rlscale.tasks.graph import EAGER_STEPS, GraphedTask, _copy_out, build_task, env_step_of, graphed_if_possible

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_copy_out_keeps_views_of_one_copy():
    base = torch.arange(6.0)
    out = _copy_out({"log": dict(zip("abc", base[3:].unbind(), strict=True)), "x": (base,)}, {})
    base.zero_()
    assert [value.item() for value in out["log"].values()] == [3.0, 4.0, 5.0]
    assert out["x"][0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert out["log"]["a"].untyped_storage().data_ptr() == out["x"][0].untyped_storage().data_ptr()


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("CUDA out of memory. Tried to allocate 2.00 GiB", True),
        ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate", True),
        ("Failed to allocate 8589934592 bytes on device 'cuda:0'", True),  # Warp
        (  # torch on the CPU, past what the host can allocate
            "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
            "allocate 800000000000 bytes. Error code 12 (Cannot allocate memory)",
            True,
        ),
        ("Failed to allocate memory during graph capture because memory pools are not enabled", False),
        ("nconmax overflow (nconmax must be >= 4)", False),
    ],
)
def test_out_of_memory_is_told_from_other_build_errors(message, expected):
    assert graph.out_of_memory(RuntimeError(message)) is expected


def test_cpu_task_is_left_eager():
    task = make_task("Isaac-Cartpole", device="cpu", num_envs=4)
    assert graphed_if_possible(task) is task
    with pytest.raises(ValueError, match="cannot be captured"):
        GraphedTask(task)


@pytest.mark.parametrize(
    ("enabled", "capturable", "device", "graphed"),
    [
        (True, True, "cuda:0", True),
        (False, True, "cuda:0", False),  # --no_cuda_graph
        (True, False, "cuda:0", False),  # a task that cannot be captured (MJX)
        (True, True, "cpu", False),
    ],
)
def test_graph_only_when_enabled_capturable_and_on_cuda(monkeypatch, enabled, capturable, device, graphed):
    """The decision alone, on a stand-in task (no GPU needed): GraphedTask is what a CUDA run would get."""
    task = SimpleNamespace(graph_capturable=capturable, device=torch.device(device))
    monkeypatch.setattr(graph, "GraphedTask", lambda wrapped: ("graphed", wrapped))
    assert (graphed_if_possible(task, enabled=enabled) == ("graphed", task)) is graphed


@pytest.mark.parametrize("cuda_graph", [True, False])
def test_build_task_passes_the_setting_on(monkeypatch, cuda_graph):
    """``build_task(cuda_graph=False)``, what --no_cuda_graph asks for, leaves a capturable CUDA task eager."""
    task = SimpleNamespace(graph_capturable=True, device=torch.device("cuda:0"))
    made = []

    def make_task(task_id: str, **cfg):
        made.append((task_id, cfg))
        return task

    monkeypatch.setattr(graph, "make_task", make_task)
    monkeypatch.setattr(graph, "GraphedTask", lambda wrapped: ("graphed", wrapped))
    result = build_task("Isaac-Cartpole", cuda_graph=cuda_graph, device="cuda:0", seed=3)
    assert result == (("graphed", task) if cuda_graph else task)
    assert made == [("Isaac-Cartpole", {"device": "cuda:0", "seed": 3})]


def test_env_step_says_whether_steps_replay_a_graph():
    """Eager for a bare task and for a graphed one before (or without) its capture; cuda_graph once captured."""
    assert env_step_of(make_task("Isaac-Cartpole", device="cpu", num_envs=4)) == "eager"
    graphed = GraphedTask.__new__(GraphedTask)  # its constructor needs a GPU; only the capture state matters here
    graphed._graph = None
    assert env_step_of(graphed) == "eager"
    graphed._graph = object()
    assert env_step_of(graphed) == "cuda_graph"


@cuda
@pytest.mark.parametrize(("cuda_graph", "expected"), [(True, "cuda_graph"), (False, "eager")])
def test_build_task_on_the_gpu(cuda_graph, expected):
    task = build_task("Isaac-Cartpole", cuda_graph=cuda_graph, device="cuda", num_envs=64)
    for _ in range(EAGER_STEPS + 1):
        task.step(torch.zeros(task.num_envs, 1, device="cuda"))
    assert env_step_of(task) == expected


def _pair(task_id: str, num_envs: int = 512):
    eager = make_task(task_id, device="cuda", num_envs=num_envs, seed=7)
    graphed = graphed_if_possible(make_task(task_id, device="cuda", num_envs=num_envs, seed=7))
    assert isinstance(graphed, GraphedTask)
    return eager, graphed


def _assert_same(left, right):
    if isinstance(left, dict):
        assert left.keys() == right.keys()
        for key in left:
            _assert_same(left[key], right[key])
    elif isinstance(left, tuple):
        for a, b in zip(left, right, strict=True):
            _assert_same(a, b)
    else:
        torch.testing.assert_close(left, right, rtol=0, atol=0)


@cuda
@pytest.mark.parametrize("task_id", ["Isaac-Cartpole", "Isaac-Cartpole-Direct"])
def test_graph_replays_the_eager_step(task_id):
    """700 steps cross terminations, time-outs and resets; every output matches the eager task's exactly."""
    eager, graphed = _pair(task_id)
    generator = torch.Generator("cuda").manual_seed(0)
    for step in range(700):
        actions = torch.rand(eager.num_envs, 1, device="cuda", generator=generator) * 4 - 2
        _assert_same(eager.step(actions), graphed.step(actions))
        if step == EAGER_STEPS + 1:
            assert graphed.captured
    assert graphed.captured


@cuda
def test_outputs_outlive_the_next_step_and_writes_reach_the_graph():
    eager, graphed = _pair("Isaac-Cartpole")
    actions = torch.full((eager.num_envs, 1), 0.3, device="cuda")
    for _ in range(EAGER_STEPS + 2):
        eager.step(actions), graphed.step(actions)
    kept = graphed.step(actions)
    kept_reference = eager.step(actions)
    graphed.step(-actions), eager.step(-actions)
    _assert_same(kept, kept_reference)  # not overwritten by the later replay
    # What a trainer writes (rsl_rl's random episode lengths) and a reset are seen by the next replay.
    _assert_same(eager.reset(), graphed.reset())
    lengths = torch.randint(0, 299, (eager.num_envs,), device="cuda")
    eager.episode_length_buf = lengths.clone()
    graphed.episode_length_buf = lengths.clone()
    for _ in range(50):
        _assert_same(eager.step(actions), graphed.step(actions))
