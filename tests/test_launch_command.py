"""Tests of the pure launcher: argv in, distributed-launcher argv out; no process is started except in TestDryRun."""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rlscale.dist import LOG_ALL_RANKS_ENV
from rlscale.launch import command
from rlscale.launch.command import (
    NCCL_PROBE,
    TORCHRUN_ARGS,
    TORCHRUN_ONLY_ARGS,
    TRAIN_MULTIGPU,
    WORKER_SCRIPT,
    LauncherCfg,
    benchmark_launcher_cfg,
    build_launch_command,
    parse_launcher_args,
)
from rlscale.launch.launcher import job_environment, resolve_launch, run_launcher
from rlscale.launch.ports import port_taken
from rlscale.launch.torch_gpus import TorchGpus

SRC = Path(__file__).resolve().parents[1] / "src"
TWO_GPUS = {"CUDA_VISIBLE_DEVICES": "0,1"}
TORCH_WITH_TWO_GPUS = TorchGpus("2.13.0", "12.8", 2)
TORCHRUN = ["python", "-m", "rlscale.launch.torchrun", "--nproc_per_node"]
SKRL_JAX = ["python", "-m", "skrl.utils.distributed.jax", "--nproc_per_node"]
TAIL = [WORKER_SCRIPT, "--rl_library", "rsl_rl"]
TORCHRUN_VALUES = {
    "nnodes": "1",
    "node_rank": "0",
    "master_addr": "10.0.0.1",
    "master_port": "29500",
    "rdzv_backend": "c10d",
    "rdzv_endpoint": "host0:29400",
    "rdzv_id": "job42",
    "max_restarts": "3",
    "monitor_interval": "0.5",
    "start_method": "forkserver",
    "role": "trainer",
    "tee": "3",
    "redirects": "1",
    "local_ranks_filter": "0,1",
    "log_dir": "/tmp/rank logs",
}


def _nvml_unavailable() -> int:
    """Stand-in for NVML on a machine without a driver."""
    raise RuntimeError("NVML Shared Library Not Found")


def _no_nvidia_hardware() -> None:
    """Stand-in for the NVIDIA hardware probe on a machine without a GPU."""
    return None


def resolve(
    argv: list[str],
    environ: dict[str, str] | None = None,
    cfg: LauncherCfg = TRAIN_MULTIGPU,
    nvml=_nvml_unavailable,
    evidence=_no_nvidia_hardware,
) -> list[str]:
    """Parse and build with a fixed interpreter name, as the launcher would on a node with ``environ``."""
    environ = TWO_GPUS if environ is None else environ
    args, forwarded = parse_launcher_args(argv, cfg, environ, nvml_count=nvml, gpu_evidence=evidence)
    return build_launch_command(args, forwarded, cfg, environ, python_executable="python")


def error_of(capsys: pytest.CaptureFixture[str], argv: list[str], environ: dict[str, str] | None = None, **kw) -> str:
    """Return the single stderr line of a rejected launch, after checking it exits 2 and prints nothing else."""
    with pytest.raises(SystemExit) as exc:
        resolve(argv, environ, **kw)
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"{kw.get('cfg', TRAIN_MULTIGPU).prog}: error: ")
    return err


class TestDefaults:
    def test_default_command(self):
        """Two visible GPUs, no options: one rank per GPU, console filtered to local rank 0, --distributed last."""
        assert resolve(["--task", "Cartpole"]) == [
            *TORCHRUN,
            "2",
            "--local_ranks_filter",
            "0",
            *TAIL,
            "--task",
            "Cartpole",
            "--distributed",
        ]

    def test_python_defaults_to_sys_executable(self):
        """Without python_executable the launcher runs under the current interpreter."""
        args, forwarded = parse_launcher_args([], TRAIN_MULTIGPU, TWO_GPUS)
        assert build_launch_command(args, forwarded, TRAIN_MULTIGPU, TWO_GPUS)[0] == sys.executable

    def test_worker_is_worker_py_next_to_the_launcher(self):
        """The worker script is the absolute path of launch/worker.py."""
        assert Path(WORKER_SCRIPT).is_absolute()
        assert Path(WORKER_SCRIPT) == Path(command.__file__).resolve().with_name("worker.py")

    @pytest.mark.parametrize("library", ["rsl_rl", "rl_games", "skrl"])
    def test_rl_library_is_forwarded(self, library):
        """--rl_library is consumed by the launcher and re-emitted right after the worker script."""
        assert resolve(["--rl_library", library])[-4:] == [WORKER_SCRIPT, "--rl_library", library, "--distributed"]

    def test_unknown_rl_library(self, capsys):
        """A library outside the choices is a parser error."""
        assert "'foo'" in error_of(capsys, ["--rl_library", "foo"])

    def test_unresolved_namespace_is_resolved_from_environ(self):
        """build_launch_command resolves nproc_per_node itself when given a hand-made Namespace."""
        args = command.build_parser(TRAIN_MULTIGPU).parse_args([])
        argv = build_launch_command(args, [], TRAIN_MULTIGPU, {"CUDA_VISIBLE_DEVICES": "3"}, python_executable="p")
        assert argv[4] == "1"


