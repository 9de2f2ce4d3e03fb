"""`rlscale doctor`: its procedure's decisions against simulated machines, the reading of a step's output, its
refusals of bad input, and the whole command on CPU ranks (gloo) with real torchrun processes.

The whole command with a probe that hangs at world size 3 unless NCCL_P2P_DISABLE is set (about 45 s on 2 idle cores,
more beside another test worker) and Ctrl-C during a hung probe are marked ``extras`` (``make test-extras``);
``make test`` runs a clean machine end to end and the probe fault under nccl_probe's watchdog."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import psutil
import pytest
from rlscale_command import rlscale

from rlscale.launch.doctor import execute
from rlscale.launch.doctor.execute import GLOO_TRANSPORT, classify, topology, transports
from rlscale.launch.doctor.main import run_doctor
from rlscale.launch.doctor.report import Report, Resolution
from rlscale.launch.doctor.steps import WORKAROUNDS, DoctorConfig, Outcome, Step, StepKind, StepResult

MARKER = "RLSCALE_DOCTOR_TEST"
"""Set to the test's tmp path in the doctor's environment, which every process it starts inherits."""


def marked(marker: str, name: str = "") -> list[psutil.Process]:
    """Live processes whose environment carries ``marker`` (and whose command line mentions ``name``)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            if process.info["status"] == psutil.STATUS_ZOMBIE or name not in " ".join(process.info["cmdline"] or []):
                continue
            if process.environ().get(MARKER) == marker:
                found.append(process)
    return found


