"""Tests of the study's job logic: config resolution, the validation criterion, the GPU-grant check, the supervised
job command, multi-node args."""

from __future__ import annotations

import json
import math
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from run_manifests import run_manifest

from rlscale.launch.lease import LeaseError, acquire
from rlscale.launch.ranks import NodeSplit
from rlscale.manifest import RunManifest
from rlscale.study import job_runner
from rlscale.study.checks import check_config, check_gpu_limit, node_split
from rlscale.study.config import StudyConfigError, effective_config, envs_for, validated_config
from rlscale.study.job import Job, Library, RunArgs
from rlscale.study.job_runner import GRANT_EXIT_CODE, multinode_args, run_leased, run_multinode
from rlscale.study.paths import JobKind
from rlscale.study.stage_policy import Stage
from rlscale.study.verdict import PARITY_METRICS_ENV, parity_metric, validation_verdict

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}
BASE = {
    "study": "s",
    "device": "auto",
    "tasks": ["Isaac-Cartpole-Direct"],
    "libraries": [{"name": "rsl_rl", "ml_framework": "torch"}],
    "world_sizes": [1, 2, 4, 8],
    "num_envs_per_rank": [4096],
    "seeds": [1, 2, 3],
    "iterations": {"validate": 20, "train": 150, "benchmark": 50},
    "checkpoint_interval": 10,
    "warmup_iterations": 5,
    "peer_baseline": False,
    "agent_overrides": {},
    "gpus_per_node": 8,
    "cpu_fallback": {"world_sizes": [1, 2], "iterations": {"benchmark": 8}, "warmup_iterations": 1},
}


def no_nvml() -> int:
    """Stand-in for NVML on a machine without a driver."""
    raise RuntimeError("NVML Shared Library Not Found")


def no_hardware() -> None:
    """Stand-in for the NVIDIA hardware probe on a host without any NVIDIA device."""
    return None


def gpu_hardware() -> str:
    """Stand-in for the NVIDIA hardware probe on a host with GPUs."""
    return "/dev/nvidia0 exists"