class TestGpuCount:
    @pytest.mark.parametrize(("visible", "count"), [("0", 1), ("0,1", 2), ("0,1,2,3", 4), ("GPU-a1, GPU-b2", 2)])
    def test_default_is_every_visible_gpu(self, visible, count):
        """The non-empty entries of CUDA_VISIBLE_DEVICES set the default rank count."""
        assert resolve([], {"CUDA_VISIBLE_DEVICES": visible})[:5] == [*TORCHRUN, str(count)]

    @pytest.mark.parametrize("flag", ["--num_gpus", "--nproc_per_node"])
    def test_explicit_count_and_alias(self, flag):
        """Both spellings set the same count, which may be below the visible count."""
        assert resolve([flag, "2"], {"CUDA_VISIBLE_DEVICES": "0,1,2,3"})[:5] == [*TORCHRUN, "2"]

    def test_too_many_gpus(self, capsys):
        """Asking for more GPUs than visible names both numbers and CUDA_VISIBLE_DEVICES."""
        err = error_of(capsys, ["--num_gpus", "3"])
        assert "--num_gpus/--nproc_per_node=3" in err and "2 GPU(s) visible" in err
        assert "CUDA_VISIBLE_DEVICES" in err

    @pytest.mark.parametrize("visible", ["0,,1", "0,1,", ",0", "0, ,1"])
    def test_empty_entries(self, capsys, visible):
        """A CUDA_VISIBLE_DEVICES list with an empty entry is rejected, quoting the value."""
        assert f"CUDA_VISIBLE_DEVICES={visible!r} has an empty entry" in error_of(
            capsys, [], {"CUDA_VISIBLE_DEVICES": visible}
        )

    @pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5", "gpus", "GPU"])
    @pytest.mark.parametrize("form", ["space", "equals"])
    def test_non_positive_or_non_integer(self, capsys, value, form):
        """--num_gpus must be a positive integer; the error quotes the value."""
        argv = ["--num_gpus", value] if form == "space" else [f"--num_gpus={value}"]
        err = error_of(capsys, argv)
        assert "--num_gpus/--nproc_per_node must be an integer >= 1" in err and repr(value) in err

    @pytest.mark.parametrize("environ", [{"CUDA_VISIBLE_DEVICES": ""}, {}])
    def test_no_gpu_suggests_cpu(self, capsys, environ):
        """With no visible GPU (empty list, or NVML failing) the error suggests --device cpu."""
        assert "pass --device cpu" in error_of(capsys, ["--task", "X"], environ)

    def test_nvml_count_when_cuda_visible_devices_unset(self):
        """NVML's count is the default when CUDA_VISIBLE_DEVICES is unset."""
        assert resolve([], {}, nvml=lambda: 8)[4] == "8"

    def test_nvml_not_queried_when_not_needed(self):
        """NVML is only asked when CUDA_VISIBLE_DEVICES is unset and the ranks are not CPU processes."""
        calls = []

        def counting_nvml() -> int:
            calls.append(1)
            return 4

        resolve(["--num_gpus", "2"], TWO_GPUS, nvml=counting_nvml)
        resolve(["--device", "cpu"], {}, nvml=counting_nvml)
        assert calls == []
        resolve(["--num_gpus", "2"], {}, nvml=counting_nvml)
        assert calls == [1]


NVIDIA_DEVICE_FILE = "/dev/nvidia0 exists"
CPUS = len(os.sched_getaffinity(0))


