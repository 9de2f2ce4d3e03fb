"""Launches refused before torchrun starts, each in one line with exit code 2 and nothing written: GPU ranks that
would run on the CPU, and a rendezvous port that is already taken.

The cases keep the contract of ``test_bad_inputs.py`` (whose runner they use); torch's CUDA is stood in for by
patching ``torch.cuda``, so that they mean the same on a GPU host as on this CPU one.
"""

from __future__ import annotations

import json
import socket

import pytest
import torch
from test_bad_inputs import Case, run_case, tree

from rlscale.device import Device
from rlscale.launch.launcher import failed_ranks
from rlscale.launch.ports import port_taken
from rlscale.launch.torch_gpus import TorchGpus, gpu_rank_shortfall, probe_torch_gpus

LAUNCH = "train_multigpu --task Isaac-Cartpole --max_iterations 1"


def torch_offers(monkeypatch, build: str | None, devices: int) -> None:
    """Make this process's torch look like a ``build`` (None: CPU-only) seeing ``devices`` CUDA devices."""
    monkeypatch.setattr(torch.version, "cuda", build)
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: devices > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: devices)


GPU_CASES = [
    # (id, command, CUDA_VISIBLE_DEVICES, torch's build, torch's devices, what the line names)
    ("cpu-torch-two-gpus", f"{LAUNCH} --num_gpus 2", "0,1", None, 0, ("2 GPU rank(s)", "built without CUDA")),
    ("cpu-torch-default", LAUNCH, "0,1", None, 0, ("CUDA_VISIBLE_DEVICES='0,1'", "built without CUDA")),
    ("cpu-torch-auto", f"{LAUNCH} --num_gpus auto", "0,1", None, 0, ("built without CUDA", "--device cpu")),
    ("cuda-torch-sees-none", f"{LAUNCH} --num_gpus 2", "0,1", "12.8", 0, ("sees no CUDA device", "nvidia-smi -L")),
    ("cuda-torch-sees-fewer", f"{LAUNCH} --num_gpus 2", "0,7", "12.8", 1, ("sees only 1 CUDA device(s)",)),
    ("visible-minus-one", LAUNCH, "-1", "12.8", 0, ("none is visible", "CUDA stops at '-1'")),
    ("visible-minus-one-dry-run", f"{LAUNCH} --dry_run", "-1", "12.8", 0, ("CUDA stops at '-1'",)),
    ("visible-name", f"{LAUNCH} --num_gpus 2", "0,gpu1", "12.8", 2, ("exceeds the 1 GPU(s)", "CUDA stops")),
    ("probe-cpu-torch", "nccl_probe --num_gpus 2", "0,1", None, 0, ("rlscale nccl_probe", "built without CUDA")),
    ("benchmark-cpu-torch", "benchmark training_multigpu --task Isaac-Cartpole --num_gpus 2", "0,1", None, 0,
     ("built without CUDA",)),
]  # fmt: skip


class TestGpuRanksNeverRunOnCpu:
    @pytest.mark.parametrize(("command", "visible", "build", "devices", "needs"), [c[1:] for c in GPU_CASES],
                             ids=[c[0] for c in GPU_CASES])  # fmt: skip
    def test_refused_in_one_line(self, command, visible, build, devices, needs, tmp_path, monkeypatch, capsys):
        """A job that asks for GPUs which torch cannot give is refused before torchrun starts, naming the cause."""
        monkeypatch.chdir(tmp_path)
        torch_offers(monkeypatch, build, devices)
        case = Case("gpu", command, needs, env={"CUDA_VISIBLE_DEVICES": visible})
        code, out, lines = run_case(case, tmp_path, monkeypatch, capsys)
        assert (code, out, len(lines)) == (2, "", 1), lines
        assert all(text in lines[0] for text in needs), lines[0]
        assert tree(tmp_path) == []

    def test_cpu_ranks_are_still_cpu_ranks(self, tmp_path, monkeypatch, capsys):
        """The control: --device cpu on the same CPU-only torch passes the check (and its ranks stay unbound)."""
        monkeypatch.chdir(tmp_path)
        torch_offers(monkeypatch, None, 0)
        case = Case("ok", f"{LAUNCH} --num_gpus 2 --device cpu", ("",), env={"CUDA_VISIBLE_DEVICES": "0,1"})
        with pytest.raises(AssertionError, match="a job was about to start"):
            run_case(case, tmp_path, monkeypatch, capsys)
        assert capsys.readouterr().err.splitlines()[0] == "[INFO] cpu binding auto: ranks left unbound"

    def test_gpus_torch_sees_pass(self, tmp_path, monkeypatch, capsys):
        """The control: two GPUs that torch sees pass the check, and only then are ranks placed on CPUs."""
        monkeypatch.chdir(tmp_path)
        torch_offers(monkeypatch, "12.8", 2)
        monkeypatch.setattr("rlscale.run.spec.resolve_device", lambda parser, requested: Device("cuda", 0))
        case = Case("ok", f"{LAUNCH} --num_gpus 2", ("",), env={"CUDA_VISIBLE_DEVICES": "0,1"})
        with pytest.raises(AssertionError, match="a job was about to start"):
            run_case(case, tmp_path, monkeypatch, capsys)


