"""``rlscale train --cpu_threads``, ``--no_cuda_graph`` and ``--tf32``: what a run does with them and what its
manifest records.

One short CPU run in this process per case (:func:`rlscale.run.phases.execute`), the threads read from inside it.
Whether the graph is used at all is decided by :func:`rlscale.tasks.graph.graphed_if_possible`
(tests/test_cuda_graph.py); that the run hands the flag to it, by tests/test_peer.py's ``TestSameEnvStep``.
"""

from __future__ import annotations

import json
import signal

import pytest
import torch

from rlscale.device import Device
from rlscale.run.phases import execute
from rlscale.run.rank import allow_tf32
from rlscale.run.spec import resolve_spec


@pytest.fixture
def run(tmp_path):
    """Run ``rlscale train`` in this process with extra flags; returns the threads during the run and the manifest.

    The process's own torch threads and SIGINT/SIGTERM handlers, which a run sets, are restored afterwards.
    """
    threads, handlers = torch.get_num_threads(), {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def train(*flags: str) -> tuple[int, dict]:
        argv = ["--task", "Isaac-Cartpole", "--device", "cpu", "--num_envs", "16", "--max_iterations", "1"]
        spec = resolve_spec([*argv, "--log_root", str(tmp_path), *flags])
        during = []
        outcome = execute(spec, on_task_created=lambda task: during.append(torch.get_num_threads()))
        assert outcome.status == "completed"
        return during[0], json.loads((outcome.context.log_dir / "manifest.json").read_text())

    yield train
    torch.set_num_threads(threads)
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def test_cpu_threads_are_the_runs_and_recorded(run):
    threads, manifest = run("--cpu_threads", "3")
    assert threads == 3
    assert manifest["args"]["cpu_threads"] == 3


def test_a_cpu_rank_defaults_to_one_thread(run):
    torch.set_num_threads(3)  # whatever the process had: the run sets its own
    threads, manifest = run()
    assert threads == 1
    assert manifest["args"]["cpu_threads"] is None


@pytest.mark.parametrize("flag", [False, True])
def test_no_cuda_graph_is_recorded(run, flag):
    _, manifest = run(*(["--no_cuda_graph"] if flag else []))
    assert manifest["args"]["no_cuda_graph"] is flag


def test_tf32_is_recorded_and_a_no_op_on_the_cpu(run):
    matmul = torch.backends.cuda.matmul.fp32_precision
    _, manifest = run("--tf32")
    assert manifest["args"]["tf32"] is True and manifest["speed_levers"]["tf32"] is False
    assert torch.backends.cuda.matmul.fp32_precision == matmul


def test_tf32_off_by_default(run):
    _, manifest = run()
    assert manifest["args"]["tf32"] is False and manifest["speed_levers"]["tf32"] is False


@pytest.fixture
def float32_precision():
    """Restore torch's float32 matmul and cuDNN settings, which :func:`allow_tf32` changes for the process."""
    matmul, cudnn = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    yield
    torch.set_float32_matmul_precision(matmul)
    torch.backends.cudnn.allow_tf32 = cudnn


def test_tf32_on_a_cuda_rank_sets_torchs_switches(float32_precision):
    """The switches are process-wide flags, set here without a GPU; torch applies them to CUDA kernels only."""
    assert allow_tf32(Device("cuda", 0)) is True
    assert torch.backends.cuda.matmul.fp32_precision == "tf32" and torch.backends.cudnn.allow_tf32
    assert torch.get_float32_matmul_precision() == "high"  # still answers: inductor's autotuning reads it
