"""Isaac Lab's multi-GPU command lines, run through rlscale with ``--dry_run``: exit code and resolved launcher argv.

Source: Isaac Lab 3.0 release docs, "Multi-GPU and Multi-Node Training"
  https://isaac-sim.github.io/IsaacLab/release/3.0.0/source/features/multi_gpu.html
  (the same page: https://docs.nvidia.com/isaaclab/features/multi-gpu-and-multi-node-training, Release 3.0;
  its source: https://raw.githubusercontent.com/isaac-sim/IsaacLab/v3.0.0/docs/source/features/multi_gpu.rst).
The older torchrun / skrl-JAX commands of the 1.0 and 2.x pages (still what downstream forks run):
  https://isaac-sim.github.io/IsaacLab/v1.0.0/source/features/multi_gpu.html ,
  https://isaac-sim.github.io/IsaacLab/v2.3.2/source/features/multi_gpu.html .

A comment above each case quotes the Isaac Lab line it stands for. ``verbatim`` marks a line copied from the page as
published; the other ``3.0`` lines are the options of the page's tables written out on ``--task Isaac-Cartpole``,
the page's placeholders (``<ip>``, ``<port>``) given concrete values.
``uv run isaaclab`` becomes ``rlscale``; an Isaac Lab task id that rlscale has no task for is mapped to the closest
rlscale task, and the unmapped line is checked to be refused. Every case runs the real ``rlscale`` dispatcher in
process, with NVML replaced by a stub that finds no GPU, so that the GPU count comes from ``CUDA_VISIBLE_DEVICES``
alone on any machine. Nothing is started: dry runs and argument parsing only.
"""

from __future__ import annotations

import functools
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import rlscale_command
from test_launch_command import _no_nvidia_hardware, _nvml_unavailable

from rlscale import cli
from rlscale.benchmark import cli as benchmark_cli
from rlscale.launch import launcher
from rlscale.launch.command import WORKER_SCRIPT, parse_launcher_args
from rlscale.tasks import resolve_task_id

