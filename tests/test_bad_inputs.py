"""Bad-input catalogue: one table of inputs rlscale must refuse, and the contract every refusal keeps.

The contract: exactly one error line that names the flag or key, the value seen and the fix; exit code 2; nothing
written (the case's fresh working directory, where the default ``--log_root`` and ``--output_path`` point, has the
same tree before and after). Cases run ``rlscale.cli.main`` in-process (what ``python -m rlscale`` runs, minus the
interpreter start), a few as real subprocesses, and the study-config cases through ``validated_config``, the function
``workflow/rules/common.smk`` runs at parse time. Two study cases go through ``snakemake -n`` itself: Snakemake exits
1 (its own code for a ``WorkflowError``; rlscale does not choose it) and prints the same one ``config:`` line.
"""

from __future__ import annotations

import ast
import copy
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from rlscale_command import rlscale

from rlscale.cli import main as rlscale_main
from rlscale.study.config import StudyConfigError, validated_config

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config" / "config.yaml"
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
BASE_ENV = {
    "CUDA_VISIBLE_DEVICES": "0,1",  # the launcher sees two GPUs, whatever this machine has
    "OMP_NUM_THREADS": "1",
    **dict.fromkeys(("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "RLSCALE_INJECT_FAULT", "WORLD_SIZE", "JAX_WORLD_SIZE")),
}
"""Environment of every case before its own changes (None unsets a variable)."""


@dataclass(frozen=True)
class Case:
    """One bad input."""

    id: str
    command: str
    """``rlscale`` arguments as a shell line; for ``study``/``snakemake`` cases, the YAML overlay."""
    needs: tuple[str, ...]
    """Substrings of the one error line: the flag or key, the value seen, the fix."""
    env: dict[str, str | None] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    """Fixtures made in the working directory first: ``name/`` a folder, ``name`` a file of garbage bytes."""
    how: str = "inproc"
    """``inproc`` (``rlscale.cli.main``), ``subprocess`` (``python -m rlscale``), ``study`` or ``snakemake``."""


def case(id: str, command: str, *needs: str, **kwargs) -> Case:
    return Case(id, command, needs, **kwargs)


TRAIN = "train --task Isaac-Cartpole --device cpu"
MULTI = "train_multigpu --task Isaac-Cartpole --dry_run"
JAX = "train_multigpu --task Isaac-Cartpole --rl_library skrl --ml_framework jax --dry_run"
BENCH = "--task Isaac-Cartpole --device cpu"
H200_BUNDLES = ROOT / "results/h200x2/benchmark/training/Isaac-Cartpole-Direct"
MODEL_RESULTS = ROOT / "results/h200x2/scaling_model"
PREDICT = f"benchmark predict --bundle {H200_BUNDLES}/rsl_rl/ws1/envs4096/seed1.json --gpus_per_node 2"
STATED = "--latency_us 10 --bandwidth_gbps 100"
NCCL_BOTH = {"NCCL_P2P_DISABLE": "1", "NCCL_P2P_LEVEL": "NVL"}

CATALOGUE = [
    # --- the dispatcher
    case("cli-unknown-command", "trian --task Isaac-Cartpole", "'trian'", "commands: train"),
    # --- rlscale train
    case("train-unknown-task", "train --task Isaac-cartpole --device cpu", "--task", "'Isaac-cartpole'",
         "known tasks: Isaac-Cartpole"),
    case("train-unknown-task-process", "train --task Isaac-cartpole --device cpu", "--task", "'Isaac-cartpole'",
         "known tasks: Isaac-Cartpole", how="subprocess"),
    case("train-missing-task", "train --device cpu", "required", "--task"),
    case("train-misspelt-task", "train --tsk Isaac-Cartpole --device cpu", "unrecognized", "--tsk",
         "did you mean --task?"),
    case("train-task-without-equivalent", "train --task Isaac-Ant-v0 --device cpu", "'Isaac-Ant-v0'",
         "closest: Rlscale-Ant (`rlscale list_tasks`)"),
    case("train-unknown-flag", f"{TRAIN} --num_env 8", "unrecognized", "--num_env 8", "did you mean --num_envs?"),
    case("train-unknown-flag-far", f"{TRAIN} --colour red", "unrecognized", "--colour red", "rlscale train --help"),
    case("train-unknown-library", f"{TRAIN} --rl_library sb3", "--rl_library", "'sb3'", "rsl_rl, rl_games, skrl"),
    case("train-unknown-framework", f"{TRAIN} --ml_framework tf", "--ml_framework", "'tf'", "torch, jax"),
    case("train-jax-needs-skrl", f"{TRAIN} --rl_library rl_games --ml_framework jax", "--ml_framework jax",
         "rl_games", "needs --rl_library skrl"),
    case("train-num-envs-zero", f"{TRAIN} --num_envs 0", "--num_envs", "got 0", "at least 1"),
    case("train-num-envs-text", f"{TRAIN} --num_envs abc", "--num_envs", "'abc'", "invalid int"),
    case("train-iterations-negative", f"{TRAIN} --max_iterations -5", "--max_iterations", "-5", "at least 1"),
    case("train-iterations-zero", f"{TRAIN} --max_iterations 0", "--max_iterations", "got 0", "at least 1"),
    case("train-env-num-envs", f"{TRAIN} env.num_envs=8", "env.num_envs=8", "pass --num_envs 8 instead"),
    case("train-seed-negative", f"{TRAIN} --seed -1", "--seed", "-1", "non-negative"),
    case("train-seed-float", f"{TRAIN} --seed 1.5", "--seed", "'1.5'", "invalid int"),
    case("train-device-unknown", "train --task Isaac-Cartpole --device tpu", "--device", "'tpu'",
         "cpu, cuda or cuda:N"),
    case("train-device-index", "train --task Isaac-Cartpole --device cuda:x", "--device", "'cuda:x'", "cuda:N"),
    case("train-device-no-cuda", "train --task Isaac-Cartpole --device cuda", "--device cuda",
         "no CUDA device is available", "use --device cpu", env={"CUDA_VISIBLE_DEVICES": ""}, how="subprocess"),
    case("train-resume-missing", f"{TRAIN} --resume model_9.pt", "--resume model_9.pt", "no such checkpoint file"),
    case("train-resume-unreadable", f"{TRAIN} --resume model_3.pt", "--resume model_3.pt",
         "cannot be loaded as weights only", "pass a checkpoint that the library wrote", files=("model_3.pt",)),
    case("train-resume-directory", f"{TRAIN} --resume checkpoints", "--resume checkpoints", "is a directory",
         "name the checkpoint file", files=("checkpoints/",)),
    case("train-agent-unknown-key", f"{TRAIN} --agent algorithm.lr=1", "--agent algorithm.lr=1",
         "no key 'algorithm.lr'", "keys here:", "learning_rate"),
    case("train-agent-unknown-section", f"{TRAIN} --agent algo.learning_rate=1", "--agent algo.learning_rate=1",
         "no section 'algo'", "sections here:", "algorithm"),
    case("train-agent-malformed", f"{TRAIN} --agent learning_rate", "--agent learning_rate", "expected KEY=VALUE"),
    case("train-distributed-alone", f"{TRAIN} --distributed", "--distributed", "use `rlscale train_multigpu`"),
    case("train-sync-interval-negative", f"{TRAIN} --sync_check_interval -1", "--sync_check_interval", "-1",
         "non-negative"),
    case("train-run-name-path", f"{TRAIN} --run_name ../escape", "--run_name", "'../escape'",
         "drop the path separators"),
    case("train-run-name-empty", f"{TRAIN} --run_name ''", "--run_name ''", "is empty",
         "drop --run_name for an unnamed run"),
    case("train-num-envs-too-many", f"{TRAIN} --num_envs 100000000000", "--num_envs 100000000000",
         "Isaac-Cartpole needs at least", "this host's RAM has", "envs could fit"),
    case("train-num-envs-beyond-the-build", "train --task Pendulum-Swingup --device cpu --num_envs 100000000000",
         "--num_envs 100000000000", "cpu ran out of memory building Pendulum-Swingup", "use fewer envs",
         how="subprocess"),  # a plug-in that states no footprint: its build finds it, and the run is taken back
    case("train-log-root-is-file", f"{TRAIN} --log_root results.txt", "--log_root results.txt", "is a file",
         "name a directory", files=("results.txt",)),
    # --- rlscale train_multigpu: the launcher's own options
    case("multi-num-gpus-zero", f"{MULTI} --num_gpus 0", "--num_gpus", "'0'", "integer >= 1"),
    case("multi-num-gpus-negative", f"{MULTI} --num_gpus -1", "--num_gpus", "'-1'", "integer >= 1"),
    case("multi-num-gpus-text", f"{MULTI} --num_gpus abc", "--num_gpus", "'abc'", "integer >= 1"),
    case("multi-num-gpus-process", f"{MULTI} --num_gpus 0", "--num_gpus", "'0'", "integer >= 1", how="subprocess"),
    case("multi-num-gpus-too-many", f"{MULTI} --num_gpus 3", "--num_gpus/--nproc_per_node=3",
         "2 GPU(s) visible", "expose more devices via CUDA_VISIBLE_DEVICES"),
    case("multi-unknown-library", f"{MULTI} --rl_library sb3", "--rl_library", "'sb3'", "choose from"),
    case("multi-start-method", f"{MULTI} --start_method thread", "--start_method", "'thread'", "choose from"),
    case("multi-master-port-range", f"{MULTI} --master_port 70000", "--master_port", "'70000'", "1..65535"),
    case("multi-master-port-text", f"{MULTI} --master_port http", "--master_port", "'http'", "1..65535"),
    case("multi-nnodes-zero", f"{MULTI} --nnodes 0", "--nnodes", "'0'", "use N, or MIN:MAX"),
    case("multi-nnodes-bad-range", f"{MULTI} --nnodes 3:2", "--nnodes", "'3:2'", "use N, or MIN:MAX"),
    case("multi-nnodes-without-address", f"{MULTI} --nnodes 2", "--nnodes=2", "--master_addr HOST",
         "--rdzv_endpoint HOST:PORT"),
    case("multi-node-rank-out-of-range", f"{MULTI} --nnodes 2 --node_rank 2 --master_addr node0", "--node_rank",
         "'2'", "node ranks run 0..1"),
    case("multi-coordinator-without-jax", f"{MULTI} --coordinator_address node0:29500", "--coordinator_address",
         "node0:29500", "torchrun takes --master_addr"),
    case("multi-coordinator-no-port", f"{JAX} --coordinator_address node0", "--coordinator_address", "'node0'",
         "HOST:PORT"),
    case("multi-coordinator-port-range", f"{JAX} --coordinator_address node0:99999", "--coordinator_address",
         "'node0:99999'", "1..65535"),
    case("multi-jax-torchrun-only-flag", f"{JAX} --tee 3", "--tee", "torchrun-only", "drop them"),
    case("multi-jax-multinode-no-coordinator", f"{JAX} --nnodes 2", "--nnodes=2", "skrl JAX",
         "--coordinator_address HOST:PORT"),
    # --- rlscale train_multigpu: the ranks' arguments, checked once by the launcher
    case("multi-rank-unknown-framework", f"{MULTI} --ml_framework tf", "rlscale train_multigpu: error:",
         "--ml_framework", "'tf'", "torch, jax"),
    case("multi-rank-seed-negative", f"{MULTI} --seed -3", "--seed", "-3", "non-negative"),
    case("multi-rank-unknown-flag", f"{MULTI} --num_env 8", "unrecognized", "--num_env 8",
         "did you mean --num_envs?"),
    case("multi-launcher-unknown-flag", f"{MULTI} --nproc_per_nod 2", "unrecognized", "--nproc_per_nod 2",
         "did you mean --nproc_per_node?"),
    case("multi-rank-num-envs-too-many", "train_multigpu --task Isaac-Cartpole --device cpu --num_gpus 2 "
         "--num_envs 100000000000", "--num_envs 100000000000", "x 2 ranks", "this host's RAM has",
         "envs per rank could fit"),
    case("multi-rank-unknown-task", "train_multigpu --task Isaac-cartpole --device cpu --num_gpus 2", "--task",
         "'Isaac-cartpole'", "known tasks: Isaac-Cartpole"),
    case("multi-rank-resume-missing", "train_multigpu --task Isaac-Cartpole --device cpu --resume model_9.pt",
         "--resume model_9.pt", "no such checkpoint file"),
    # --- the environment of a launch
    case("env-cuda-visible-empty-entry", MULTI, "CUDA_VISIBLE_DEVICES='0,,1'", "empty entry",
         "e.g. CUDA_VISIBLE_DEVICES=0,1", env={"CUDA_VISIBLE_DEVICES": "0,,1"}),
    case("env-no-gpu-visible", MULTI, "needs a GPU", "CUDA_VISIBLE_DEVICES=''", "pass --device cpu",
         env={"CUDA_VISIBLE_DEVICES": ""}),
    case("env-nccl-p2p-both", MULTI, "NCCL_P2P_DISABLE='1'", "NCCL_P2P_LEVEL='NVL'", "mutually exclusive",
         "unset one", env=NCCL_BOTH),
    case("env-nccl-p2p-both-probe", "nccl_probe --num_gpus 2 --dry_run", "NCCL_P2P_DISABLE='1'",
         "NCCL_P2P_LEVEL='NVL'", "unset one", env=NCCL_BOTH),
    case("env-fault-unknown-kind", TRAIN, "RLSCALE_INJECT_FAULT='explode:rank=1,iteration=3'",
         "crash, hang, desync", env={"RLSCALE_INJECT_FAULT": "explode:rank=1,iteration=3"}),
    case("env-fault-malformed-launch", MULTI, "RLSCALE_INJECT_FAULT='crash:rank=one'",
         "e.g. crash:rank=1,iteration=3", env={"RLSCALE_INJECT_FAULT": "crash:rank=one"}),
    # --- the experiment tracker
    case("train-logger-unknown", f"{TRAIN} --logger mlflow", "--logger", "'mlflow'", "tensorboard, wandb"),
    case("train-logger-neptune", f"{TRAIN} --logger neptune", "--logger neptune", "not supported",
         "use --logger wandb"),
    case("train-log-project-without-wandb", f"{TRAIN} --log_project_name mine", "--log_project_name",
         "pass --logger wandb"),
    case("train-log-project-bad-char", f"{TRAIN} --logger wandb --log_project_name a/b", "--log_project_name",
         "'a/b'", "refuses any of"),
    case("multi-logger-unknown", f"{MULTI} --logger mlflow", "rlscale train_multigpu", "--logger", "'mlflow'",
         "tensorboard, wandb"),
    case("bench-startup-logger", f"benchmark startup {BENCH} --logger wandb", "--logger", "startup",
         "without a tracker run"),
    case("bench-peer-logger", f"benchmark training {BENCH} --peer --logger wandb", "--peer", "--logger",
         "drop one of the two"),
    # --- rlscale nccl_probe
    case("probe-num-gpus-zero", "nccl_probe --num_gpus 0", "--num_gpus", "'0'", "integer >= 1"),
    case("probe-unknown-flag", "nccl_probe --num_gpus 2 --device cpu --task Isaac-Cartpole", "rlscale nccl_probe",
         "unrecognized", "--task Isaac-Cartpole", "--help"),
    case("probe-device", "nccl_probe --num_gpus 2 --device tpu", "--device", "'tpu'", "cpu, cuda or cuda:N"),
    case("probe-sizes-unit", "nccl_probe --num_gpus 2 --device cpu --sizes 4kb", "--sizes", "'4kb'", "KiB, MiB"),
    case("probe-sizes-odd", "nccl_probe --num_gpus 2 --device cpu --sizes 6", "--sizes", "'6'", "multiple of 4"),
    case("probe-repeats", "nccl_probe --num_gpus 2 --device cpu --sizes 4KiB --repeats 0", "--repeats", "0",
         "at least 1"),
    case("probe-output-alone", "nccl_probe --num_gpus 2 --device cpu --output sweep.json", "--output", "--sizes"),
    case("probe-output-folder", "nccl_probe --num_gpus 2 --device cpu --sizes 4KiB --output out", "--output out",
         "directory", files=("out/",)),
    # --- rlscale benchmark predict
    case("predict-no-cost", f"{PREDICT} --allreduce_bytes 1e6 --allreduce_calls 10", "--probe", "--latency_us",
         "--bandwidth_gbps"),
    case("predict-two-costs", f"{PREDICT} {STATED} --probe sweep.json --allreduce_bytes 1 --allreduce_calls 1",
         "--probe", "--latency_us", "not both"),
    case("predict-bandwidth-zero", f"{PREDICT} --latency_us 10 --bandwidth_gbps 0 --allreduce_bytes 1 "
         "--allreduce_calls 1", "bandwidth", "positive"),
    case("predict-bytes-nan", f"{PREDICT} {STATED} --allreduce_bytes nan --allreduce_calls 1", "--allreduce_bytes",
         "at least 0"),
    case("predict-no-volume", f"{PREDICT} {STATED}", "--collectives", "--allreduce_bytes",
         "1-rank bundle calls no collective"),
    case("predict-nodes-alone", f"{PREDICT} {STATED} --allreduce_bytes 1 --allreduce_calls 1 --nodes 2",
         "--nodes 2", "--inter_node_bandwidth_gbps"),
    case("predict-two-rank-bundle", f"{PREDICT.replace('ws1', 'ws2')} {STATED} --allreduce_bytes 1 "
         "--allreduce_calls 1", "--bundle", "1-rank", "2 ranks"),
    case("predict-collectives-1.0", f"{PREDICT} {STATED} --collectives {H200_BUNDLES}/rsl_rl/ws2/envs4096/seed1.json",
         "--collectives", "`ranks`", "schema 1.0"),
    case("predict-collectives-library", f"{PREDICT} {STATED} --collectives {MODEL_RESULTS}/collectives/skrl.json",
         "--collectives", "run.framework", "'skrl'", "'rsl_rl'"),
    case("predict-bad-bundle", f"benchmark predict --bundle garbage {STATED} --allreduce_bytes 1 --allreduce_calls 1 "
         "--gpus_per_node 2", "--bundle garbage", files=("garbage",)),
    case("predict-bad-probe", f"{PREDICT} --probe garbage --allreduce_bytes 1 --allreduce_calls 1", "garbage",
         "no probe sweep", files=("garbage",)),
    case("predict-output-folder", f"{PREDICT} {STATED} --allreduce_bytes 1 --allreduce_calls 1 --output out",
         "--output out", "directory", files=("out/",)),
    case("predict-gpus-zero", f"{PREDICT} {STATED} --allreduce_bytes 1 --allreduce_calls 1 --gpus_per_node 0",
         "--gpus_per_node", "0", "at least 1"),
    # --- rlscale benchmark
    case("bench-unknown-workflow", f"benchmark trainig {BENCH}", "'trainig'", "choose one of startup"),
    case("bench-unknown-flag", f"benchmark training {BENCH} --num_env 8", "--num_env 8", "did you mean --num_envs?"),
    case("bench-multigpu-num-envs-too-many", f"benchmark training_multigpu {BENCH} --num_gpus 2 --num_envs "
         "100000000000", "--num_envs 100000000000", "x 2 ranks", "envs per rank could fit"),
    case("bench-multigpu-restarts", f"benchmark training_multigpu {BENCH} --num_gpus 2 --max_restarts 1",
         "--max_restarts", "one uninterrupted run", "drop --max_restarts"),
    case("bench-unknown-task", "benchmark training --task Isaac-cartpole --device cpu", "--task",
         "'Isaac-cartpole'", "known tasks"),
    case("bench-ema-alpha", f"benchmark training {BENCH} --ema_alpha 2", "--ema_alpha", "2.0", "(0, 1]"),
    case("bench-warmup-too-long", f"benchmark training {BENCH} --max_iterations 3 --warmup_iterations 3",
         "--warmup_iterations 3", "3 iterations", "lower it or raise --max_iterations"),
    case("bench-runtime-steps", f"benchmark runtime {BENCH} --num_steps 0", "--num_steps", "0", ">= 1"),
    case("bench-not-applicable", f"benchmark runtime {BENCH} --rl_library rsl_rl", "--rl_library", "runtime",
         "without a library"),
    case("bench-unsupported-flag", f"benchmark startup {BENCH} --video", "--video", "no renderer"),
    case("bench-startup-checkpoint-interval", f"benchmark startup {BENCH} --checkpoint_interval 5",
         "--checkpoint_interval", "startup", "no periodic checkpoint"),
    case("bench-runtime-checkpoint-interval", f"benchmark runtime {BENCH} --checkpoint_interval 5",
         "--checkpoint_interval", "runtime trains no policy"),
    case("bench-output-is-directory", f"benchmark training {BENCH} --output_path out", "--output_path out",
         "is a directory", "name the bundle file", files=("out/",)),
    case("bench-multigpu-num-gpus", f"benchmark training_multigpu {BENCH} --num_gpus 0 --dry_run", "--num_gpus",
         "'0'", "integer >= 1"),
    case("bench-multigpu-jax", f"benchmark training_multigpu {BENCH} --rl_library skrl --ml_framework jax "
         "--num_gpus 2 --dry_run", "--ml_framework jax", "use --ml_framework torch"),
    case("bench-multigpu-seed", f"benchmark training_multigpu {BENCH} --num_gpus 2 --seed -2 --dry_run",
         "--seed", "-2", "non-negative"),
    case("bench-multigpu-unknown-task", "benchmark training_multigpu --task Isaac-cartpole --device cpu "
         "--num_gpus 2", "--task", "'Isaac-cartpole'", "known tasks"),
    # --- rlscale bundle
    case("bundle-no-command", "bundle", "required", "{validate}"),
    case("bundle-unknown-command", "bundle check run.json", "'check'", "choose from", "validate"),
    case("bundle-no-file", "bundle validate", "required", "FILE"),
    case("bundle-missing-file", "bundle validate run.json", "'run.json'", "no such file", "name bundle JSON files"),
    case("bundle-directory", "bundle validate results", "'results'", "is a directory", "name bundle JSON files",
         files=("results/",)),
    # --- rlscale evaluate and play
    case("evaluate-unknown-flag", "evaluate --checkpoint model_1.pt --num_evns 3", "--num_evns 3",
         "did you mean --num_envs?"),
    case("play-unknown-flag", "play --checkpoint model_1.pt --camra front", "--camra front",
         "did you mean --camera?"),
    case("evaluate-abbreviated-flag", "evaluate --checkpoint model_1.pt --num 3", "unrecognized", "--num 3",
         "rlscale evaluate --help"),
    # --- the study config (overlay on config/config.yaml)
    case("study-world-size-zero", "world_sizes: [0, 2]", "world_sizes[0]", "0 is less than", "use a value >= 1",
         how="study"),
    case("study-world-size-string", "world_sizes: '1,2'", "world_sizes", "'1,2'", "YAML list", how="study"),
    case("study-world-size-across-nodes", "device: cuda\nworld_sizes: [1, 12]", "world_sizes", "12",
         "not a multiple of gpus_per_node=8", "use multiples", how="study"),
    case("study-unknown-key", "world_size: [1, 2]", "world_size", "unknown key", "did you mean world_sizes?",
         how="study"),
    case("study-unknown-key-far", "colour: red", "colour", "unknown key", "valid keys: study", how="study"),
    case("study-unknown-nested-key", "iterations: {benchmrk: 3}", "iterations.benchmrk", "unknown key",
         "did you mean benchmark?", how="study"),
    case("study-unknown-nested-key-far", "iterations: {peer: 3}", "iterations.peer", "unknown key",
         "valid keys of iterations: validate, train, benchmark", how="study"),
    case("study-unknown-library", "libraries: [{name: sb3}]", "libraries[0].name", "'sb3'",
         "use one of rsl_rl, rl_games, skrl", how="study"),
    case("study-library-without-name", "libraries: [{ml_framework: torch}]", "libraries[0]", "'name'", "add it",
         how="study"),
    case("study-unknown-device", "device: tpu", "device", "'tpu'", "use one of auto, cuda, cpu", how="study"),
    case("study-negative-seed", "seeds: [-1]", "seeds[0]", "-1", "use a value >= 0", how="study"),
    case("study-bad-name", "study: my study", "study", "'my study'", "letters, digits", how="study"),
    case("study-rdzv-port", "rdzv_port: 80", "rdzv_port", "80", "use a value >= 1024", how="study"),
    case("study-no-env-counts", "num_envs_per_rank: []", "num_envs_per_rank", "[]", "at least 1 value",
         how="study"),
    case("study-envs-of-unknown-task", "num_envs_per_task: {Rlscale-Antt: [64]}", "num_envs_per_task.Rlscale-Antt",
         "not in tasks", "add it to tasks", how="study"),
    case("study-envs-per-task-list", "num_envs_per_task: [64]", "num_envs_per_task", "[64]", "mapping", how="study"),
    case("study-benchmark-iterations", "iterations: {benchmark: 1}", "iterations.benchmark", "1 is less than",
         "use a value >= 2", how="study"),
    case("study-warmup-too-long", "device: cpu\niterations: {benchmark: 5}\nwarmup_iterations: 5",
         "warmup_iterations=5", "iterations.benchmark=5", "lower it", how="study"),
    case("study-jax", "libraries: [{name: skrl, ml_framework: jax}]", "ml_framework jax", "with ml_framework torch",
         how="study"),
    case("study-duplicate-library", "libraries: [{name: rsl_rl}, {name: rsl_rl, ml_framework: torch}]",
         "libraries", "twice", "list each once", how="study"),
    case("study-logger-unknown", "logger: mlflow", "logger", "'mlflow'", "tensorboard, wandb", how="study"),
    case("study-logger-with-peer", "logger: wandb\npeer_baseline: true", "peer_baseline", "logger wandb",
         "set logger: tensorboard", how="study"),
    case("study-tracker-flag-override", "agent_overrides: {rsl_rl: ['--logger=wandb']}",
         "agent_overrides.rsl_rl[0]", "--logger=wandb", "set them instead", how="study"),
    case("study-cuda-visible-empty-entry", "device: auto", "CUDA_VISIBLE_DEVICES='0,,1'", "empty entry",
         "e.g. CUDA_VISIBLE_DEVICES=0,1", env={"CUDA_VISIBLE_DEVICES": "0,,1"}, how="study"),
    case("snakemake-world-size-zero", "world_sizes: [0, 2]", "world_sizes[0]", "0 is less than",
         "use a value >= 1", how="snakemake"),
    case("snakemake-world-size-across-nodes", "device: cuda\nworld_sizes: [1, 12]", "world_sizes", "12",
         "use multiples", how="snakemake"),
    case("snakemake-envs-of-dropped-task", "tasks: [Isaac-Cartpole-Direct]\nnum_envs_per_task: {Rlscale-Ant: [64]}",
         "num_envs_per_task.Rlscale-Ant", "not in tasks", "num_envs_per_task: null", how="snakemake"),
]  # fmt: skip


def tree(root: Path) -> list[str]:
    """Every path under ``root``, relative, sorted: the snapshot compared before and after a case."""
    return sorted(str(path.relative_to(root)) + ("/" if path.is_dir() else "") for path in root.rglob("*"))


def merged(base: dict, overlay: dict) -> dict:
    """``base`` updated by ``overlay`` key by key, nested mappings merged, as ``snakemake --configfile A B`` does."""
    result = copy.deepcopy(base)
    for key, value in overlay.items():
        is_nested = isinstance(value, dict) and isinstance(result.get(key), dict)
        result[key] = merged(result[key], value) if is_nested else copy.deepcopy(value)
    return result


def job_not_started(*args, **kwargs):
    raise AssertionError("validation passed and a job was about to start")


def run_case(item: Case, workdir: Path, monkeypatch, capsys) -> tuple[int | None, str, list[str]]:
    """Run one case in ``workdir``; return its exit code (None: no exit code), stdout and its error lines."""
    env = {**BASE_ENV, **item.env}
    if item.how == "subprocess":
        result = rlscale(*shlex.split(item.command), env=env, cwd=workdir, timeout=120)
        return result.returncode, result.stdout, result.stderr.splitlines()
    if item.how == "snakemake":
        overlay = workdir.parent / "overlay.yaml"  # outside the snapshot: only what Snakemake writes counts
        overlay.write_text(item.command)
        full_env = {key: value for key, value in {**os.environ, **env}.items() if value is not None}
        command = [SNAKEMAKE, "-n", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir)]
        result = subprocess.run(
            [*command, "--configfile", str(CONFIG), str(overlay)],
            capture_output=True, text=True, env=full_env, cwd=workdir, timeout=120,
        )  # fmt: skip
        lines = (result.stdout + result.stderr).splitlines()
        return result.returncode, "", [line for line in lines if line.startswith("config:")]
    if item.how == "study":
        config = merged(yaml.safe_load(CONFIG.read_text()), yaml.safe_load(item.command))
        environ = {key: value for key, value in env.items() if value is not None}
        with pytest.raises(StudyConfigError) as error:
            validated_config(config, SCHEMA, environ, nvml_count=lambda: 0, hardware_probe=lambda: None)
        return None, "", str(error.value).splitlines()
    for key, value in env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    monkeypatch.setattr("rlscale.launch.supervise.run_supervised", job_not_started)
    monkeypatch.setattr("rlscale.run.train.execute", job_not_started)
    try:
        code = rlscale_main(shlex.split(item.command))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


class TestBadInputCatalogue:
    def test_catalogue_size_and_ids(self):
        """At least 40 distinct bad inputs, each with an id of its own and what its error line must name."""
        ids = [item.id for item in CATALOGUE]
        assert len(ids) >= 40 and len(set(ids)) == len(ids)
        assert all(item.needs and item.how in ("inproc", "subprocess", "study", "snakemake") for item in CATALOGUE)

    @pytest.mark.parametrize("item", CATALOGUE, ids=[item.id for item in CATALOGUE])
    def test_one_line_exit_2_nothing_written(self, item, tmp_path, monkeypatch, capsys):
        """Refused with exactly one error line naming flag or key, value and fix; exit 2; no file or folder appears.

        Study cases raise StudyConfigError (one line) from the parse-time validation; through ``snakemake -n`` the
        exit code is Snakemake's own 1 and the same ``config:`` line appears exactly once.
        """
        workdir = tmp_path / "work"
        workdir.mkdir()
        monkeypatch.chdir(workdir)
        for name in item.files:
            if name.endswith("/"):
                (workdir / name).mkdir()
            else:
                (workdir / name).write_bytes(b"\x80\x02not a checkpoint nor a bundle")
        before = tree(workdir)
        code, out, lines = run_case(item, workdir, monkeypatch, capsys)
        expected_code = {"study": None, "snakemake": 1}.get(item.how, 2)
        assert (code, out) == (expected_code, ""), lines
        assert len(lines) == 1, lines
        missing = [text for text in item.needs if text not in lines[0]]
        assert not missing, f"{missing} not in: {lines[0]}"
        assert tree(workdir) == before


class TestValidInputsPass:
    """Controls: the same commands without the bad part are accepted, so the refusals above are specific."""

    @pytest.mark.parametrize(
        ("command", "env"),
        [
            (MULTI, {}),
            (f"{MULTI} --num_gpus 2 --nnodes 2 --node_rank 1 --master_addr node0 --master_port 29500", {}),
            (f"{JAX} --coordinator_address node0:29500", {}),
            (MULTI, {"NCCL_P2P_DISABLE": "1"}),
            (MULTI, {"NCCL_P2P_LEVEL": "NVL"}),
            ("nccl_probe --num_gpus 2 --device cpu --dry_run", {}),
            (f"benchmark training_multigpu {BENCH} --num_gpus 2 --seed 2 --dry_run", {}),
        ],
        ids=["plain", "two-nodes", "jax", "p2p-disable-alone", "p2p-level-alone", "probe", "benchmark"],
    )
    def test_dry_run_accepted(self, command, env, tmp_path, monkeypatch, capsys):
        """A valid launch prints its command on stdout and exits 0; nothing is started or written."""
        monkeypatch.chdir(tmp_path)
        code, out, lines = run_case(Case("ok", command, ("",), env=env), tmp_path, monkeypatch, capsys)
        errors = [line for line in lines if not line.startswith("[INFO] cpu binding")]  # the launcher's CPU plan
        assert (code, errors) == (0, []) and " -m " in out
        assert tree(tmp_path) == []

    def test_valid_study_config(self):
        """The shipped config with the CI overlay validates and resolves, defaults filled in."""
        overlay = yaml.safe_load((ROOT / ".test" / "config" / "config.yaml").read_text())
        config = merged(yaml.safe_load(CONFIG.read_text()), overlay)
        del config["rdzv_port"]  # left out: the schema's default fills it in
        study = validated_config(
            config, SCHEMA, {"CUDA_VISIBLE_DEVICES": ""}, nvml_count=lambda: 0, hardware_probe=lambda: None
        )
        assert (study["device"], study["world_sizes"], study["rdzv_port"]) == ("cpu", [1, 2], 29400)


def risky_calls(path: Path) -> list[str]:
    """Calls in one source file that would run or load untrusted input unsafely, as ``file:line call``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        keywords = {keyword.arg: ast.unparse(keyword.value) for keyword in node.keywords}
        if keywords.get("shell") not in (None, "False") or name in ("os.system", "os.popen", "eval", "exec"):
            found.append(f"{path.name}:{node.lineno} {name} (a shell)")
        if name in ("yaml.load", "yaml.unsafe_load", "yaml.full_load"):
            found.append(f"{path.name}:{node.lineno} {name} (use yaml.safe_load)")
        if name == "torch.load" and keywords.get("weights_only") != "True":
            found.append(f"{path.name}:{node.lineno} {name} without weights_only=True")
    return found


class TestSecureByDefault:
    def test_no_shell_unsafe_yaml_or_pickling_torch_load(self):
        """src/ and scripts/ start no shell, load YAML only with safe_load and torch files only as weights."""
        files = sorted([*(ROOT / "src").rglob("*.py"), *(ROOT / "scripts").glob("*.py")])
        assert len(files) > 20
        assert [call for path in files for call in risky_calls(path)] == []

    def test_the_scan_catches_each_pattern(self, tmp_path):
        """The scan above flags each unsafe form it looks for (so an empty result means something)."""
        bad = tmp_path / "bad.py"
        bad.write_text(
            "subprocess.run(cmd, shell=True)\nos.system(cmd)\nyaml.load(text)\ntorch.load(path)\n"
            "torch.load(path, weights_only=False)\nyaml.safe_load(text)\ntorch.load(path, weights_only=True)\n"
        )
        assert [call.split(" ")[0] for call in risky_calls(bad)] == [f"bad.py:{line}" for line in (1, 2, 3, 4, 5)]