class TestShortfall:
    def test_probe_reads_torch(self, monkeypatch):
        torch_offers(monkeypatch, "12.8", 3)
        assert probe_torch_gpus() == TorchGpus(torch.__version__, "12.8", 3)
        torch_offers(monkeypatch, None, 0)
        assert probe_torch_gpus().build is None

    @pytest.mark.parametrize("devices", [2, 8])
    def test_enough_devices(self, devices):
        assert gpu_rank_shortfall(2, "NVML", TorchGpus("2.13.0", "12.8", devices)) is None


@pytest.fixture
def held_port():
    """A port another program listens on (loopback only: the launcher binds every interface, as torchrun does)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


CPU_LAUNCH = f"{LAUNCH} --device cpu --num_gpus 2"


class TestBusyPort:
    @pytest.mark.parametrize("extra", ["", "--nnodes 2 --node_rank 0 --master_addr 127.0.0.1"], ids=["one", "node0"])
    def test_a_taken_master_port_is_one_line(self, held_port, extra, tmp_path, monkeypatch, capsys):
        """The port node 0 would listen on is taken: refused in one line naming it, before torchrun starts."""
        monkeypatch.chdir(tmp_path)
        case = Case("port", f"{CPU_LAUNCH} {extra} --master_port {held_port}", ())
        code, out, lines = run_case(case, tmp_path, monkeypatch, capsys)
        assert (code, out, len(lines)) == (2, "", 1), lines
        assert f"--master_port {held_port} cannot be bound on this host (Address already in use)" in lines[0]
        assert "leave --master_port out" in lines[0] and tree(tmp_path) == []

    @pytest.mark.parametrize(
        "extra",
        ["--dry_run", "--nnodes 2 --node_rank 1 --master_addr node0", "--rdzv_backend c10d --rdzv_endpoint node0:1"],
        ids=["dry-run", "other-node", "c10d"],
    )
    def test_ports_this_node_does_not_bind_are_not_checked(self, held_port, extra, tmp_path, monkeypatch, capsys):
        """A dry run (the job runs later), a node that connects to node 0, and c10d rendezvous pass."""
        monkeypatch.chdir(tmp_path)
        case = Case("ok", f"{CPU_LAUNCH} --master_port {held_port} {extra}", ())
        if extra == "--dry_run":
            assert run_case(case, tmp_path, monkeypatch, capsys)[0] == 0
            return
        with pytest.raises(AssertionError, match="a job was about to start"):
            run_case(case, tmp_path, monkeypatch, capsys)

    def test_port_taken(self, held_port):
        assert port_taken(held_port) == "Address already in use"
        with socket.socket() as probe:  # a port just released by its owner is free again
            probe.bind(("127.0.0.1", 0))
            free = probe.getsockname()[1]
        assert port_taken(free) is None


class TestFailureSummary:
    def test_the_first_failure_leads(self, tmp_path):
        """Rank 1 crashed first; rank 0's broken connection, its symptom, comes after, whatever the rank order."""
        reports = {
            "rank_0": {"exit_code": 1, "error": "RuntimeError: Connection closed by peer", "failed_at": 20.5},
            "rank_1": {"exit_code": 1, "error": "InjectedCrash: on rank 1", "failed_at": 20.1},
            "rank_2": {"exit_code": 0, "error": None},
        }
        for name, report in reports.items():
            (tmp_path / f"{name}.json").write_text(json.dumps(report))
        assert failed_ranks(tmp_path, 4) == [
            "rank 1 failed first: exited 1 (InjectedCrash: on rank 1)",
            "rank 0 exited 1 (RuntimeError: Connection closed by peer)",
            "1 rank(s) never reported an exit status (reported: rank_0, rank_1, rank_2)",
        ]

    def test_no_report_at_all_points_at_torchrun(self, tmp_path):
        assert failed_ranks(tmp_path, 2) == [
            "none of the 2 rank(s) reported an exit status: the cause is torchrun's error above"
        ]