PY = sys.executable
TORCHRUN = [PY, "-m", "rlscale.launch.torchrun", "--nproc_per_node"]
SKRL_JAX = [PY, "-m", "skrl.utils.distributed.jax", "--nproc_per_node"]
RANK0 = ["--local_ranks_filter", "0"]
"""The console filter the launcher adds unless --log_all_ranks or an explicit --local_ranks_filter."""
RSL_CARTPOLE = [WORKER_SCRIPT, "--rl_library", "rsl_rl", "--task", "Isaac-Cartpole", "--distributed"]
"""The worker and its arguments for ``--task Isaac-Cartpole`` with the default library."""
BENCH = benchmark_cli.WORKER
SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch):
    """NVML counts no GPU, as on this CPU-only host: only ``CUDA_VISIBLE_DEVICES`` gives a count, on any machine."""
    stubbed = functools.partial(parse_launcher_args, nvml_count=_nvml_unavailable, gpu_evidence=_no_nvidia_hardware)
    monkeypatch.setattr(launcher, "parse_launcher_args", stubbed)  # the benchmarks' launcher's too
    for name in ("CUDA_VISIBLE_DEVICES", "RLSCALE_INJECT_FAULT", "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)


@dataclass(frozen=True)
class Result:
    code: int
    argv: list[str]
    """The printed command, split as a shell would."""
    err: str


def rlscale(line: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Result:
    """Run ``[VAR=value ...] rlscale ARGS`` in process; the assignments set the environment for this call only."""
    words = shlex.split(line)
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        monkeypatch.setenv(name, value)
    assert words[0] == "rlscale", line
    try:
        code = cli.main(words[1:])
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return Result(code, shlex.split(out), without_binding_plan(err))


def without_binding_plan(stderr: str) -> str:
    """stderr without the launcher's CPU-binding plan (one line per local rank, on every launch)."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("[INFO] cpu binding"))


def forwarded_task(argv: list[str]) -> str:
    """The ``--task`` value given to the ranks (``--task X`` or ``--task=X``)."""
    for index, arg in enumerate(argv):
        if arg == "--task":
            return argv[index + 1]
        if arg.startswith("--task="):
            return arg.partition("=")[2]
    raise AssertionError(f"no --task in {argv}")


# (Isaac Lab line quoted in the comment above each case, rlscale line, rlscale task the ranks train, expected argv)
LAUNCHES = [
    # 3.0, verbatim: uv run isaaclab train_multigpu --task Isaac-Cartpole   (+ the page's tip: add --dry_run)
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --dry_run",
        "Isaac-Cartpole",
        [*TORCHRUN, "2", *RANK0, *RSL_CARTPOLE],
        id="every-visible-gpu",
    ),
    # 3.0: uv run isaaclab train_multigpu --task Isaac-Cartpole --dry_run, on a host where no GPU can be counted
    # (a login node): torchrun's own keyword is printed, for it to count the GPUs of the node that runs the job.
    pytest.param(
        "rlscale train_multigpu --task Isaac-Cartpole --dry_run",
        "Isaac-Cartpole",
        [*TORCHRUN, "gpu", *RANK0, *RSL_CARTPOLE],
        id="no-gpu-here",
    ),
    # 3.0, verbatim: uv run isaaclab train_multigpu --task Isaac-Reorient-KukaAllegro --num_envs 4096
    #     --max_iterations 100
    # (rlscale has no dexterous task: mapped to the closest, Rlscale-Ant; the unmapped line is in REFUSALS)
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1,2,3 rlscale train_multigpu --task Rlscale-Ant --num_envs 4096 --max_iterations 100 "
        "--dry_run",
        "Rlscale-Ant",
        [
            *(*TORCHRUN, "4", *RANK0, WORKER_SCRIPT, "--rl_library", "rsl_rl"),
            *("--task", "Rlscale-Ant", "--num_envs", "4096", "--max_iterations", "100", "--distributed"),
        ],
        id="reorient-kuka-allegro-as-ant",
    ),
    # 3.0: uv run isaaclab train_multigpu --num_gpus 2 --task Isaac-Cartpole
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1,2,3 rlscale train_multigpu --num_gpus 2 --task Isaac-Cartpole --dry_run",
        "Isaac-Cartpole",
        [*TORCHRUN, "2", *RANK0, *RSL_CARTPOLE],
        id="num-gpus-2",
    ),
    # 3.0: CUDA_VISIBLE_DEVICES=1,3 uv run isaaclab train_multigpu --task Isaac-Cartpole --num_gpus 2
    pytest.param(
        "CUDA_VISIBLE_DEVICES=1,3 rlscale train_multigpu --task Isaac-Cartpole --num_gpus 2 --dry_run",
        "Isaac-Cartpole",
        [*TORCHRUN, "2", *RANK0, *RSL_CARTPOLE],
        id="cuda-visible-devices-1-3",
    ),
    # 3.0: uv run isaaclab train_multigpu --task Isaac-Cartpole --rl_library rl_games
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --rl_library rl_games --dry_run",
        "Isaac-Cartpole",
        [
            *(*TORCHRUN, "2", *RANK0, WORKER_SCRIPT),
            *("--rl_library", "rl_games", "--task", "Isaac-Cartpole", "--distributed"),
        ],
        id="rl-games",
    ),
    # 3.0: uv run isaaclab train_multigpu --task Isaac-Cartpole --rl_library skrl
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --rl_library skrl --dry_run",
        "Isaac-Cartpole",
        [*TORCHRUN, "2", *RANK0, WORKER_SCRIPT, "--rl_library", "skrl", "--task", "Isaac-Cartpole", "--distributed"],
        id="skrl-torch",
    ),
    # 3.0: uv run isaaclab train_multigpu --task Isaac-Cartpole --rl_library skrl --ml_framework jax
    # (skrl's own launcher, no console filter: it has none)
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --rl_library skrl --ml_framework jax "
        "--dry_run",
        "Isaac-Cartpole",
        [
            *(*SKRL_JAX, "2", WORKER_SCRIPT, "--rl_library", "skrl"),
            *("--task", "Isaac-Cartpole", "--ml_framework", "jax", "--distributed"),
        ],
        id="skrl-jax",
    ),
    # 3.0 (multi-node, node 0): uv run isaaclab train_multigpu --task Isaac-Cartpole --nnodes 2 --node_rank 0
    #     --master_addr <ip> --master_port <port>
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --nnodes 2 --node_rank 0 "
        "--master_addr 10.0.0.1 --master_port 29500 --dry_run",
        "Isaac-Cartpole",
        [
            *(*TORCHRUN, "2", "--nnodes", "2", "--node_rank", "0", "--master_addr", "10.0.0.1"),
            *("--master_port", "29500", *RANK0, WORKER_SCRIPT, "--rl_library", "rsl_rl"),
            *("--task", "Isaac-Cartpole", "--distributed"),
        ],
        id="multinode-static-node0",
    ),
    # 3.0 (multi-node, node 1): the same with --node_rank 1
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --nnodes 2 --node_rank 1 "
        "--master_addr 10.0.0.1 --master_port 29500 --dry_run",
        "Isaac-Cartpole",
        [
            *(*TORCHRUN, "2", "--nnodes", "2", "--node_rank", "1", "--master_addr", "10.0.0.1"),
            *("--master_port", "29500", *RANK0, WORKER_SCRIPT, "--rl_library", "rsl_rl"),
            *("--task", "Isaac-Cartpole", "--distributed"),
        ],
        id="multinode-static-node1",
    ),
    # 3.0 (elastic rendezvous): uv run isaaclab train_multigpu --task Isaac-Cartpole --nnodes 2 --node_rank 0
    #     --rdzv_backend c10d --rdzv_endpoint host:port --rdzv_id <id>
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --nnodes 2 --node_rank 0 "
        "--rdzv_backend c10d --rdzv_endpoint host0:29400 --rdzv_id job42 --dry_run",
        "Isaac-Cartpole",
        [
            *(*TORCHRUN, "2", "--nnodes", "2", "--node_rank", "0", "--rdzv_backend", "c10d"),
            *("--rdzv_endpoint", "host0:29400", "--rdzv_id", "job42", *RANK0, WORKER_SCRIPT),
            *("--rl_library", "rsl_rl", "--task", "Isaac-Cartpole", "--distributed"),
        ],
        id="multinode-c10d",
    ),
    # 3.0 (skrl JAX, multi-node): uv run isaaclab train_multigpu --task Isaac-Cartpole --rl_library skrl
    #     --ml_framework jax --nnodes 2 --node_rank 0 --coordinator_address <ip>:<port>
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --rl_library skrl --ml_framework jax "
        "--nnodes 2 --node_rank 0 --coordinator_address 10.0.0.1:5000 --dry_run",
        "Isaac-Cartpole",
        [
            *(*SKRL_JAX, "2", "--nnodes", "2", "--node_rank", "0", "--coordinator_address", "10.0.0.1:5000"),
            *(WORKER_SCRIPT, "--rl_library", "skrl", "--task", "Isaac-Cartpole", "--ml_framework", "jax"),
            "--distributed",
        ],
        id="multinode-skrl-jax",
    ),
    # 3.0: uv run isaaclab train_multigpu --task Isaac-Cartpole --log_all_ranks   (no console filter; every rank's
    # lines through torchrun's tee, prefixed with the rank)
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --log_all_ranks --dry_run",
        "Isaac-Cartpole",
        [*TORCHRUN, "2", "--tee", "3", *RSL_CARTPOLE],
        id="log-all-ranks",
    ),
    # 3.0: uv run isaaclab train_multigpu --task Isaac-Cartpole --tee 3 --log_dir /tmp/ranklogs
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --tee 3 --log_dir /tmp/ranklogs "
        "--dry_run",
        "Isaac-Cartpole",
        [
            *(*TORCHRUN, "2", "--tee", "3", "--log_dir", "/tmp/ranklogs", *RANK0, WORKER_SCRIPT),
            *("--rl_library", "rsl_rl", "--task", "Isaac-Cartpole", "--distributed"),
        ],
        id="tee-log-dir",
    ),
    # 3.0: uv run isaaclab train_multigpu --task Isaac-Cartpole agent.algorithm.learning_rate=5e-4
    #     env.episode_length_s=10 --headless   (Hydra overrides and --headless reach every rank unchanged)
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole agent.algorithm.learning_rate=5e-4 "
        "env.episode_length_s=10 --headless --dry_run",
        "Isaac-Cartpole",
        [
            *(*TORCHRUN, "2", *RANK0, WORKER_SCRIPT, "--rl_library", "rsl_rl", "--task", "Isaac-Cartpole"),
            *("agent.algorithm.learning_rate=5e-4", "env.episode_length_s=10", "--headless", "--distributed"),
        ],
        id="hydra-overrides-headless",
    ),
    # 2.1-2.3 (notes §1.9, <lib> = rsl_rl): python -m torch.distributed.run --nnodes=1 --nproc_per_node=2
    #     scripts/reinforcement_learning/rsl_rl/train.py --task=Isaac-Cartpole-v0 --headless --distributed
    # (the Isaac Lab id is an alias: forwarded as given, each rank resolves it to Isaac-Cartpole; the given
    # --distributed keeps its place and is not added twice)
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --nnodes=1 --nproc_per_node=2 --task=Isaac-Cartpole-v0 "
        "--headless --distributed --dry_run",
        "Isaac-Cartpole",
        [
            *(*TORCHRUN, "2", "--nnodes", "1", *RANK0, WORKER_SCRIPT, "--rl_library", "rsl_rl"),
            *("--task=Isaac-Cartpole-v0", "--headless", "--distributed"),
        ],
        id="2x-torchrun",
    ),
    # 1.0, verbatim: python -m torch.distributed.run --nproc_per_node=2 --nnodes=2 --node_rank=0 --rdzv_id=123
    #     --rdzv_backend=c10d --rdzv_endpoint=localhost:5555 source/standalone/workflows/rl_games/train.py
    #     --task=Isaac-Cartpole-v0 --headless --distributed
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --nproc_per_node=2 --nnodes=2 --node_rank=0 --rdzv_id=123 "
        "--rdzv_backend=c10d --rdzv_endpoint=localhost:5555 --rl_library rl_games --task=Isaac-Cartpole-v0 "
        "--headless --distributed --dry_run",
        "Isaac-Cartpole",
        [
            *(*TORCHRUN, "2", "--nnodes", "2", "--node_rank", "0", "--rdzv_backend", "c10d"),
            *("--rdzv_endpoint", "localhost:5555", "--rdzv_id", "123", *RANK0, WORKER_SCRIPT),
            *("--rl_library", "rl_games", "--task=Isaac-Cartpole-v0", "--headless", "--distributed"),
        ],
        id="2x-torchrun-c10d",
    ),
    # 2.1-2.3 (notes §1.9): python -m skrl.utils.distributed.jax --nnodes=1 --nproc_per_node=2
    #     scripts/reinforcement_learning/skrl/train.py --task=Isaac-Cartpole-v0 --headless --distributed
    #     --ml_framework jax
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --nnodes=1 --nproc_per_node=2 --rl_library skrl "
        "--task=Isaac-Cartpole-v0 --headless --distributed --ml_framework jax --dry_run",
        "Isaac-Cartpole",
        [
            *(*SKRL_JAX, "2", "--nnodes", "1", WORKER_SCRIPT, "--rl_library", "skrl"),
            *("--task=Isaac-Cartpole-v0", "--headless", "--distributed", "--ml_framework", "jax"),
        ],
        id="2x-skrl-jax",
    ),
]

BENCHMARKS = [
    # 3.0: uv run isaaclab benchmark training_multigpu --task Isaac-Cartpole --num_envs 4096 --max_iterations 100
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale benchmark training_multigpu --task Isaac-Cartpole --num_envs 4096 "
        "--max_iterations 100 --dry_run",
        [
            *(*TORCHRUN, "2", *RANK0, BENCH, "--workflow", "training", "--rl_library", "rsl_rl"),
            *("--task", "Isaac-Cartpole", "--num_envs", "4096", "--max_iterations", "100", "--distributed"),
        ],
        id="training",
    ),
    # 3.0 (deprecated spelling): uv run isaaclab benchmark training-multigpu --task Isaac-Cartpole --rl_library rl_games
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale benchmark training-multigpu --task Isaac-Cartpole --rl_library rl_games "
        "--dry_run",
        [
            *(*TORCHRUN, "2", *RANK0, BENCH, "--workflow", "training", "--rl_library", "rl_games"),
            *("--task", "Isaac-Cartpole", "--distributed"),
        ],
        id="training-dash-spelling",
    ),
    # 3.0: uv run isaaclab benchmark startup_multigpu --task Isaac-Cartpole --num_gpus 2
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1,2,3 rlscale benchmark startup_multigpu --task Isaac-Cartpole --num_gpus 2 --dry_run",
        [
            *(*TORCHRUN, "2", *RANK0, BENCH, "--workflow", "startup", "--rl_library", "rsl_rl"),
            *("--task", "Isaac-Cartpole", "--distributed"),
        ],
        id="startup",
    ),
    # 3.0: uv run isaaclab benchmark runtime_multigpu --task Isaac-Cartpole --num_envs 4096
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale benchmark runtime_multigpu --task Isaac-Cartpole --num_envs 4096 --dry_run",
        [
            *(*TORCHRUN, "2", *RANK0, BENCH, "--workflow", "runtime"),
            *("--task", "Isaac-Cartpole", "--num_envs", "4096", "--distributed"),
        ],
        id="runtime",
    ),
    # 3.0 (multi-node): uv run isaaclab benchmark training_multigpu --task Isaac-Cartpole --nnodes 2 --node_rank 1
    #     --master_addr <ip> --master_port <port> --headless
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale benchmark training_multigpu --task Isaac-Cartpole --nnodes 2 --node_rank 1 "
        "--master_addr 10.0.0.1 --master_port 29500 --headless --dry_run",
        [
            *(*TORCHRUN, "2", "--nnodes", "2", "--node_rank", "1", "--master_addr", "10.0.0.1"),
            *("--master_port", "29500", *RANK0, BENCH, "--workflow", "training", "--rl_library", "rsl_rl"),
            *("--task", "Isaac-Cartpole", "--headless", "--distributed"),
        ],
        id="training-multinode",
    ),
]

REFUSALS = [
    # 3.0, verbatim: uv run isaaclab train_multigpu --task Isaac-Reorient-KukaAllegro --num_envs 4096
    #     --max_iterations 100
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Reorient-KukaAllegro --num_envs 4096 "
        "--max_iterations 100 --dry_run",
        "rlscale train_multigpu",
        "--task: unknown task 'Isaac-Reorient-KukaAllegro': rlscale has no dexterous-manipulation task; "
        "closest: Rlscale-Ant",
        id="reorient-kuka-allegro",
    ),
    # 3.0: uv run isaaclab benchmark training_multigpu --task Isaac-Reorient-KukaAllegro
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale benchmark training_multigpu --task Isaac-Reorient-KukaAllegro --dry_run",
        "rlscale benchmark training_multigpu",
        "closest: Rlscale-Ant",
        id="benchmark-reorient-kuka-allegro",
    ),
    # 3.0 launcher option (notes §1.2): uv run isaaclab train_multigpu --task Isaac-Cartpole --virtual_local_rank
    # (not an rlscale option: forwarded to the ranks, whose parser refuses it)
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --virtual_local_rank --dry_run",
        "rlscale train_multigpu",
        "unrecognized arguments: --virtual_local_rank",
        id="virtual-local-rank",
    ),
    # 3.0: uv run isaaclab train_multigpu --task Isaac-Cartpole --rl_library skrl --ml_framework jax --dry_run, on a
    # host where no GPU can be counted: skrl's JAX launcher takes a number, not torchrun's gpu.
    pytest.param(
        "rlscale train_multigpu --task Isaac-Cartpole --rl_library skrl --ml_framework jax --dry_run",
        "rlscale train_multigpu",
        "needs a GPU but none is visible",
        id="skrl-jax-no-gpu-here",
    ),
    # 3.0: skrl JAX takes --coordinator_address, not torchrun's rendezvous options
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --rl_library skrl --ml_framework jax "
        "--nnodes 2 --node_rank 0 --master_addr 10.0.0.1 --master_port 29500 --dry_run",
        "rlscale train_multigpu",
        "--master_addr, --master_port: torchrun-only option(s), not accepted by skrl's JAX launcher",
        id="skrl-jax-master-addr",
    ),
    # 3.0: --coordinator_address only goes with skrl JAX
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --nnodes 2 --node_rank 0 "
        "--coordinator_address 10.0.0.1:5000 --dry_run",
        "rlscale train_multigpu",
        "--coordinator_address=10.0.0.1:5000 is only for --rl_library skrl --ml_framework jax",
        id="coordinator-address-torchrun",
    ),
    # 3.0: uv run isaaclab benchmark training_multigpu --task Isaac-Cartpole --rl_library skrl --ml_framework jax
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale benchmark training_multigpu --task Isaac-Cartpole --rl_library skrl "
        "--ml_framework jax --dry_run",
        "rlscale benchmark training_multigpu",
        "skrl with --ml_framework jax is not supported",
        id="benchmark-skrl-jax",
    ),
    # 3.0: uv run isaaclab benchmark training_multigpu --task Isaac-Cartpole --video
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0,1 rlscale benchmark training_multigpu --task Isaac-Cartpole --video --dry_run",
        "rlscale benchmark training_multigpu",
        "--video: rlscale has no renderer",
        id="benchmark-video",
    ),
]


class TestTrainMultigpu:
    @pytest.mark.parametrize(("line", "task", "expected"), LAUNCHES)
    def test_dry_run(self, monkeypatch, capsys, line, task, expected):
        """Exit 0, exactly one line on stdout (the resolved command), nothing on stderr; the ranks train ``task``."""
        result = rlscale(line, monkeypatch, capsys)
        assert (result.code, result.err) == (0, "")
        assert result.argv == expected
        assert resolve_task_id(forwarded_task(result.argv)) == task

    def test_skrl_jax_log_all_ranks_is_a_note(self, monkeypatch, capsys):
        """3.0: ... --rl_library skrl --ml_framework jax --log_all_ranks: accepted, with a one-line note on stderr."""
        line = (
            "CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --rl_library skrl "
            "--ml_framework jax --log_all_ranks --dry_run"
        )
        result = rlscale(line, monkeypatch, capsys)
        assert result.code == 0
        assert result.err == "[WARN] --log_all_ranks has no effect with skrl's JAX launcher: every rank prints.\n"
        assert result.argv == [
            *(*SKRL_JAX, "2", WORKER_SCRIPT, "--rl_library", "skrl"),
            *("--task", "Isaac-Cartpole", "--ml_framework", "jax", "--distributed"),
        ]

    def test_dash_spelling(self, monkeypatch, capsys):
        """``train-multigpu`` is the same command as ``train_multigpu``."""
        line = "CUDA_VISIBLE_DEVICES=0,1 rlscale {} --task Isaac-Cartpole --dry_run"
        assert rlscale(line.format("train-multigpu"), monkeypatch, capsys) == rlscale(
            line.format("train_multigpu"), monkeypatch, capsys
        )

    def test_console_entry_point(self):
        """The installed ``python -m rlscale`` prints the same command as the in-process dispatcher."""
        env = {"PYTHONPATH": str(SRC), "CUDA_VISIBLE_DEVICES": "0,1"}
        argv = ["train_multigpu", "--task", "Isaac-Cartpole", "--num_gpus", "2", "--dry_run"]
        done = rlscale_command.rlscale(*argv, env=env, timeout=60)  # a child, where rlscale() runs in process
        assert (done.returncode, without_binding_plan(done.stderr)) == (0, "")
        assert shlex.split(done.stdout) == [*TORCHRUN, "2", *RANK0, *RSL_CARTPOLE]


class TestBenchmarks:
    @pytest.mark.parametrize(("line", "expected"), BENCHMARKS)
    def test_dry_run(self, monkeypatch, capsys, line, expected):
        """Each ``*_multigpu`` benchmark resolves to one torchrun command whose ranks run the benchmark worker."""
        result = rlscale(line, monkeypatch, capsys)
        assert (result.code, result.err) == (0, "")
        assert result.argv == expected


class TestRefusals:
    @pytest.mark.parametrize(("line", "prog", "message"), REFUSALS)
    def test_one_line_exit_2(self, monkeypatch, capsys, line, prog, message):
        """What rlscale cannot run is refused before anything starts: exit 2, one stderr line, nothing on stdout."""
        result = rlscale(line, monkeypatch, capsys)
        assert (result.code, result.argv) == (2, [])
        assert result.err.count("\n") == 1 and result.err.startswith(f"{prog}: error: ")
        assert message in result.err


class TestSingleGpuTrain:
    def test_train_cartpole(self):
        """3.0, verbatim: uv run isaaclab train --task Isaac-Cartpole (rlscale train has no --dry_run: full check).

        With the 2.x id, ``--headless`` and the Hydra overrides of the multi-GPU cases, resolved as a rank resolves
        them: the alias names Isaac-Cartpole, the agent override lands in the agent config, the env override in the
        task config, typed.
        """
        from rlscale.run.spec import resolve_spec

        spec = resolve_spec(["--task", "Isaac-Cartpole"])
        assert (spec.task, spec.task_alias, spec.rl_library, spec.distributed) == (
            "Isaac-Cartpole",
            None,
            "rsl_rl",
            False,
        )
        argv = [
            "--task=Isaac-Cartpole-v0",
            "--headless",
            "agent.algorithm.learning_rate=5e-4",
            "env.episode_length_s=10",
        ]
        spec = resolve_spec(argv)
        assert (spec.task, spec.task_alias, spec.headless) == ("Isaac-Cartpole", "Isaac-Cartpole-v0", True)
        assert spec.agent_cfg["algorithm"]["learning_rate"] == 5e-4
        assert spec.typed_env_overrides() == {"episode_length_s": 10.0}

    @pytest.mark.parametrize(
        ("library", "entry_point"),
        [
            ("rsl_rl", "rsl_rl_cfg_entry_point"),
            ("rl_games", "rl_games_cfg_entry_point"),
            ("skrl", "skrl_cfg_entry_point"),
        ],
    )
    def test_agent_entry_point(self, monkeypatch, capsys, library, entry_point):
        """Isaac Lab's ``--agent <library>_cfg_entry_point`` names the library's default agent config."""
        line = (
            f"CUDA_VISIBLE_DEVICES=0,1 rlscale train_multigpu --task Isaac-Cartpole --rl_library {library} "
            f"--agent {entry_point} --dry_run"
        )
        result = rlscale(line, monkeypatch, capsys)
        assert (result.code, result.err) == (0, "")
        tail = [WORKER_SCRIPT, "--rl_library", library, "--task", "Isaac-Cartpole", "--agent", entry_point]
        assert result.argv[-8:] == [*tail, "--distributed"]
