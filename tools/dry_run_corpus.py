"""Before/after check of a behaviour-preserving refactor: the launcher's dry runs, its refusals and the study's plan.

Runs a fixed corpus of command lines (``rlscale`` dry runs and bad inputs, ``snakemake -n -p`` of the default study on
CPU and with two GPUs said visible) and writes each one's exit status, stdout and stderr to one text file, with the
checkout's path and the interpreter replaced by placeholders. Snakemake's output keeps its lines but not their order
(jobs and their reasons come in set order), nor its dates and run ids. Two checkouts compare with ``diff``:

    python tools/dry_run_corpus.py > before.txt     # on the old commit
    python tools/dry_run_corpus.py > after.txt      # on the new one
    diff before.txt after.txt
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAUNCH = ["train_multigpu", "--task", "Isaac-Cartpole-Direct", "--dry_run"]
CPU2 = [*LAUNCH, "--device", "cpu", "--num_gpus", "2"]
BENCH = ["benchmark", "training_multigpu", "--task", "Isaac-Cartpole-Direct", "--dry_run", "--device", "cpu"]

# (name, argv after `rlscale`, extra environment)
RLSCALE_CASES: list[tuple[str, list[str], dict[str, str]]] = [
    ("default num_gpus", LAUNCH, {}),
    ("cpu 2", CPU2, {}),
    ("cpu 3 rl_games", [*LAUNCH, "--device", "cpu", "--num_gpus", "3", "--rl_library", "rl_games"], {}),
    ("cpu skrl", [*CPU2, "--rl_library", "skrl"], {}),
    ("skrl jax", [*CPU2, "--rl_library", "skrl", "--ml_framework", "jax"], {}),
    (
        "skrl jax coordinator",
        [*CPU2, "--rl_library", "skrl", "--ml_framework", "jax", "--coordinator_address", "127.0.0.1:5000"],
        {},
    ),
    ("cuda 2", [*LAUNCH, "--device", "cuda", "--num_gpus", "2"], {}),
    ("cuda:1", [*LAUNCH, "--device", "cuda:1", "--num_gpus", "1"], {}),
    ("cpu auto", [*LAUNCH, "--device", "cpu", "--num_gpus", "auto"], {}),
    (
        "two nodes static",
        [*CPU2, "--nnodes", "2", "--node_rank", "1", "--master_addr", "10.0.0.1", "--master_port", "29501"],
        {},
    ),
    (
        "two nodes c10d",
        [*CPU2, "--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint", "10.0.0.1:29400", "--rdzv_id", "7"],
        {},
    ),
    ("elastic", [*CPU2, "--nnodes", "1:2", "--rdzv_backend", "c10d", "--rdzv_endpoint", "10.0.0.1:29400"], {}),
    ("logs", [*CPU2, "--log_all_ranks", "--tee", "3", "--log_dir", "/tmp/rlscale-corpus-logs"], {}),
    ("torchrun options", [*CPU2, "--max_restarts", "0", "--monitor_interval", "0.5", "--start_method", "spawn"], {}),
    (
        "train options",
        [*CPU2, "--num_envs", "64", "--max_iterations", "3", "--seed", "7", "agent.algorithm.learning_rate=0.001"],
        {},
    ),
    ("env override", [*CPU2, "env.episode_length_s=3.0"], {}),
    ("lr scaling", [*CPU2, "--lr_scaling", "linear", "--sync_normalizer"], {}),
    ("ant", ["train_multigpu", "--task", "Rlscale-Ant", "--dry_run", "--device", "cpu", "--num_gpus", "2"], {}),
    ("isaac alias", ["train_multigpu", "--task", "Isaac-Cartpole", "--dry_run", "--device", "cpu"], {}),
    ("benchmark training", [*BENCH, "--num_gpus", "2"], {}),
    ("benchmark training seeds", [*BENCH, "--num_gpus", "2", "--seeds", "1,2,3"], {}),
    (
        "benchmark runtime",
        ["benchmark", "runtime_multigpu", "--task", "Isaac-Cartpole-Direct", "--dry_run", "--device", "cpu"],
        {},
    ),
    (
        "benchmark startup",
        ["benchmark", "startup_multigpu", "--task", "Isaac-Cartpole-Direct", "--dry_run", "--device", "cpu"],
        {},
    ),
    # Refusals: one line, exit 2.
    ("bad num_gpus", [*LAUNCH, "--device", "cpu", "--num_gpus", "zero"], {}),
    ("zero num_gpus", [*LAUNCH, "--device", "cpu", "--num_gpus", "0"], {}),
    ("num_gpus vs nproc", [*CPU2, "--nproc_per_node", "3"], {}),
    ("unknown task", ["train_multigpu", "--task", "Nope-v0", "--dry_run", "--device", "cpu"], {}),
    ("isaac go1", ["train_multigpu", "--task", "Isaac-Velocity-Flat-Unitree-Go1-v0", "--dry_run"], {}),
    ("unknown library", [*CPU2, "--rl_library", "sb3"], {}),
    ("bad device", [*LAUNCH, "--device", "gpu"], {}),
    ("cuda on cpu host", ["train", "--task", "Isaac-Cartpole-Direct", "--device", "cuda", "--max_iterations", "1"], {}),
    ("negative envs", [*CPU2, "--num_envs", "-4"], {}),
    ("bad port", [*CPU2, "--nnodes", "2", "--master_addr", "10.0.0.1", "--master_port", "99999"], {}),
    ("node rank", [*CPU2, "--nnodes", "2", "--node_rank", "2", "--master_addr", "10.0.0.1"], {}),
    ("unknown agent key", [*CPU2, "agent.algorithm.no_such_key=1"], {}),
    ("agent type", [*CPU2, "agent.algorithm.learning_rate=fast"], {}),
    ("env range", [*CPU2, "env.episode_length_s=-1"], {}),
    ("unknown flag", [*CPU2, "--no_such_flag"], {}),
    ("negative seed", [*CPU2, "--seed", "-1"], {}),
    ("coordinator without jax", [*CPU2, "--coordinator_address", "127.0.0.1:5000"], {}),
    ("visible devices on cpu torch", [*LAUNCH, "--num_gpus", "2"], {"CUDA_VISIBLE_DEVICES": "0,1"}),
    ("visible -1", [*LAUNCH, "--num_gpus", "auto"], {"CUDA_VISIBLE_DEVICES": "-1"}),
    ("bad fault spec", [*CPU2], {"RLSCALE_FAULT": "crash:rank=5:iteration=1"}),
    ("bad lease timeout", [*CPU2], {"RLSCALE_LEASE_TIMEOUT_S": "soon"}),
    ("benchmark bad workflow", ["benchmark", "memory_multigpu", "--task", "Isaac-Cartpole-Direct"], {}),
    ("benchmark runtime library", [*BENCH[:1], "runtime_multigpu", *BENCH[2:], "--rl_library", "skrl"], {}),
    ("train bad library", ["train", "--task", "Isaac-Cartpole-Direct", "--rl_library", "sb3"], {}),
    ("train env type", ["train", "--task", "Isaac-Cartpole-Direct", "--device", "cpu", "env.episode_length_s=x"], {}),
    ("check_task unknown", ["check_task", "Nope-v0"], {}),
    ("evaluate missing", ["evaluate", "--checkpoint", "/nonexistent/model_1.pt"], {}),
]

SNAKEMAKE_CASES: list[tuple[str, list[str], dict[str, str]]] = [
    ("study on cpu", ["--config", "device=cpu"], {}),
    ("study on two gpus", ["--config", "device=cuda", "--resources", "gpu=2"], {"CUDA_VISIBLE_DEVICES": "0,1"}),
    ("study with a bad world size", ["--config", "device=cpu", "world_sizes=[0]"], {}),
]

SNAKEMAKE_VOLATILE = re.compile(r"^(\[\w{3} \w{3} .*\]|\s*(reason|Date|Workflow ID): .*|.*\.snakemake/log/.*)$")


def normalise(text: str) -> str:
    bin_dir = str(Path(sys.executable).parent)
    return text.replace(bin_dir, "<BIN>").replace(str(ROOT), "<ROOT>")


def stable_lines(text: str) -> str:
    lines = sorted(line for line in text.splitlines() if not SNAKEMAKE_VOLATILE.match(line))
    return "".join(f"{line}\n" for line in lines)


def run(argv: list[str], extra_env: dict[str, str], *, keep_order: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLSCALE_", "CUDA_VISIBLE"))}
    env.update(extra_env, OMP_NUM_THREADS="1", COLUMNS="120")
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    stdout, stderr = normalise(done.stdout), normalise(done.stderr)
    if not keep_order:
        stdout, stderr = stable_lines(stdout), stable_lines(stderr)
    return f"exit {done.returncode}\n--- stdout\n{stdout}--- stderr\n{stderr}"


def main() -> None:
    bin_dir = Path(sys.executable).parent
    for name, argv, extra_env in RLSCALE_CASES:
        print(f"=== rlscale {name}: {' '.join(argv)} {extra_env or ''}")
        print(run([str(bin_dir / "rlscale"), *argv], extra_env))
    for name, argv, extra_env in SNAKEMAKE_CASES:
        print(f"=== snakemake {name}: {' '.join(argv)} {extra_env or ''}")
        snakemake = [str(bin_dir / "snakemake"), "--workflow-profile", "workflow/profiles/default", "-n", "-p"]
        print(run([*snakemake, *argv], extra_env, keep_order=False))


if __name__ == "__main__":
    main()