class TestEffectiveConfig:
    def test_auto_without_gpu_runs_the_cpu_fallback(self):
        """device auto with no GPU becomes cpu and takes the fallback sizes; nested keys merge one by one."""
        resolved = effective_config(BASE, NO_GPU)
        assert resolved["device"] == "cpu"
        assert resolved["world_sizes"] == [1, 2]
        assert resolved["iterations"] == {"validate": 20, "train": 150, "benchmark": 8}
        assert resolved["warmup_iterations"] == 1
        assert resolved["num_envs_per_rank"] == [4096]  # Not in the fallback: kept.

    def test_auto_with_gpus_keeps_the_study(self):
        """device auto with enough visible GPUs becomes cuda and keeps every size."""
        resolved = effective_config(BASE, {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"})
        assert resolved["device"] == "cuda"
        assert resolved["world_sizes"] == [1, 2, 4, 8]

    def test_auto_drops_the_sizes_the_host_cannot_run(self):
        """On 2 GPUs, world sizes 4 and 8 are dropped, and the device reason says so."""
        resolved = effective_config(BASE, {"CUDA_VISIBLE_DEVICES": "0,1"})
        assert (resolved["device"], resolved["world_sizes"]) == ("cuda", [1, 2])
        assert resolved["device_reason"].endswith(
            "; world_sizes [4, 8] dropped: they need more GPUs than the 2 visible"
        )

    def test_auto_asks_nvml_when_nothing_is_set(self):
        """Without CUDA_VISIBLE_DEVICES, NVML decides; a failing NVML means no GPU."""
        assert effective_config(BASE, {}, nvml_count=lambda: 4, hardware_probe=gpu_hardware)["device"] == "cuda"
        assert effective_config(BASE, {}, nvml_count=no_nvml, hardware_probe=no_hardware)["device"] == "cpu"

    def test_auto_refuses_cpu_on_a_host_with_nvidia_gpus(self):
        """NVML failing on a host with /dev/nvidia0 is a broken driver setup, not a CPU host: one line naming the NVML
        failure, the evidence and both fixes, instead of a quiet CPU study."""
        with pytest.raises(ValueError) as error:
            effective_config(BASE, {}, nvml_count=no_nvml, hardware_probe=gpu_hardware)
        message = str(error.value)
        assert message.startswith("device: auto found no usable GPU (NVML unavailable: NVML Shared Library Not Found)")
        assert "although /dev/nvidia0 exists" in message and "set device: cpu" in message
        assert len(message.splitlines()) == 1

    def test_hidden_gpus_and_explicit_cpu_run_on_cpu_anywhere(self):
        """An empty CUDA_VISIBLE_DEVICES hides the GPUs on purpose, and device: cpu is a choice: both run on CPU on a
        host with GPUs, saying why."""
        hidden = effective_config(BASE, NO_GPU, nvml_count=no_nvml, hardware_probe=gpu_hardware)
        assert hidden["device"] == "cpu" and "CUDA_VISIBLE_DEVICES='' hides every GPU" in hidden["device_reason"]
        chosen = effective_config({**BASE, "device": "cpu"}, {}, nvml_count=no_nvml, hardware_probe=gpu_hardware)
        assert (chosen["device"], chosen["device_reason"]) == ("cpu", "device: cpu, as config/config.yaml sets")

    def test_device_reason_names_the_source(self):
        """The resolved device comes with why: the GPUs counted and where, or the NVML failure on a GPU-less host."""
        cuda = effective_config({**BASE, "world_sizes": [1, 2]}, {"CUDA_VISIBLE_DEVICES": "0,1"})
        assert cuda["device_reason"] == "device: auto chose cuda: 2 GPU(s) visible (CUDA_VISIBLE_DEVICES='0,1')"
        cpu = effective_config(BASE, {}, nvml_count=no_nvml, hardware_probe=no_hardware)["device_reason"]
        assert cpu.startswith("device: auto chose cpu with the cpu_fallback sizes: no GPU visible (NVML unavailable")
        assert cpu.endswith("no NVIDIA device on this host")

    def test_explicit_cpu_keeps_its_sizes(self):
        """device cpu is a choice, not a fallback: the study keeps the sizes it was given."""
        resolved = effective_config({**BASE, "device": "cpu"}, NO_GPU)
        assert resolved["world_sizes"] == [1, 2, 4, 8]

    def test_input_is_not_modified(self):
        """Snakemake's config dict stays as loaded (the report shows it)."""
        config = {**BASE, "iterations": dict(BASE["iterations"])}
        effective_config(config, NO_GPU)
        assert config["iterations"]["benchmark"] == 50

    def test_per_task_sizes_replace_the_global_list(self):
        """A task in num_envs_per_task uses its own list; the others use num_envs_per_rank."""
        config = {**BASE, "tasks": ["A", "B"], "num_envs_per_rank": [8, 64], "num_envs_per_task": {"B": [16]}}
        resolved = effective_config(config, {"CUDA_VISIBLE_DEVICES": "0"})
        assert (envs_for(resolved, "A"), envs_for(resolved, "B")) == ([8, 64], [16])
        assert envs_for(BASE, "A") == [4096]  # No num_envs_per_task at all: the global list.

    def test_null_per_task_sizes_are_empty(self):
        """num_envs_per_task: null (an overlay clearing the mapping) resolves to {}."""
        resolved = effective_config({**BASE, "num_envs_per_task": None}, {"CUDA_VISIBLE_DEVICES": "0"})
        assert resolved["num_envs_per_task"] == {}

    def test_fallback_replaces_tasks_and_resets_per_task_sizes(self):
        """The fallback's tasks replace the study's, and per-task sizes are the fallback's own ({} without any)."""
        config = {
            **BASE,
            "tasks": ["A", "B"],
            "num_envs_per_task": {"B": [16384], "A": [2048]},
            "cpu_fallback": {**BASE["cpu_fallback"], "tasks": ["A"], "num_envs_per_rank": [64]},
        }
        resolved = effective_config(config, NO_GPU)
        assert (resolved["tasks"], resolved["num_envs_per_task"], envs_for(resolved, "A")) == (["A"], {}, [64])
        check_config(resolved)  # B's entry is gone with B.
        # No num_envs_per_rank in the fallback either: still reset, so the study's global list applies.
        del config["cpu_fallback"]["num_envs_per_rank"]
        assert envs_for(effective_config(config, NO_GPU), "A") == [4096]

    def test_fallback_per_task_sizes_replace_not_merge(self):
        """A fallback num_envs_per_task replaces the study's mapping whole (iterations alone merge key by key)."""
        config = {
            **BASE,
            "tasks": ["A", "B"],
            "num_envs_per_task": {"A": [2048], "B": [16384]},
            "cpu_fallback": {**BASE["cpu_fallback"], "num_envs_per_task": {"B": [32]}},
        }
        resolved = effective_config(config, NO_GPU)
        assert resolved["num_envs_per_task"] == {"B": [32]}
        assert (envs_for(resolved, "A"), envs_for(resolved, "B")) == ([4096], [32])


class TestDefaultConfig:
    """config/config.yaml as shipped: the Go1 on a GPU host, Cartpole alone at the CPU sizes without one."""

    @staticmethod
    def resolve(environ: dict[str, str], overlay: dict | None = None) -> dict:
        config = {**yaml.safe_load((ROOT / "config" / "config.yaml").read_text()), **(overlay or {})}
        return validated_config(config, SCHEMA, environ, nvml_count=no_nvml, hardware_probe=no_hardware)

    def test_gpu_host_studies_the_go1_with_every_library(self):
        study = self.resolve({"CUDA_VISIBLE_DEVICES": "0,1"})
        assert study["device"] == "cuda"
        assert study["tasks"] == ["Rlscale-Go1-Flat"] and envs_for(study, "Rlscale-Go1-Flat") == [16384]
        assert [library["name"] for library in study["libraries"]] == ["rsl_rl", "rl_games", "skrl"]
        assert study["parity"]["target"]["Rlscale-Go1-Flat"]["at_most"] == 0.25

    def test_full_matrix_studies_every_task(self):
        overlay = yaml.safe_load((ROOT / "config" / "studies" / "full_matrix.yaml").read_text())
        study = self.resolve({"CUDA_VISIBLE_DEVICES": "0,1"}, overlay)
        assert study["tasks"] == ["Isaac-Cartpole-Direct", "Rlscale-Ant", "Rlscale-Go1-Flat"]
        assert envs_for(study, "Isaac-Cartpole-Direct") == [4096, 65536]
        assert envs_for(study, "Rlscale-Ant") == envs_for(study, "Rlscale-Go1-Flat") == [4096, 16384]

    def test_cpu_host_studies_cartpole_only(self):
        study = self.resolve(NO_GPU)
        assert study["device"] == "cpu" and study["tasks"] == ["Isaac-Cartpole-Direct"]
        assert study["num_envs_per_task"] == {} and envs_for(study, "Isaac-Cartpole-Direct") == [64]

    @pytest.mark.parametrize(
        ("overlay", "key"),
        [
            ({"tasks": ["Isaac-Cartpole-Direct", "No-Such-Task"], "num_envs_per_task": None}, "tasks"),
            ({"cpu_fallback": {"tasks": ["No-Such-Task"]}}, "cpu_fallback.tasks"),
        ],
        ids=["tasks", "fallback-tasks"],
    )
    def test_unknown_task_id_is_refused_at_parse_time(self, overlay, key):
        """A task id the registry does not know is refused when the config is read, naming the key and the id, on a
        GPU host too (the fallback's tasks are checked before it applies)."""
        with pytest.raises(StudyConfigError) as error:
            self.resolve({"CUDA_VISIBLE_DEVICES": "0,1"}, overlay)
        message = str(error.value)
        assert message.startswith(f"config: {key} (from config/config.yaml): unknown task 'No-Such-Task';")
        assert "Isaac-Cartpole-Direct" in message and len(message.splitlines()) == 1

    def test_alias_is_refused_with_the_registered_id(self):
        """An Isaac Lab alias would file results under a name the bundles do not carry: the registered id is asked."""
        pattern = r"^config: tasks \(from config/config.yaml\): Isaac-Cartpole-v0 is an alias of Isaac-Cartpole;"
        with pytest.raises(StudyConfigError, match=pattern):
            self.resolve(NO_GPU, {"tasks": ["Isaac-Cartpole-v0"], "num_envs_per_task": None})


class TestGpuLimit:
    STUDY = {"device": "cuda", "world_sizes": [1, 2, 4, 8], "gpus_per_node": 4}

    def test_limit_below_a_single_host_world_size_is_refused(self):
        """--resources gpu=2 with world size 4 on 4-GPU nodes: Snakemake would shrink the grant, so refuse it first."""
        with pytest.raises(StudyConfigError) as error:
            check_gpu_limit(self.STUDY, 2)
        assert str(error.value).startswith("resources: gpu=2 is below the 4 GPU(s) that world size 4 needs")
        assert "--resources gpu=4" in str(error.value)

    def test_multi_node_sizes_need_only_a_node(self):
        """World size 8 spans two 4-GPU nodes through gres, outside the limit: gpu=4 is enough."""
        check_gpu_limit(self.STUDY, 4)

    def test_cpu_studies_and_no_limit_pass(self):
        """CPU ranks take no GPU, and without --resources gpu there is no limit to check."""
        check_gpu_limit({**self.STUDY, "device": "cpu"}, 0)
        check_gpu_limit(self.STUDY, None)


class TestNodes:
    def test_node_split(self):
        """Up to gpus_per_node a world size is one node; above, world_size / gpus_per_node; CPU ranks are local."""
        assert [node_split(size, 4, "cuda").nodes for size in (1, 2, 4, 8, 16)] == [1, 1, 1, 2, 4]
        assert node_split(8, 4, "cpu") == NodeSplit(8, 1)
        assert node_split(16, 4, "cuda").ranks_per_node == 4

    def test_uneven_multi_node_size(self):
        """A multi-node world size that does not fill whole nodes is refused with the fix."""
        with pytest.raises(ValueError, match="not a multiple of gpus_per_node=4"):
            node_split(6, 4, "cuda")


class TestCheckConfig:
    def test_warmup_must_leave_iterations(self):
        """A warm-up as long as the benchmark would measure nothing."""
        with pytest.raises(ValueError, match="leaves none of iterations.benchmark=50"):
            check_config({**BASE, "device": "cuda", "warmup_iterations": 50})

    def test_jax_is_refused(self):
        """skrl on JAX has no multi-GPU benchmark; the config says so at parse time."""
        config = {**BASE, "device": "cuda", "libraries": [{"name": "skrl", "ml_framework": "jax"}]}
        with pytest.raises(ValueError, match="ml_framework jax"):
            check_config(config)

    def test_valid_config_passes(self):
        """The base config passes (the checks above are not blanket refusals)."""
        check_config({**BASE, "device": "cuda"})

    def test_peer_baseline_cannot_mirror_agent_overrides(self):
        """The peer trains the shipped agent config: overrides with the peer are refused at parse time, not by every
        benchmark job later."""
        config = {**BASE, "device": "cuda", "peer_baseline": True, "agent_overrides": {"rsl_rl": ["--tf32"]}}
        with pytest.raises(ValueError, match=r"^peer_baseline \(from config/config.yaml\) with agent_overrides"):
            check_config(config)
        check_config({**config, "agent_overrides": {"rsl_rl": []}})

    @pytest.mark.parametrize(
        ("overrides", "accepted"),
        [
            ({"rsl_rl": ["agent.algorithm.learning_rate=0.001", "--tf32", "--cpu_threads=2"]}, True),
            ({"rsl_rl": ["--cpu_threads", "2"]}, False),  # one argument per entry: a bare value is refused
            ({"rsl_rl": ["env.num_envs=8"]}, False),
            ({"sb3": []}, False),
        ],
    )
    def test_agent_overrides_schema(self, overrides, accepted):
        """agent_overrides takes agent.KEY=VALUE and --flag[=VALUE] entries of the study's library names only."""
        config = {**yaml.safe_load((ROOT / "config" / "config.yaml").read_text()), "agent_overrides": overrides}
        resolve = lambda: validated_config(config, SCHEMA, NO_GPU, nvml_count=no_nvml, hardware_probe=no_hardware)  # noqa: E731
        if accepted:
            assert resolve()["agent_overrides"] == overrides
        else:
            with pytest.raises(StudyConfigError, match="agent_overrides"):
                resolve()

    def test_per_task_sizes_of_an_unknown_task(self):
        """A num_envs_per_task key that is not in tasks is refused in one line naming the key and the fix."""
        config = {**BASE, "device": "cuda", "tasks": ["A"], "num_envs_per_task": {"A": [8], "Antt": [16]}}
        pattern = r"^num_envs_per_task\.Antt \(from config/config.yaml\): Antt is not in tasks \(A\); add it"
        with pytest.raises(ValueError, match=pattern) as error:
            check_config(config)
        assert len(str(error.value).splitlines()) == 1


def manifest(returns: list[float | None], status: str = "completed", metrics: dict | None = None) -> RunManifest:
    """A rank-0 manifest of an ``rlscale train`` run with the given per-iteration mean returns and task metrics."""
    return run_manifest(
        {
            "status": status,
            "iterations_completed": len(returns),
            "iterations": [{"mean_return": value, "metrics": metrics or {}} for value in returns],
        }
    )


class TestValidationVerdict:
    def test_completed_run_with_finite_returns_passes(self):
        """A completed run of the requested length whose episodes end passes; NaN iterations are allowed."""
        verdict = validation_verdict(manifest([math.nan, -1.0, 2.0]), 3, 0)
        assert verdict["ok"] and verdict["reasons"] == []
        assert (verdict["first_finite_return"], verdict["last_finite_return"]) == (-1.0, 2.0)

    @pytest.mark.parametrize(
        ("data", "code", "reason"),
        [
            (manifest([1.0, 2.0, 3.0]), 1, "exited 1"),
            (None, 0, "left no manifest"),
            (manifest([1.0, 2.0, 3.0], status="crashed"), 0, "status is 'crashed'"),
            (manifest([1.0, 2.0]), 0, "2 iterations completed, 3 requested"),
            (manifest([1.0, math.inf, 3.0]), 0, "infinite"),
            (manifest([None, None, None]), 0, "no iteration has a finite mean return"),
        ],
    )
    def test_failures_name_their_reason(self, data, code, reason):
        """Each way a run can fail the criterion fails it, with a reason that names it."""
        verdict = validation_verdict(data, 3, code)
        assert not verdict["ok"]
        assert any(reason in text for text in verdict["reasons"])

    def test_a_parity_metric_the_task_does_not_log(self):
        """A parity target on a Metrics/ key the task never logs fails its validation, naming the keys it logs,
        before any parity run spends its budget; one it logs, and the metrics every task has, pass."""
        run = manifest([1.0, 2.0, 3.0], metrics={"Metrics/forward_speed": 0.1})
        assert validation_verdict(run, 3, 0, "Metrics/forward_speed")["ok"]
        assert validation_verdict(run, 3, 0, "mean_episode_length")["ok"]
        verdict = validation_verdict(run, 3, 0, "Metrics/base_velocity/error_vel_xy")
        assert verdict["reasons"] == [
            "the parity target's metric 'Metrics/base_velocity/error_vel_xy' is not among the task's log values "
            "(Metrics/forward_speed); set parity.target.<task>.metric to one of them, mean_episode_length or "
            "mean_return"
        ]
        environ = {PARITY_METRICS_ENV: '{"Rlscale-Ant": "Metrics/forward_speed"}'}
        assert (parity_metric("Rlscale-Ant", environ), parity_metric("Isaac-Cartpole", environ)) == (
            "Metrics/forward_speed",
            None,
        )


TRAIN_JOB = Job(
    id="train/Isaac-Cartpole-Direct/rsl_rl/ws4",
    kind=JobKind.TRAIN,
    device="cuda",
    output="m.json",
    world_size=4,
    run=RunArgs(task="Isaac-Cartpole-Direct", library=Library("rsl_rl", "torch"), num_envs=64, log_root="run"),
)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "{not json"], "not a study job record"),
        (["run", '{"id": "x"}', "--granted_gpus", "1"], "not a study job record"),
        (["run", TRAIN_JOB.to_json()], "--granted_gpus is required"),
        (["plan", TRAIN_JOB.to_json()], "--output"),
        (["submit", TRAIN_JOB.to_json()], "invalid choice"),
    ],
)
def test_bad_job_options_are_one_line(argv, message):
    """The study's job entry point refuses a bad record or option in one line, exit 2, like every rlscale command."""
    result = subprocess.run([sys.executable, "-m", "rlscale.study", *argv], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


class TestGrantCheck:
    def test_fewer_gpus_granted_than_needed(self, tmp_path, capsys):
        """A job granted 1 GPU for world size 2 exits GRANT_EXIT_CODE with the message and never starts its command."""
        marker = tmp_path / "started"
        command = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
        environ = {**os.environ, "RLSCALE_LEASE_DIR": str(tmp_path / "lease"), "RLSCALE_LEASE_GPUS": "0,1"}
        code = run_leased(command, stage=Stage.TRAIN, gpus=2, granted=1, world_size=2, environ=environ)
        assert code == GRANT_EXIT_CODE
        assert not marker.exists()
        err = capsys.readouterr().err
        assert "train needs 2 GPU(s) for world size 2 but Snakemake granted resources.gpu=1" in err
        assert "Refusing to run on fewer GPUs" in err

    @pytest.mark.parametrize(
        ("stage", "slurm_job", "runs"),
        [
            (Stage.TRAIN, None, True),
            (Stage.EVALUATE, None, True),
            (Stage.PARITY, None, False),
            (Stage.TRAIN, "42", False),
        ],
    )
    def test_a_grant_of_none(self, tmp_path, stage, slurm_job, runs):
        """A job that shares its GPU asks Snakemake for none on one host and runs on a leased one; a job that holds its
        GPU alone, or any job inside a SLURM allocation, granted none is refused."""
        marker = tmp_path / "started"
        command = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
        environ = {**os.environ, "RLSCALE_LEASE_DIR": str(tmp_path / "lease"), "RLSCALE_LEASE_GPUS": "0"}
        environ.pop("SLURM_JOB_ID", None)
        if slurm_job:
            environ["SLURM_JOB_ID"] = slurm_job
        code = run_leased(command, stage=stage, gpus=1, granted=0, world_size=1, environ=environ)
        assert (code, marker.exists()) == ((0, True) if runs else (GRANT_EXIT_CODE, False))

    def test_matching_grant_runs_on_the_leased_ids(self, tmp_path):
        """With the right grant the command runs with CUDA_VISIBLE_DEVICES set to leased ids, and no port added:
        torchrun takes a free one, so that no fixed port can collide with another study's."""
        out = tmp_path / "seen"
        seen = "json.dumps([os.environ['CUDA_VISIBLE_DEVICES'], sys.argv[1:]])"
        code = f"import json, os, sys; open({str(out)!r}, 'w').write({seen})"
        command = [sys.executable, "-c", code, "--num_gpus", "2"]
        environ = {**os.environ, "RLSCALE_LEASE_DIR": str(tmp_path / "lease"), "RLSCALE_LEASE_GPUS": "3,5"}
        assert run_leased(command, stage=Stage.TRAIN, gpus=2, granted=2, world_size=2, environ=environ) == 0
        assert json.loads(out.read_text()) == ["3,5", ["--num_gpus", "2"]]

    def test_a_job_refuses(self, tmp_path):
        """A train job, run as its rule runs it with a shrunk grant, exits 3 with the message, touching nothing."""
        previous = tmp_path / "run" / "previous.txt"
        previous.parent.mkdir()
        previous.write_text("checkpoint of the last run")
        env = {**os.environ, "RLSCALE_LEASE_DIR": str(tmp_path / "lease"), "RLSCALE_LEASE_GPUS": "0,1,2,3"}
        result = subprocess.run(
            [sys.executable, "-m", "rlscale.study", "run", TRAIN_JOB.to_json(), "--granted_gpus", "2"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert result.returncode == GRANT_EXIT_CODE
        assert "needs 4 GPU(s) for world size 4 but Snakemake granted resources.gpu=2" in result.stderr
        assert previous.exists()


STUDY_JOB = """
import sys
from rlscale.study.job_runner import run_leased
from rlscale.study.stage_policy import Stage
sys.exit(run_leased(sys.argv[1:], stage=Stage.TRAIN, gpus=1, granted=1, world_size=1))
"""
"""A one-GPU study job's lease: its command is the rest of argv."""

COMMAND = """
import os, signal, sys, time
ready, stop_s = sys.argv[1], float(sys.argv[2])
if stop_s:
    def stop(signum, frame):
        open(ready + ".stopping", "w").close()
        time.sleep(stop_s)
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
open(ready + ".tmp", "w").write(str(os.getpid()))
os.replace(ready + ".tmp", ready)
time.sleep(60)
"""
"""The job's command: publishes its pid, then waits; with a stop time it takes that long to stop on SIGTERM."""


def wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def gone(pid: int, timeout: float) -> bool:
    """Whether ``pid`` ends (or is a zombie) within ``timeout``."""
    try:
        psutil.Process(pid).wait(timeout=timeout)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    return True


class TestSupervisedCommand:
    @pytest.fixture
    def lease_env(self, tmp_path, monkeypatch) -> dict[str, str]:
        """A private lease directory with one fake GPU, also set for this process."""
        monkeypatch.setenv("RLSCALE_LEASE_DIR", str(tmp_path / "lease"))
        monkeypatch.setenv("RLSCALE_LEASE_GPUS", "0")
        return dict(os.environ)

    def start_job(self, ready: Path, stop_s: float, env: dict[str, str]) -> tuple[subprocess.Popen, int]:
        job = subprocess.Popen(
            [sys.executable, "-c", STUDY_JOB, sys.executable, "-c", COMMAND, str(ready), str(stop_s)], env=env
        )
        wait_for(ready)
        return job, int(ready.read_text())

    def test_stdout_goes_where_asked(self, tmp_path, lease_env):
        """A probe's report: the command's stdout goes to the given file."""
        report = tmp_path / "report.txt"
        with open(report, "w") as stdout:
            command = [sys.executable, "-c", "print('report')"]
            code = run_leased(command, stage=Stage.PROBE, gpus=1, granted=1, world_size=1, stdout=stdout)
        assert code == 0 and report.read_text() == "report\n"

    def test_sigterm_is_forwarded(self, tmp_path, lease_env):
        """SIGTERM to the job stops its command, and the job reports it as a shell would (128+15)."""
        job, command = self.start_job(tmp_path / "ready", 0, lease_env)
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=30) == 128 + signal.SIGTERM
        assert gone(command, timeout=5)

    def test_sigkilled_job_takes_its_command_down_and_the_lease_lasts_until_it_ends(self, tmp_path, lease_env):
        """A SIGKILLed job (Snakemake killed) still stops its command, which holds the GPU lease until it exits."""
        ready = tmp_path / "ready"
        job, command = self.start_job(ready, 3.0, lease_env)
        job.kill()
        job.wait(timeout=10)
        wait_for(ready.with_name("ready.stopping"), timeout=10)
        with pytest.raises(LeaseError):  # The command takes 3 s to stop, holding the lease meanwhile.
            acquire(1, timeout_s=0.2)
        assert gone(command, timeout=30)
        with acquire(1, timeout_s=10) as lease:
            assert list(lease.gpu_ids) == ["0"]


@pytest.fixture
def fake_scontrol(tmp_path, monkeypatch):
    """Put an ``scontrol`` on PATH that expands any node list to node001, node002."""
    script = tmp_path / "bin" / "scontrol"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\nprintf 'node001\\nnode002\\n'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{script.parent}:{os.environ['PATH']}")


class TestMultiNode:
    def test_rendezvous_on_first_node(self, fake_scontrol):
        """Every node computes the same c10d endpoint: the first hostname, base port + job id % 1000, job id as id."""
        environ = {"SLURM_JOB_ID": "123042", "SLURM_JOB_NODELIST": "node[001-002]"}
        assert multinode_args(NodeSplit(8, 2), 29400, environ) == [
            *("--nnodes", "2", "--num_gpus", "4", "--rdzv_backend", "c10d"),
            *("--rdzv_endpoint", "node001:29442", "--rdzv_id", "123042"),
        ]

    def test_no_nodelist_is_an_error(self):
        """Outside an allocation there is no first node, and no localhost fallback."""
        with pytest.raises(RuntimeError, match="SLURM_JOB_NODELIST is unset"):
            multinode_args(NodeSplit(8, 2), 29400, {"SLURM_JOB_ID": "1"})

    def test_allocation_with_fewer_nodes(self, capsys, monkeypatch):
        """A 2-node job in a 1-node allocation refuses to run a smaller world size."""
        monkeypatch.setattr(job_runner, "run_command", lambda *args, **kwargs: pytest.fail("must not start"))
        code = run_multinode(["true"], split=NodeSplit(8, 2), rdzv_port=29400, environ={"SLURM_NNODES": "1"})
        assert code == GRANT_EXIT_CODE
        assert "needs 2 nodes × 4 GPUs but the allocation has 1 node(s)" in capsys.readouterr().err


class TestBenchmarkRunsPerSeed:
    CELL = RunArgs(task="T", seeds=(1, 2, 3), output_path="out/seed{seed}.json")

    def test_a_cell_is_one_run(self):
        """Without the peer, every seed runs in one warm process."""
        assert self.CELL.per_seed() == [self.CELL]
        assert self.CELL.options() == ["--task", "T", "--output_path", "out/seed{seed}.json", "--seeds", "1", "2", "3"]

    def test_peer_runs_one_process_per_seed(self):
        """The peer is a cold process, so with it the cell runs once per seed, each with that seed alone."""
        runs = RunArgs(task="T", seeds=(1, 2, 3), peer=True).per_seed()
        assert [run.options() for run in runs] == [["--task", "T", "--seeds", seed, "--peer"] for seed in "123"]


JAX_CACHE_PROBE = """
import sys
from jax import jit, monitoring
from rlscale.tasks.mjx.backend import use_compile_cache
hits = []
monitoring.register_event_listener(lambda event, **_: hits.append(event == "/jax/compilation_cache/cache_hits"))
use_compile_cache(sys.argv[1])
jit(lambda x: x * 2 + 1)(3.0)
print(sum(hits))
"""


@pytest.mark.extras  # MJX's JAX backend, an optional install (rlscale[mjx])
def test_second_process_loads_the_jax_compile_cache(tmp_path):
    """A study job's JIT compile is loaded by the next process from the shared cache, however short it was (JAX
    keeps only compiles over a second by default, and this one takes milliseconds)."""
    pytest.importorskip("mujoco.mjx")
    cache = tmp_path / "jax_cache"
    hits = [
        subprocess.run(
            [sys.executable, "-c", JAX_CACHE_PROBE, str(cache)], capture_output=True, text=True, check=True, timeout=120
        ).stdout.split()[-1]
        for _ in range(2)
    ]
    assert hits == ["0", "1"] and any(cache.iterdir())