class TestNumGpusKeywords:
    @pytest.mark.parametrize("flag", ["--num_gpus", "--nproc_per_node"])
    def test_gpu_is_every_visible_gpu(self, flag):
        """torchrun's gpu (Isaac Lab's default) is the default: one rank per visible GPU."""
        assert resolve([flag, "gpu"], {"CUDA_VISIBLE_DEVICES": "0,1,2"}) == resolve(
            [], {"CUDA_VISIBLE_DEVICES": "0,1,2"}
        )
        assert resolve([flag, "gpu"], {"CUDA_VISIBLE_DEVICES": "0,1,2"})[4] == "3"

    def test_gpu_without_gpu(self, capsys):
        """gpu on a host without a visible GPU fails like the default, naming the value."""
        err = error_of(capsys, ["--num_gpus", "gpu"], {"CUDA_VISIBLE_DEVICES": ""})
        assert "--num_gpus=gpu needs a GPU but none is visible" in err and "pass --device cpu" in err

    def test_auto_with_gpus(self):
        """auto with visible GPUs is gpu: no --device is added."""
        assert resolve(["--num_gpus", "auto"]) == [*TORCHRUN, "2", "--local_ranks_filter", "0", *TAIL, "--distributed"]

    @pytest.mark.parametrize("environ", [{"CUDA_VISIBLE_DEVICES": ""}, {}])
    def test_auto_without_gpu_is_cpu(self, environ):
        """auto without a visible GPU is torchrun's cpu: a CPU process per available core, told --device cpu."""
        argv = resolve(["--num_gpus", "auto", "--task", "X"], environ)
        assert argv[4] == str(CPUS) and argv[-5:] == ["--task", "X", "--device", "cpu", "--distributed"]

    def test_auto_does_not_hide_gpus_nvml_missed(self, capsys):
        """auto does not fall back to CPU processes on a host with NVIDIA hardware that NVML could not count."""
        err = error_of(capsys, ["--num_gpus", "auto"], {}, evidence=lambda: NVIDIA_DEVICE_FILE)
        assert "--num_gpus auto finds no GPU (NVML unavailable: NVML Shared Library Not Found, although" in err
        assert NVIDIA_DEVICE_FILE in err and "pass --num_gpus cpu" in err

    def test_auto_with_cuda_device_needs_a_gpu(self, capsys):
        """A forwarded GPU --device makes auto gpu: no CPU fallback."""
        assert "--num_gpus=auto needs a GPU" in error_of(capsys, ["--num_gpus", "auto", "--device", "cuda"], {})

    @pytest.mark.parametrize("keyword", ["cpu", "auto"])
    def test_cpu_device_given(self, keyword):
        """cpu, or auto with --device cpu, counts CPU cores and keeps the one --device."""
        argv = resolve(["--num_gpus", keyword, "--device=cpu"])
        assert argv[4] == str(CPUS) and argv[-2:] == ["--device=cpu", "--distributed"] and "cpu" not in argv[5:-2]

    def test_cpu_needs_no_gpu_count(self):
        """cpu starts CPU processes, told --device cpu, without asking NVML."""
        argv = resolve(["--num_gpus", "cpu"], {}, nvml=None)
        assert argv[4] == str(CPUS) and argv[-3:] == ["--device", "cpu", "--distributed"]

    def test_cpu_with_gpu_device(self, capsys):
        """cpu with a GPU --device is a contradiction, refused naming both."""
        err = error_of(capsys, ["--num_gpus", "cpu", "--device", "cuda:0"])
        assert "--num_gpus cpu starts CPU processes, but --device cuda:0 is forwarded" in err

    def test_gpu_with_cpu_device(self, capsys):
        """gpu with --device cpu is a contradiction, refused with the fix."""
        err = error_of(capsys, ["--num_gpus", "gpu", "--device", "cpu"])
        assert "--num_gpus gpu counts GPUs, but --device cpu" in err and "--num_gpus cpu" in err

    def test_help_documents_keywords(self):
        """--help says what gpu, cpu and auto mean."""
        text = command.build_parser(TRAIN_MULTIGPU).format_help()
        assert all(
            keyword in " ".join(text.split())
            for keyword in ("gpu (every visible GPU", "cpu (one CPU process", "auto (gpu if")
        )


class TestNoGpuHere:
    def test_error_names_nvidia_hardware_nvml_missed(self, capsys):
        """With NVML failing on a host with NVIDIA device files, the error says so and points at the library."""
        err = error_of(capsys, ["--task", "X"], {}, evidence=lambda: NVIDIA_DEVICE_FILE)
        assert (
            "(NVML unavailable: NVML Shared Library Not Found, although /dev/nvidia0 exists: is the NVIDIA driver's "
            "libnvidia-ml.so.1 on the library path?)" in err
        )

    def test_masked_gpus_are_not_second_guessed(self, capsys):
        """An explicit empty CUDA_VISIBLE_DEVICES hides GPUs on purpose: no hardware probe, no library hint."""
        err = error_of(capsys, ["--task", "X"], {"CUDA_VISIBLE_DEVICES": ""}, evidence=_nvml_unavailable)
        assert "none is visible (CUDA_VISIBLE_DEVICES='')" in err and "although" not in err

    @pytest.mark.parametrize("nvml", [_nvml_unavailable, lambda: 0])
    def test_dry_run_leaves_gpu_to_torchrun(self, nvml):
        """A dry run where no GPU can be counted (a login node) prints torchrun's gpu instead of failing."""
        argv = resolve(["--task", "X", "--dry_run"], {}, nvml=nvml, evidence=_nvml_unavailable)
        assert argv == [*TORCHRUN, "gpu", "--local_ranks_filter", "0", *TAIL, "--task", "X", "--distributed"]

    def test_dry_run_keeps_an_explicit_count(self):
        """A dry run without a countable GPU prints the given count unchecked."""
        assert resolve(["--num_gpus", "4", "--nnodes", "2", "--master_addr", "n0", "--dry_run"], {})[4] == "4"

    def test_dry_run_still_checks_a_given_mask(self, capsys):
        """CUDA_VISIBLE_DEVICES='' is a count of zero, not a host that cannot count: the dry run fails too."""
        assert "pass --device cpu" in error_of(capsys, ["--dry_run"], {"CUDA_VISIBLE_DEVICES": ""})

    def test_dry_run_of_skrl_jax_needs_a_count(self, capsys):
        """skrl's JAX launcher takes a number only, so its dry run still needs one."""
        jax = ["--rl_library", "skrl", "--ml_framework", "jax", "--dry_run"]
        assert "needs a GPU but none is visible" in error_of(capsys, jax, {})
        assert resolve([*jax, "--num_gpus", "2"], {})[:5] == [*SKRL_JAX, "2"]


