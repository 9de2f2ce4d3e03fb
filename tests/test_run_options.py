"""``rlscale train --cpu_threads`` and ``--no_cuda_graph``: what a run does with them and what its manifest records.

One short CPU run in this process per case (:func:`rlscale.run.phases.execute`), the threads read from inside it.
Whether the graph is used at all is decided by :func:`rlscale.tasks.graph.graphed_if_possible`
(tests/test_cuda_graph.py); that the run hands the flag to it, by tests/test_peer.py's ``TestSameEnvStep``.
"""

from __future__ import annotations

import json
import signal

import pytest
import torch

from rlscale.run.phases import execute
from rlscale.run.spec import resolve_spec


@pytest.fixture
def run(tmp_path):
    """Run ``rlscale train`` in this process with extra flags; returns the threads during the run and the manifest.

    The process's own torch threads and SIGTERM handler, which a run sets, are restored afterwards.
    """
    threads, handler = torch.get_num_threads(), signal.getsignal(signal.SIGTERM)

    def train(*flags: str) -> tuple[int, dict]:
        argv = ["--task", "Isaac-Cartpole", "--device", "cpu", "--num_envs", "16", "--max_iterations", "1"]
        spec = resolve_spec([*argv, "--log_root", str(tmp_path), *flags])
        during = []
        outcome = execute(spec, on_task_created=lambda task: during.append(torch.get_num_threads()))
        assert outcome.status == "completed"
        return during[0], json.loads((outcome.log_dir / "manifest.json").read_text())

    yield train
    torch.set_num_threads(threads)
    signal.signal(signal.SIGTERM, handler)


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
