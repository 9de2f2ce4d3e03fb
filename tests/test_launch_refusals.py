"""Launches refused before torchrun starts, each in one line with exit code 2 and nothing written: GPU ranks that
would run on the CPU, and a rendezvous port that is already taken.

The cases keep the contract of ``test_bad_inputs.py`` (whose runner they use); torch's CUDA is stood in for by
patching ``torch.cuda``, so that they mean the same on a GPU host as on this CPU one.
"""

from __future__ import annotations

import pytest
import torch
from test_bad_inputs import Case, run_case, tree

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
        monkeypatch.setattr("rlscale.run.spec._resolve_device", lambda parser, requested: "cuda:0")
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