class TestCpuRanks:
    @pytest.mark.parametrize("device", [["--device", "cpu"], ["--device=cpu"]])
    def test_default_one_process_and_device_forwarded(self, device):
        """--device cpu needs no GPU, defaults to one process and stays in the worker's arguments."""
        argv = resolve(device, {})
        assert argv[:5] == [*TORCHRUN, "1"] and argv[-len(device) - 1 :] == [*device, "--distributed"]

    def test_num_gpus_counts_processes(self):
        """With --device cpu, --num_gpus counts processes and is not checked against visible GPUs."""
        assert resolve(["--num_gpus", "4", "--device", "cpu"], {"CUDA_VISIBLE_DEVICES": ""})[4] == "4"

    def test_cuda_device_is_checked(self, capsys):
        """--device cuda:0 keeps the GPU check."""
        assert "none is visible" in error_of(capsys, ["--device", "cuda:0"], {})


class TestTorchrunPassthrough:
    @pytest.mark.parametrize("name", TORCHRUN_ARGS)
    def test_option_reaches_torchrun(self, name):
        """Each torchrun option lands right after --nproc_per_node, with its value unchanged."""
        argv = resolve([f"--{name}", TORCHRUN_VALUES[name]])
        assert argv[5:7] == [f"--{name}", TORCHRUN_VALUES[name]]
        assert argv.index(WORKER_SCRIPT) > 6

    def test_all_options_in_isaac_lab_order(self):
        """Given in reverse order, the options still come out in TORCHRUN_ARGS order, without the default filter."""
        given = [token for name in reversed(TORCHRUN_ARGS) for token in (f"--{name}", TORCHRUN_VALUES[name])]
        expected = [token for name in TORCHRUN_ARGS for token in (f"--{name}", TORCHRUN_VALUES[name])]
        assert resolve(given) == [*TORCHRUN, "2", *expected, *TAIL, "--distributed"]

    def test_log_all_ranks(self):
        """--log_all_ranks drops the default --local_ranks_filter 0, tees every rank's lines (torchrun prefixes them)
        and is not forwarded; a --tee or --redirects of the user's stays theirs."""
        assert resolve(["--log_all_ranks"]) == [*TORCHRUN, "2", "--tee", "3", *TAIL, "--distributed"]
        assert resolve(["--log_all_ranks", "--tee", "1"]).count("--tee") == 1
        assert "--tee" not in resolve(["--log_all_ranks", "--redirects", "3"])

    def test_log_all_ranks_tells_the_ranks(self):
        """The ranks learn of it, and torchrun prefixes their lines with the global rank; skrl's JAX ranks get
        neither (its launcher prints every rank unprefixed)."""
        env = job_environment({}, 2, False, "status", log_all_ranks=True)
        assert env[LOG_ALL_RANKS_ENV] == "1" and env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] == "[rank${rank}]:"
        assert LOG_ALL_RANKS_ENV not in job_environment({}, 2, True, "status", log_all_ranks=True)
        assert LOG_ALL_RANKS_ENV not in job_environment({}, 2, False, "status")

    def test_explicit_filter_appears_once(self):
        """An explicit --local_ranks_filter replaces the default one."""
        argv = resolve(["--local_ranks_filter", "1"])
        assert argv.count("--local_ranks_filter") == 1 and argv[5:7] == ["--local_ranks_filter", "1"]

    def test_bad_start_method(self, capsys):
        """--start_method is limited to the multiprocessing start methods."""
        assert "'thread'" in error_of(capsys, ["--start_method", "thread"])