def no_process_left(marker: str, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not marked(marker)


# A simulated machine: the outcome of a step, given its kind, world size and the variables set for it.
Machine = Callable[[Step, dict[str, str]], Outcome]


def config(device: str = "cpu", sizes: tuple[int, ...] = (2, 3)) -> DoctorConfig:
    return DoctorConfig("Isaac-Cartpole", "rsl_rl", device, sizes, log_dir="unused")


def hangs_at(sizes: dict[int, Mapping[str, str]]) -> Machine:
    """Probes at each world size of ``sizes`` hang unless every variable it maps to is set as given."""

    def outcome(step: Step, env: dict[str, str]) -> Outcome:
        needed = sizes.get(step.world_size)
        if needed is None or all(env.get(name) == value for name, value in needed.items()):
            return Outcome.PASSED
        return Outcome.HUNG

    return outcome


def drive(
    machine: Machine, cfg: DoctorConfig | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Report, list[StepResult]]:
    """Run the doctor's driver with ``machine`` in place of real processes."""
    environ = dict(environ or {})

    def run_step(step: Step, env: Mapping[str, str], log: Path, backend: str) -> StepResult:
        if step.skip is not None:
            return StepResult(step, Outcome.SKIPPED, detail=step.skip)
        return StepResult(step, machine(step, {**env, **dict(step.env)}), detail="simulated")

    report = run_doctor(cfg or config(), environ, run_step)
    return report, list(report.results)


def summary(results: list[StepResult]) -> list[tuple[str, int | None, str, str]]:
    return [(r.step.kind, r.step.world_size, " ".join(f"{n}={v}" for n, v in r.step.env), r.outcome) for r in results]


class TestProcedure:
    def test_a_clean_machine_passes_with_no_export_line(self, capsys):
        report, results = drive(hangs_at({}))
        assert summary(results) == [
            ("single_rank", None, "", "passed"),
            ("dry_run", None, "", "passed"),
            ("probe", 2, "", "passed"),
            ("probe", 3, "", "passed"),
            ("topology", None, "", "skipped"),
        ]
        assert report.passed and report.export_line is None and not report.findings
        assert "verdict: everything passed" in report.lines()
        progress = capsys.readouterr().err.splitlines()
        assert progress[
            0
        ] == "[doctor] Isaac-Cartpole with rsl_rl on CPU ranks (gloo), world sizes 2, 3; each step's " + (
            "output goes to unused"
        )
        assert progress[1].startswith(
            "[doctor 1/6] single-rank run (2 iterations): rlscale train --task Isaac-Cartpole"
        )
        assert "[doctor 3/6] probe at world size 3: passed in 0.0 s (simulated)" in progress

    def test_the_first_workaround_that_fixes_it_is_kept_once_the_failure_returns_without_it(self):
        """World size 3 hangs unless NCCL_SHM_DISABLE=1: the debug rerun, P2P (still hangs), SHM (passes), then
        the confirmation without SHM (hangs again), and nothing after."""
        report, results = drive(hangs_at({3: {"NCCL_SHM_DISABLE": "1"}}))
        assert summary(results)[4:] == [
            ("topology", None, "", "skipped"),
            ("nccl_debug", 3, "NCCL_DEBUG=INFO", "hung"),
            ("workaround", 3, "NCCL_P2P_DISABLE=1", "hung"),
            ("workaround", 3, "NCCL_SHM_DISABLE=1", "passed"),
            ("confirm", 3, "", "hung"),
        ]
        assert "--log_all_ranks" in results[5].step.argv
        assert [(f.world_size, f.resolution, f.fix) for f in report.findings] == [
            (3, Resolution.FIXED, (("NCCL_SHM_DISABLE", "1"),))
        ]
        assert report.export_line == "export NCCL_SHM_DISABLE=1"
        assert not report.passed
        assert report.lines()[-2] == "export NCCL_SHM_DISABLE=1"

    def test_a_failure_that_does_not_come_back_keeps_nothing(self):
        """The probe at 3 hangs once; with NCCL_P2P_DISABLE=1 it passes, and again without it: intermittent."""
        seen = []

        def once(step: Step, env: dict[str, str]) -> Outcome:
            seen.append(step.kind)
            return Outcome.HUNG if step.world_size == 3 and len(seen) == 4 else Outcome.PASSED

        report, results = drive(once)
        assert summary(results)[-3:] == [
            ("nccl_debug", 3, "NCCL_DEBUG=INFO", "passed"),
            ("workaround", 3, "NCCL_P2P_DISABLE=1", "passed"),
            ("confirm", 3, "", "passed"),
        ]
        assert report.findings[0].resolution is Resolution.INTERMITTENT
        assert report.export_line is None and not report.passed

    def test_no_single_workaround_fixes_it(self):
        """Every workaround is tried, one at a time, and none is kept."""
        report, results = drive(hangs_at({2: {"NCCL_NET": "none"}}))
        tried = [r.step.env for r in results if r.step.kind is StepKind.WORKAROUND]
        assert tried == [w.variables for w in WORKAROUNDS]
        assert len(tried) == 7 and tried[2:4] == [(("NCCL_CUMEM_HOST_ENABLE", "0"),), (("NCCL_CUMEM_ENABLE", "0"),)]
        assert report.findings[0].resolution is Resolution.NOT_FIXED and report.export_line is None
        assert results[-1].step.kind is StepKind.WORKAROUND  # no confirmation without a fix

    def test_a_kept_variable_is_tried_at_the_larger_failing_sizes_and_searched_on_from_there(self):
        """3 and 4 hang without NCCL_P2P_DISABLE=1, 5 needs NCCL_ALGO=Ring as well: P2P is found at 3 and passes 4;
        5 is searched with P2P kept, and the export line sets both."""
        p2p, ring = {"NCCL_P2P_DISABLE": "1"}, {"NCCL_ALGO": "Ring"}
        report, results = drive(hangs_at({3: p2p, 4: p2p, 5: p2p | ring}), config(sizes=(2, 3, 4, 5)))
        assert summary(results)[8:] == [
            ("workaround", 3, "NCCL_P2P_DISABLE=1", "passed"),
            ("confirm", 3, "", "hung"),
            ("verify", 4, "NCCL_P2P_DISABLE=1", "passed"),
            ("verify", 5, "NCCL_P2P_DISABLE=1", "hung"),
            ("nccl_debug", 5, "NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO", "hung"),
            ("workaround", 5, "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1", "hung"),
            ("workaround", 5, "NCCL_P2P_DISABLE=1 NCCL_CUMEM_HOST_ENABLE=0", "hung"),
            ("workaround", 5, "NCCL_P2P_DISABLE=1 NCCL_CUMEM_ENABLE=0", "hung"),
            ("workaround", 5, "NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1", "hung"),
            ("workaround", 5, "NCCL_P2P_DISABLE=1 NCCL_ALGO=Ring", "passed"),
            ("confirm", 5, "NCCL_P2P_DISABLE=1", "hung"),
        ]
        assert [(f.world_size, f.resolution) for f in report.findings] == [
            (3, Resolution.FIXED),
            (4, Resolution.FIXED_BY_KEPT),
            (5, Resolution.FIXED),
        ]
        assert report.export_line == "export NCCL_P2P_DISABLE=1 NCCL_ALGO=Ring"
        assert report.verdict() == "failed at world size 3, world size 4, world size 5; fixed by " + (
            "NCCL_P2P_DISABLE=1 NCCL_ALGO=Ring"
        )

    def test_p2p_level_is_used_where_it_is_set_and_a_variable_already_in_effect_is_not_tried(self):
        """With NCCL_P2P_LEVEL set, NCCL_P2P_LEVEL=LOC stands in for NCCL_P2P_DISABLE=1 (never both); a workaround
        the environment already sets cannot be the fix."""
        environ = {"NCCL_P2P_LEVEL": "NVL", "NCCL_SHM_DISABLE": "1"}
        report, results = drive(hangs_at({2: {"NCCL_IB_DISABLE": "1"}}), environ=environ)
        tried = [r.step.env for r in results if r.step.kind is StepKind.WORKAROUND]
        assert tried[:2] == [(("NCCL_P2P_LEVEL", "LOC"),), (("NCCL_CUMEM_HOST_ENABLE", "0"),)]
        assert "NCCL_SHM_DISABLE=1 is already set here: not tried." in report.notes
        assert report.export_line == "export NCCL_IB_DISABLE=1"

    def test_an_interrupted_step_ends_the_procedure(self):
        def interrupted_at_3(step: Step, env: dict[str, str]) -> Outcome:
            return Outcome.INTERRUPTED if step.world_size == 3 else Outcome.PASSED

        report, results = drive(interrupted_at_3)
        assert [r.step.kind for r in results][-1] is StepKind.PROBE and report.interrupted
        assert not report.passed and report.verdict() == "interrupted before the end"

    def test_a_failing_single_rank_run_fails_the_report_and_the_probes_still_run(self):
        def training_breaks(step: Step, env: dict[str, str]) -> Outcome:
            return Outcome.FAILED if step.kind is StepKind.SINGLE_RANK else Outcome.PASSED

        report, results = drive(training_breaks)
        assert [r.step.kind for r in results].count(StepKind.PROBE) == 2
        assert not report.passed and report.verdict() == "failed at single-rank run (2 iterations)"
        assert any("single-rank run fails" in note for note in report.notes)

    def test_one_gpu_probes_nothing_and_reads_the_topology(self):
        report, results = drive(hangs_at({}), config(device="cuda", sizes=()))
        assert [r.step.kind for r in results] == ["single_rank", "dry_run", "topology"]
        assert results[1].step.argv[:3] == ("train_multigpu", "--num_gpus", "1")
        assert results[2].outcome is Outcome.PASSED and report.passed
        assert "One GPU visible: no world size of 2 or more to probe." in report.notes

    def test_the_report_is_json(self):
        report, _ = drive(hangs_at({3: {"NCCL_P2P_DISABLE": "1"}}))
        data = json.loads(json.dumps(report.to_json()))
        assert data["kept"] == {"NCCL_P2P_DISABLE": "1"} and data["export"] == "export NCCL_P2P_DISABLE=1"
        assert data["findings"][0]["resolution"] == "fixed" and data["steps"][2]["command"][:2] == [
            "rlscale",
            "nccl_probe",
        ]


NCCL_LOG = """\
$ NCCL_DEBUG=INFO rlscale nccl_probe --num_gpus 2
host:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
host:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read
host:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct
host:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] [send] via NET/IB/0/GDRDMA
[ERROR] ranks 0, 1 made no progress for 30.1 s (phase all_reduce); stopping distributed workers.
"""


class TestReadingAStep:
    def test_transports_come_from_nccl_debug_lines(self):
        assert transports(NCCL_LOG, "nccl") == ("NET/IB", "P2P/CUMEM", "SHM/direct")
        assert transports(NCCL_LOG, "gloo") == (GLOO_TRANSPORT,)

    def test_a_hang_named_by_the_watchdog(self):
        step = Step(StepKind.NCCL_DEBUG, "debug", ("nccl_probe",), world_size=2, timeout_s=60)
        result = classify(step, 1, NCCL_LOG, False, 31.0, "log", "nccl")
        assert result.outcome is Outcome.HUNG
        assert result.detail == "ranks 0, 1 made no progress for 30.1 s (phase all_reduce)"
        assert result.transports == ("NET/IB", "P2P/CUMEM", "SHM/direct")

    def test_a_timeout_is_a_hang_and_an_error_line_is_the_failure(self):
        step = Step(StepKind.PROBE, "probe", ("nccl_probe",), world_size=2, timeout_s=60)
        assert classify(step, 143, "$ x\nstarting\n", True, 61.0, None, "nccl").detail == "no result within 60 s"
        failed = classify(
            step, 1, "$ x\nnoise\n[ERROR] rank 1 exited 1 (RuntimeError: NCCL error)\nmore\n", False, 1, None, "nccl"
        )
        assert (failed.outcome, failed.detail) == (Outcome.FAILED, "exit 1: rank 1 exited 1 (RuntimeError: NCCL error)")
        assert classify(step, 130, "$ x\n", False, 1, None, "nccl").outcome is Outcome.INTERRUPTED

    def test_the_dry_runs_command(self):
        step = Step(StepKind.DRY_RUN, "dry run", ("train_multigpu",))
        text = "$ x\nrank 0: cpus 0-3\n/usr/bin/python -m rlscale.launch.torchrun --nproc_per_node 2 worker.py\n"
        result = classify(step, 0, text, False, 0.3, None, "nccl")
        assert result.text == "/usr/bin/python -m rlscale.launch.torchrun --nproc_per_node 2 worker.py"


class TestTopology:
    def test_nvidia_smi_topo(self, tmp_path):
        smi = tmp_path / "nvidia-smi"
        smi.write_text('#!/bin/sh\n[ "$1 $2" = "topo -m" ] && printf "\tGPU0\tGPU1\nGPU0\t X \tNV18\n"\n')
        smi.chmod(0o755)
        result = topology(Step(StepKind.TOPOLOGY, "topology", timeout_s=10), str(smi))
        assert (result.outcome, result.detail) == (Outcome.PASSED, "nvidia-smi topo -m")
        assert result.text.splitlines()[1] == "GPU0\t X \tNV18"

    def test_nvml_where_nvidia_smi_is_missing_and_skipped_without_either(self, tmp_path, monkeypatch):
        step = Step(StepKind.TOPOLOGY, "topology", timeout_s=10)
        monkeypatch.setattr(execute, "p2p_lines", lambda: ["GPU0 - GPU1: P2P read OK, NVLink OK"])
        result = topology(step, str(tmp_path / "absent"))
        assert (result.outcome, result.text) == (Outcome.PASSED, "GPU0 - GPU1: P2P read OK, NVLink OK")

        def no_nvml():
            raise OSError("libnvidia-ml.so.1: cannot open shared object file")

        monkeypatch.setattr(execute, "p2p_lines", no_nvml)
        result = topology(step, str(tmp_path / "absent"))
        assert result.outcome is Outcome.SKIPPED and "libnvidia-ml.so.1" in result.detail


FAST = ("--task", "Isaac-Cartpole", "--device", "cpu", "--num_envs", "16", "--iterations", "1", "--hang_timeout", "3")


class TestBadInput:
    @pytest.mark.parametrize(
        ("args", "env", "message"),
        [
            (("--task", "Isaac-Cartpol"), {}, "--task: "),
            ((*FAST, "--max_world_size", "1"), {}, "--max_world_size must be at least 2, got 1"),
            ((*FAST, "--hang_timeout", "0"), {}, "--hang_timeout must be a number of seconds > 0, got 0.0"),
            (
                ("--task", "Isaac-Cartpole", "--device", "cuda"),
                {"CUDA_VISIBLE_DEVICES": ""},
                "--device cuda: no GPU visible (CUDA_VISIBLE_DEVICES='')",
            ),
            (FAST, {"RLSCALE_INJECT_FAULT": "probe_hang:world_size=1"}, "probe_hang:world_size=W"),
            (FAST, {"NCCL_P2P_DISABLE": "1", "NCCL_P2P_LEVEL": "NVL"}, "mutually exclusive"),
            ((*FAST, "--output", "/proc/doctor/report.json"), {}, "--output /proc/doctor/report.json: "),
            ((*FAST, "--output", "/tmp"), {}, "--output /tmp: a folder; name a file"),
        ],
        ids=["task", "world size", "timeout", "cuda without a GPU", "fault", "nccl pair", "output", "output folder"],
    )
    def test_one_line_exit_2_nothing_written(self, tmp_path, args, env, message):
        result = rlscale("doctor", *args, env=env, cwd=tmp_path, timeout=120)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert lines[0].startswith("rlscale doctor: error: ") and message in lines[0]
        assert not list(tmp_path.iterdir()) and result.stdout == ""


class TestOnCpuRanks:
    def test_a_clean_machine(self, tmp_path):
        """Every step passes on gloo ranks: exit 0, no export line, the report in JSON."""
        output = tmp_path / "report.json"
        result = rlscale("doctor", *FAST, "--log_dir", str(tmp_path / "logs"), "--output", str(output), cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "verdict: everything passed" in result.stdout and "export" not in result.stdout
        data = json.loads(output.read_text())
        assert [(s["kind"], s["world_size"], s["outcome"]) for s in data["steps"]] == [
            ("single_rank", None, "passed"),
            ("dry_run", None, "passed"),
            ("probe", 2, "passed"),
            ("probe", 3, "passed"),
            ("topology", None, "skipped"),
        ]
        assert data["passed"] and data["export"] is None and data["kept"] == {}
        assert "--nproc_per_node 3" in data["steps"][1]["text"]
        assert "[doctor 3/6] probe at world size 2: passed in" in result.stderr
        assert set(p.name for p in tmp_path.iterdir()) == {"logs", "report.json"}  # the training run's under logs

    def test_the_probe_fault_hangs_nccl_probe_until_its_watchdog_stops_it(self, tmp_path):
        """probe_hang at world size 2: the ranks beat all_reduce and block; --hang_timeout names them, and the
        launcher stops them all."""
        fault = {"RLSCALE_INJECT_FAULT": "probe_hang:world_size=2,unless=NCCL_P2P_DISABLE", MARKER: str(tmp_path)}
        result = rlscale("nccl_probe", "--num_gpus", "2", "--device", "cpu", "--hang_timeout", "3", env=fault)
        assert result.returncode != 0, result.stdout + result.stderr
        assert "ranks 0, 1 made no progress for" in result.stderr and "(phase all_reduce)" in result.stderr
        assert no_process_left(str(tmp_path))

    @pytest.mark.extras
    def test_a_probe_hanging_at_world_size_3_until_p2p_is_disabled(self, tmp_path):
        """The hang at 3 is found and rerun with NCCL_DEBUG=INFO; NCCL_P2P_DISABLE=1, the first workaround, makes
        it pass, the failure comes back without it, and the export line sets exactly that; no rank outlives it."""
        output = tmp_path / "report.json"
        fault = {"RLSCALE_INJECT_FAULT": "probe_hang:world_size=3,unless=NCCL_P2P_DISABLE", MARKER: str(tmp_path)}
        args = (*FAST, "--log_dir", str(tmp_path / "logs"), "--output", str(output))
        result = rlscale("doctor", *args, env=fault, cwd=tmp_path)
        assert result.returncode == 1, result.stdout + result.stderr
        data = json.loads(output.read_text())
        steps = [(s["kind"], s["world_size"], s["env"], s["outcome"]) for s in data["steps"]]
        assert steps == [
            ("single_rank", None, {}, "passed"),
            ("dry_run", None, {}, "passed"),
            ("probe", 2, {}, "passed"),
            ("probe", 3, {}, "hung"),
            ("topology", None, {}, "skipped"),
            ("nccl_debug", 3, {"NCCL_DEBUG": "INFO"}, "hung"),
            ("workaround", 3, {"NCCL_P2P_DISABLE": "1"}, "passed"),
            ("confirm", 3, {}, "hung"),
        ]
        assert "made no progress" in data["steps"][3]["detail"]
        assert data["steps"][5]["transports"] == [GLOO_TRANSPORT]
        assert data["findings"] == [
            {
                "world_size": 3,
                "outcome": "hung",
                "detail": data["steps"][3]["detail"],
                "resolution": "fixed",
                "fix": {"NCCL_P2P_DISABLE": "1"},
                "transports": [GLOO_TRANSPORT],
            }
        ]
        assert data["export"] == "export NCCL_P2P_DISABLE=1"
        assert result.stdout.splitlines()[-2] == "export NCCL_P2P_DISABLE=1"
        assert no_process_left(str(tmp_path))

    @pytest.mark.extras
    def test_ctrl_c_during_a_hung_probe_stops_it_and_reports_what_ran(self, tmp_path):
        """SIGINT while the probe at 2 hangs: its ranks are stopped, the report so far is printed, exit 130."""
        env = {**os.environ, "OMP_NUM_THREADS": "1", "RLSCALE_INJECT_FAULT": "probe_hang:world_size=2"}
        env[MARKER] = str(tmp_path)
        args = (*FAST, "--hang_timeout", "120", "--log_dir", str(tmp_path / "logs"))
        command = [sys.executable, "-m", "rlscale", "doctor", *args]
        doctor = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while len(marked(str(tmp_path), "probe.py")) < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            doctor.send_signal(signal.SIGINT)
            stdout, _ = doctor.communicate(timeout=90)
        finally:
            doctor.kill()
        assert doctor.returncode == 130, stdout
        assert "interrupted 3 probe at world size 2" in stdout and "verdict: interrupted before the end" in stdout
        assert no_process_left(str(tmp_path))