class TestRestarts:
    def test_restarts_reach_torchrun_with_a_store_per_attempt(self):
        """--max_restarts goes to torchrun, and its ranks' environment unshares the c10d rendezvous store, whose keys
        a restarted group would otherwise read from the failed one."""
        assert resolve(["--max_restarts", "2"])[5:7] == ["--max_restarts", "2"]
        assert job_environment({}, 2, False, "status", max_restarts=2)["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
        assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in job_environment({}, 2, False, "status")

    @pytest.mark.parametrize("value", ["-1", "two", "1.5"])
    def test_a_count_it_is(self, capsys, value):
        assert f"--max_restarts must be an integer >= 0, got '{value}'" in error_of(capsys, ["--max_restarts", value])

    @pytest.mark.parametrize(
        "argv",
        [
            ["--master_port", "29500"],
            ["--nnodes", "2", "--master_addr", "node0", "--master_port", "29500"],
            ["--nnodes", "2", "--master_addr", "node0"],
        ],
    )
    def test_static_rendezvous_is_refused(self, capsys, argv):
        """torchrun's static rendezvous keeps the failed group's store: restarts there are refused, pointing to c10d;
        no restarts, or c10d, are fine."""
        err = error_of(capsys, [*argv, "--max_restarts", "1"])
        assert "--max_restarts 1 needs torchrun's c10d rendezvous" in err and "--rdzv_backend c10d" in err
        resolve([*argv, "--max_restarts", "0"])
        resolve(["--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint", "node0:29400", "--max_restarts", "1"])


class TestSkrlJax:
    def test_jax_command(self):
        """skrl + --ml_framework jax goes through skrl's launcher with its own options and no rank filter."""
        argv = ["--rl_library", "skrl", "--nnodes", "2", "--node_rank", "1", "--coordinator_address", "10.0.0.1:5000"]
        assert resolve([*argv, "--ml_framework", "jax", "--task", "X"]) == [
            *SKRL_JAX,
            "2",
            *("--nnodes", "2", "--node_rank", "1", "--coordinator_address", "10.0.0.1:5000"),
            *(WORKER_SCRIPT, "--rl_library", "skrl", "--ml_framework", "jax", "--task", "X", "--distributed"),
        ]

    def test_one_node_launch_takes_a_free_coordinator_port(self):
        """skrl's own default coordinator is 127.0.0.1:5000, which two jobs on one host would share: a one-node launch
        that names none gets a localhost port nobody listens on; a dry run shows none (it may run elsewhere)."""
        argv = ["--num_gpus", "2", "--device", "cpu", "--rl_library", "skrl", "--ml_framework", "jax"]
        command = resolve_launch(argv, TRAIN_MULTIGPU, {}).command
        address = command[command.index("--coordinator_address") + 1]
        host, _, port = address.rpartition(":")
        assert host == "127.0.0.1" and int(port) != 5000 and port_taken(int(port)) is None
        assert command.index("--coordinator_address") < command.index(WORKER_SCRIPT)
        assert "--coordinator_address" not in resolve_launch([*argv, "--dry_run"], TRAIN_MULTIGPU, {}).command

    def test_equals_form(self):
        """--ml_framework=jax selects the JAX launcher too, and stays forwarded."""
        argv = resolve(["--rl_library=skrl", "--ml_framework=jax"])
        assert argv[:5] == [*SKRL_JAX, "2"] and "--ml_framework=jax" in argv

    @pytest.mark.parametrize(
        "argv", [["--rl_library", "skrl", "--ml_framework", "torch"], ["--rl_library", "rsl_rl", "--ml_framework=jax"]]
    )
    def test_torchrun_otherwise(self, argv):
        """skrl with torch, or jax with another library, stays on torchrun."""
        assert resolve(argv)[:5] == [*TORCHRUN, "2"]

    @pytest.mark.parametrize("name", [name for name in TORCHRUN_ONLY_ARGS if name != "max_restarts"])
    def test_torchrun_only_option_rejected(self, capsys, name):
        """Every torchrun-only option is an error naming that option under skrl JAX."""
        err = error_of(capsys, ["--rl_library", "skrl", "--ml_framework", "jax", f"--{name}", TORCHRUN_VALUES[name]])
        assert f"--{name}: torchrun-only" in err and "--coordinator_address" in err

    def test_max_restarts_is_refused_saying_why(self, capsys):
        """skrl's JAX launcher has no restarts: --max_restarts (even with --tee) is refused for that reason."""
        err = error_of(capsys, ["--rl_library", "skrl", "--ml_framework", "jax", "--max_restarts", "1", "--tee", "3"])
        assert err.startswith(
            "rlscale train_multigpu: error: --max_restarts: skrl's JAX launcher (--rl_library skrl --ml_framework jax) "
            "never restarts its ranks, so a failed rank ends the job; drop --max_restarts, or train skrl with "
            "--ml_framework torch"
        )

    def test_log_all_ranks_is_a_note(self, capsys):
        """--log_all_ranks is accepted with a one-line note: skrl's JAX launcher shows every rank anyway."""
        argv = resolve(["--rl_library", "skrl", "--ml_framework", "jax", "--log_all_ranks"])
        assert argv == [*SKRL_JAX, "2", WORKER_SCRIPT, "--rl_library", "skrl", "--ml_framework", "jax", "--distributed"]
        assert capsys.readouterr() == (
            "",
            "[WARN] --log_all_ranks has no effect with skrl's JAX launcher: every rank prints.\n",
        )

    def test_several_torchrun_only_options_named(self, capsys):
        """All offending options are listed at once."""
        err = error_of(capsys, ["--rl_library", "skrl", "--ml_framework=jax", "--master_port", "1", "--tee", "3"])
        assert "--master_port, --tee: torchrun-only" in err

    def test_elastic_nnodes_rejected(self, capsys):
        """skrl's launcher takes an integer --nnodes only."""
        err = error_of(capsys, ["--rl_library", "skrl", "--ml_framework=jax", "--nnodes", "1:2"])
        assert "--nnodes" in err and "'1:2'" in err

    @pytest.mark.parametrize("argv", [[], ["--rl_library", "skrl"], ["--rl_library", "skrl", "--ml_framework=torch"]])
    def test_coordinator_address_needs_skrl_jax(self, capsys, argv):
        """--coordinator_address outside skrl JAX is an error pointing to torchrun's own options."""
        err = error_of(capsys, [*argv, "--coordinator_address", "h:5000"])
        assert "--coordinator_address=h:5000 is only for --rl_library skrl --ml_framework jax" in err

    @pytest.mark.parametrize("address", ["host", "host:0", "host:65536", ":5000", "host:port"])
    def test_coordinator_address_format(self, capsys, address):
        """The coordinator address must be HOST:PORT with a valid port."""
        err = error_of(capsys, ["--rl_library", "skrl", "--ml_framework", "jax", "--coordinator_address", address])
        assert f"got {address!r}" in err

    def test_multinode_jax_needs_coordinator(self, capsys):
        """Several JAX nodes need the coordinator's address."""
        assert "--coordinator_address" in error_of(capsys, ["--rl_library=skrl", "--ml_framework=jax", "--nnodes=2"])


class TestNcclEnvironment:
    @pytest.mark.parametrize("disable", ["0", "", " 0 "])
    def test_p2p_disable_off_goes_with_a_level(self, disable):
        """NCCL_P2P_DISABLE that NCCL reads as 0 does not conflict with NCCL_P2P_LEVEL."""
        assert resolve([], {**TWO_GPUS, "NCCL_P2P_DISABLE": disable, "NCCL_P2P_LEVEL": "NVL"})[4] == "2"

    @pytest.mark.parametrize("disable", ["1", " 1"])
    def test_p2p_disable_on_conflicts_with_a_level(self, capsys, disable):
        """NCCL_P2P_DISABLE=1 with NCCL_P2P_LEVEL is refused, quoting both."""
        err = error_of(capsys, [], {**TWO_GPUS, "NCCL_P2P_DISABLE": disable, "NCCL_P2P_LEVEL": "NVL"})
        assert f"NCCL_P2P_DISABLE={disable!r} and NCCL_P2P_LEVEL='NVL'" in err and "mutually exclusive" in err

    @pytest.mark.parametrize("disable", ["1", "0"])
    def test_empty_level_is_unset(self, disable):
        """An empty NCCL_P2P_LEVEL is no level."""
        assert resolve([], {**TWO_GPUS, "NCCL_P2P_DISABLE": disable, "NCCL_P2P_LEVEL": ""})[4] == "2"

    @pytest.mark.parametrize("disable", ["true", "yes", "2", "-1"])
    def test_p2p_disable_must_be_0_or_1(self, capsys, disable):
        """A value NCCL would silently read as P2P on (anything but 1) is refused, level or not."""
        err = error_of(capsys, [], {**TWO_GPUS, "NCCL_P2P_DISABLE": disable})
        assert f"NCCL_P2P_DISABLE={disable!r} must be 0 or 1" in err


class TestMultiNode:
    def test_static_rendezvous(self):
        """Static rendezvous options reach torchrun."""
        argv = ["--nnodes", "2", "--node_rank", "1", "--master_addr", "10.0.0.1", "--master_port", "29500"]
        args, forwarded = parse_launcher_args(argv, TRAIN_MULTIGPU, TWO_GPUS)
        built = build_launch_command(args, forwarded, TRAIN_MULTIGPU, TWO_GPUS, python_executable="python")
        assert built[:13] == [*TORCHRUN, "2", *argv]

    def test_elastic_rendezvous(self):
        """nnodes MIN:MAX passes through for torchrun elastic training."""
        argv = ["--nnodes", "1:4", "--rdzv_backend", "c10d", "--rdzv_endpoint", "host0:29400", "--rdzv_id", "j"]
        assert resolve(argv)[5:13] == argv

    @pytest.mark.parametrize(
        ("argv", "expected"),
        [
            (["--nnodes", "2", "--node_rank", "2", "--master_addr", "h"], "--node_rank must be an integer in 0..1"),
            (["--node_rank", "1"], "--node_rank must be an integer in 0..0"),
            (["--node_rank", "-1"], "'-1'"),
            (["--nnodes", "0"], "--nnodes must be an integer >= 1, got '0'"),
            (["--nnodes", "abc"], "'abc'"),
            (["--nnodes", "4:2", "--master_addr", "h"], "'4:2'"),
            (["--master_port", "0"], "--master_port must be an integer in 1..65535, got '0'"),
            (["--master_port", "65536"], "'65536'"),
            (["--master_port", "http"], "'http'"),
            (["--nnodes", "2"], "--master_addr HOST --master_port PORT"),
            (["--nnodes", "1:2"], "--rdzv_endpoint HOST:PORT"),
        ],
    )
    def test_rejected(self, capsys, argv, expected):
        """Impossible topologies and ports fail before anything starts, quoting the value."""
        assert expected in error_of(capsys, argv)


class TestForwarding:
    def test_unknown_arguments_keep_order_and_form(self):
        """Unknown arguments pass through verbatim and in order, around interleaved launcher options."""
        argv = ["--task", "Cartpole", "--num_gpus", "2", "--seed=7", "--headless", "--nnodes=1", "--agent.lr", "-1e-3"]
        forwarded = ["--task", "Cartpole", "--seed=7", "--headless", "--agent.lr", "-1e-3"]
        assert resolve(argv) == [
            *TORCHRUN,
            "2",
            "--nnodes",
            "1",
            "--local_ranks_filter",
            "0",
            *TAIL,
            *forwarded,
            "--distributed",
        ]

    def test_double_dash_dropped(self):
        """The first ``--`` is dropped without hiding launcher options; a second one and the rest are forwarded."""
        argv = resolve(["--seed", "1", "--", "--num_gpus", "1", "--", "--num_gpus", "9", "x"])
        tail = ["--seed", "1", "--", "--num_gpus", "9", "x", "--distributed"]
        assert argv[4] == "1" and argv[argv.index(WORKER_SCRIPT) + 3 :] == tail

    def test_launcher_options_after_double_dash(self):
        """--rl_library after ``--`` is the launcher's: one library, and skrl JAX picks skrl's launcher."""
        argv = resolve(["--task", "X", "--", "--rl_library", "skrl", "--ml_framework", "jax"])
        assert argv == [
            *SKRL_JAX,
            "2",
            *(WORKER_SCRIPT, "--rl_library", "skrl", "--task", "X", "--ml_framework", "jax", "--distributed"),
        ]

    @pytest.mark.parametrize(
        ("after", "launcher"),
        [
            (["--nnodes", "1"], ["--nnodes", "1", "--local_ranks_filter", "0"]),
            (["--local_ranks_filter", "1"], ["--local_ranks_filter", "1"]),
            (["--log_all_ranks"], ["--tee", "3"]),
        ],
    )
    def test_torchrun_options_after_double_dash(self, after, launcher):
        """Torchrun options after ``--`` reach torchrun, not the ranks."""
        assert resolve(["--task", "X", "--", *after]) == [
            *TORCHRUN,
            "2",
            *launcher,
            *TAIL,
            "--task",
            "X",
            "--distributed",
        ]

    def test_dry_run_after_double_dash(self):
        """--dry_run after ``--`` is the launcher's too: it prints the command instead of starting it."""
        args, forwarded = parse_launcher_args(["--task", "X", "--", "--dry_run"], TRAIN_MULTIGPU, TWO_GPUS)
        assert args.dry_run and forwarded == ["--task", "X"]

    def test_no_abbreviations(self):
        """No abbreviations (OneLineParser's default): a prefix of a launcher option is forwarded, not interpreted."""
        argv = resolve(["--num_gpu", "1"])
        assert argv[4] == "2" and argv[-3:] == ["--num_gpu", "1", "--distributed"]

    def test_peeked_options_stay_forwarded(self):
        """--ml_framework and --device are read but remain in the worker's arguments."""
        argv = resolve(["--ml_framework", "torch", "--device=cuda:0"])
        assert argv[-4:] == ["--ml_framework", "torch", "--device=cuda:0", "--distributed"]

    def test_distributed_not_duplicated(self):
        """A user-given --distributed keeps its place and is not appended again."""
        argv = resolve(["--distributed", "--task", "X"])
        assert argv.count("--distributed") == 1 and argv[-3:] == ["--distributed", "--task", "X"]


class TestBenchmarkCfg:
    def test_training_workflow(self):
        """benchmark training_multigpu puts --workflow training before the library and forwarded args."""
        cfg = benchmark_launcher_cfg("training", uses_library=True)
        tail = resolve(["--rl_library", "rl_games", "--num_envs", "64"], cfg=cfg)[7:]
        assert tail == [
            WORKER_SCRIPT,
            "--workflow",
            "training",
            "--rl_library",
            "rl_games",
            "--num_envs",
            "64",
            "--distributed",
        ]
        assert cfg.prog == "rlscale benchmark training_multigpu"

    @pytest.mark.parametrize("workflow", ["runtime", "startup_multigpu", "startup-multigpu"])
    def test_workflows_without_library_offer_none(self, workflow):
        """A workflow that runs no library offers no --rl_library; suffixed names are accepted."""
        cfg = benchmark_launcher_cfg(workflow, uses_library=False)
        assert cfg.rl_libraries == () and resolve([], cfg=cfg)[-4:-1] == [WORKER_SCRIPT, "--workflow", workflow[:7]]

    def test_records_decide_the_library_option(self):
        """benchmark/cli.py passes each record's uses_library: training and startup offer --rl_library, runtime not."""
        from rlscale.benchmark.workflows import WORKFLOWS

        offered = {
            name: bool(benchmark_launcher_cfg(name, uses_library=workflow.uses_library).rl_libraries)
            for name, workflow in WORKFLOWS.items()
        }
        assert offered == {"startup": True, "runtime": False, "training": True}

    def test_jax_rejected(self, capsys):
        """Benchmarks do not support skrl JAX."""
        cfg = benchmark_launcher_cfg("training", uses_library=True)
        err = error_of(capsys, ["--rl_library", "skrl", "--ml_framework", "jax"], cfg=cfg)
        assert "does not support skrl with --ml_framework jax" in err

    def test_cfg_is_frozen(self):
        """LauncherCfg instances are immutable."""
        with pytest.raises(dataclasses.FrozenInstanceError):
            TRAIN_MULTIGPU.prog = "x"  # type: ignore[misc]


def _run_python(code: str, environ: dict[str, str], *options: str) -> subprocess.CompletedProcess[str]:
    """Run ``python [options] -c code`` with src on the path."""
    env = {**os.environ, "PYTHONPATH": str(SRC), **environ}
    return subprocess.run([sys.executable, *options, "-c", code], env=env, capture_output=True, text=True, timeout=60)


class TestCpuBinding:
    @pytest.mark.parametrize(
        "cfg", [TRAIN_MULTIGPU, benchmark_launcher_cfg("training", uses_library=True)], ids=["train", "benchmark"]
    )
    def test_the_launchers_option_defaults_to_auto_and_is_not_forwarded(self, cfg):
        assert parse_launcher_args(["--task", "X"], cfg, TWO_GPUS)[0].cpu_binding == "auto"
        args, forwarded = parse_launcher_args(["--cpu_binding", "none", "--task", "X"], cfg, TWO_GPUS)
        assert (args.cpu_binding, forwarded) == ("none", ["--task", "X"])

    def test_the_nccl_probe_places_no_rank(self):
        """The probe is the script one would write by hand: no option, so its ranks would be given the flag."""
        args, forwarded = parse_launcher_args(["--cpu_binding", "none"], NCCL_PROBE, TWO_GPUS)
        assert not hasattr(args, "cpu_binding") and forwarded == ["--cpu_binding", "none"]


class TestDryRun:
    def test_output_round_trips_through_shlex(self, capsys, monkeypatch):
        """shlex.split of the printed line equals the built command, quotes and spaces included."""
        monkeypatch.setattr(subprocess, "Popen", None)  # Anything that tries to start a process fails.
        argv = ["--run_name", "it's a run", "--log_dir", "/tmp/a b", "--note=$HOME;x", "--dry_run"]
        assert run_launcher(argv, TRAIN_MULTIGPU, TWO_GPUS) == 0
        out, err = capsys.readouterr()
        args, forwarded = parse_launcher_args(argv, TRAIN_MULTIGPU, TWO_GPUS)
        assert shlex.split(out) == build_launch_command(args, forwarded, TRAIN_MULTIGPU, TWO_GPUS)
        assert out.count("\n") == 1  # the CPU binding goes to stderr, one line per local rank
        assert [line.split(": ")[1] for line in err.splitlines()] == ["local rank 0", "local rank 1"]

    def test_the_launcher_reads_its_ranks_device_once(self, capsys, monkeypatch):
        """One launch (placement and GPU check included) scans the forwarded arguments for --device once."""
        scans = []
        scan = command.forwarded_value
        monkeypatch.setattr(
            command, "forwarded_value", lambda forwarded, name: scans.append(name) or scan(forwarded, name)
        )
        monkeypatch.setattr("rlscale.launch.supervise.run_supervised", lambda argv, **kwargs: 0)
        argv = ["--task", "X", "--device", "cuda:1", "--num_gpus", "2"]
        run_launcher(argv, TRAIN_MULTIGPU, TWO_GPUS, torch_gpus=lambda: TORCH_WITH_TWO_GPUS)
        capsys.readouterr()
        assert scans.count("--device") == 1

    def test_launch_goes_to_supervisor(self, capsys, monkeypatch):
        """Without --dry_run the command is announced on stderr and its exit code returned."""
        calls = []
        monkeypatch.setattr("rlscale.launch.supervise.run_supervised", lambda argv, **kwargs: calls.append(argv) or 5)
        argv = ["--task", "X", "--cpu_binding", "none"]
        assert run_launcher(argv, TRAIN_MULTIGPU, TWO_GPUS, torch_gpus=lambda: TORCH_WITH_TWO_GPUS) == 5
        err = capsys.readouterr().err.splitlines()
        assert err[0] == "[INFO] cpu binding none: ranks left unbound"
        assert err[1] == f"[INFO] Launching distributed workers with: {shlex.join(calls[0])}"
        assert err[2] == "[ERROR] none of the 2 rank(s) reported an exit status: the cause is torchrun's error above"

    def test_dry_run_is_torch_free(self):
        """main_train_multigpu --dry_run imports neither torch nor pynvml (what keeps it fast: ``-X importtime``
        lists every module the interpreter imported, so no heavy package comes in by any path)."""
        code = (
            "import sys\n"
            "from rlscale.launch.launcher import main_train_multigpu\n"
            "sys.exit(main_train_multigpu(['--num_gpus', '2', '--task', 'Isaac-Cartpole', '--dry_run']))\n"
        )
        result = _run_python(code, TWO_GPUS, "-X", "importtime")
        assert result.returncode == 0, result.stderr
        assert shlex.split(result.stdout)[2] == "rlscale.launch.torchrun"
        imported = {line.rpartition("|")[2].strip() for line in result.stderr.splitlines() if "import time:" in line}
        assert "rlscale.launch.launcher" in imported  # the import graph is there to check
        heavy = {name for name in imported if name.split(".")[0] in ("torch", "pynvml", "numpy")}
        assert not heavy, sorted(heavy)

    def test_package_imports_are_light(self):
        """No launch module imports torch or pynvml; the resolver does not even load the supervisor or psutil."""
        code = (
            "import sys, rlscale.launch, rlscale.launch.command\n"
            "heavy = {'torch', 'pynvml', 'psutil', 'rlscale.launch.supervise'} & set(sys.modules)\n"
            "assert not heavy, heavy\n"
            "import rlscale.launch.supervise\n"
            "assert not {'torch', 'pynvml'} & set(sys.modules)\n"
        )
        result = _run_python(code, {})
        assert result.returncode == 0, result.stderr

    def test_user_error_in_subprocess(self):
        """A user error exits 2 with exactly one stderr line and nothing on stdout."""
        code = "from rlscale.launch.launcher import main_train_multigpu; main_train_multigpu(['--num_gpus', '0'])"
        result = _run_python(code, TWO_GPUS)
        assert (result.returncode, result.stdout, result.stderr.count("\n")) == (2, "", 1)
