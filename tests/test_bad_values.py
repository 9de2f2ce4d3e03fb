"""Bad values, files and checkpoints: checked by value before launch, on `rlscale train` and on the launchers.

Each case keeps the contract of :mod:`test_bad_inputs` (one error line naming the flag or key, the value and the fix;
exit code 2; nothing written), run by the same :func:`test_bad_inputs.run_case`. Unlike most of those, the launcher
cases here are not dry runs: the values are checked against the task's config and the library's agent config, which
a dry run does not load; the job itself is replaced by a stub that fails the test if it is reached.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from rlscale_command import rlscale
from run_manifests import manifest_data, starting_fields
from test_bad_inputs import case, run_case, tree

from rlscale.faults import Fault
from rlscale.rl import LIBRARIES
from rlscale.rl.agent_overrides import AGENT_RULES, checked_value
from rlscale.run.train import main as train_main

TRAIN = "train --task Isaac-Cartpole --device cpu"
MULTI = "train_multigpu --task Isaac-Cartpole --device cpu --num_gpus 2"
BENCH_MULTI = "benchmark training_multigpu --task Isaac-Cartpole --device cpu --num_gpus 2"
READ_ONLY = "/sys"
"""A folder nobody may create files in, root included (sysfs)."""

CATALOGUE = [
    # --- agent overrides: the type of the default, the library's range
    case("agent-rate-text", f"{TRAIN} --agent algorithm.learning_rate=fast", "algorithm.learning_rate",
         "'fast'", "must be a number"),
    case("agent-rate-negative", f"{TRAIN} agent.algorithm.learning_rate=-1e-3", "algorithm.learning_rate",
         "-0.001", "must be > 0"),
    case("agent-gamma-above-one", f"{MULTI} agent.algorithm.gamma=1.5", "algorithm.gamma", "1.5", "must be <= 1"),
    case("agent-minibatches-float", f"{MULTI} --agent algorithm.num_mini_batches=2.5",
         "algorithm.num_mini_batches", "2.5", "must be an integer"),
    case("agent-minibatches-zero", f"{TRAIN} agent.algorithm.num_mini_batches=0", "algorithm.num_mini_batches",
         "got 0", "must be >= 1"),
    case("agent-bool-as-int", f"{TRAIN} agent.algorithm.use_mixed_precision=1", "use_mixed_precision", "got 1",
         "true or false"),
    case("agent-list-as-int", f"{TRAIN} agent.actor.hidden_dims=64", "actor.hidden_dims", "got 64", "a list"),
    case("agent-schedule-unknown", f"{TRAIN} agent.algorithm.schedule=cosine", "algorithm.schedule", "'cosine'",
         "one of adaptive, fixed"),
    case("agent-clip-zero", f"{TRAIN} agent.algorithm.clip_param=0", "algorithm.clip_param", "got 0", "> 0"),
    case("agent-rl-games-horizon", f"{TRAIN} --rl_library rl_games agent.params.config.horizon_length=0",
         "params.config.horizon_length", "got 0", ">= 1"),
    case("agent-skrl-discount", f"{TRAIN} --rl_library skrl agent.agent.discount_factor=0",
         "agent.discount_factor", "got 0", "> 0"),
    case("agent-skrl-interval-text", f"{TRAIN} --rl_library skrl agent.agent.experiment.checkpoint_interval=often",
         "checkpoint_interval", "'often'", "an integer or one of auto"),
    case("agent-benchmark-launcher", f"{BENCH_MULTI} agent.algorithm.learning_rate=0", "algorithm.learning_rate",
         "got 0", "> 0"),
    case("agent-gamma-launcher-process", f"{MULTI} agent.algorithm.gamma=1.5", "rlscale train_multigpu: error:",
         "algorithm.gamma", "must be <= 1", how="subprocess"),
    # --- env overrides: ranges declared on the task's config fields
    case("env-episode-negative", f"{TRAIN} env.episode_length_s=-5", "env.episode_length_s=-5",
         "episode_length_s must be > 0"),
    case("env-dt-zero", f"{MULTI} env.sim_dt=0", "env.sim_dt=0", "sim_dt must be > 0"),
    case("env-dt-launcher-process", f"{MULTI} env.sim_dt=-0.01", "rlscale train_multigpu: error:", "env.sim_dt",
         "sim_dt must be > 0", how="subprocess"),
    case("env-decimation-zero", f"{TRAIN} env.decimation=0", "env.decimation=0", "must be >= 1"),
    case("env-nested-mass", f"{TRAIN} env.physics.pole_mass=-0.1", "env.physics.pole_mass=-0.1",
         "physics.pole_mass must be > 0"),
    case("env-decimation-float", f"{TRAIN} env.decimation=1.5", "env.decimation=1.5", "expected int"),
    # --- launcher values that contradict each other
    case("multi-num-gpus-and-nproc", f"{MULTI} --nproc_per_node 3 --dry_run", "--num_gpus/--nproc_per_node",
         "2 and 3", "pass one value"),
    # --- RLSCALE_* variables
    case("env-fault-rank-missing", MULTI, "RLSCALE_INJECT_FAULT='crash:rank=2,iteration=1'", "rank 2",
         "job of 2 rank(s)", "0..1", env={"RLSCALE_INJECT_FAULT": "crash:rank=2,iteration=1"}),
    case("env-fault-rank-single", TRAIN, "rank 1 does not exist", "0..0",
         env={"RLSCALE_INJECT_FAULT": "crash:rank=1,iteration=1"}),
    case("env-collective-timeout-text", f"{MULTI} --dry_run", "RLSCALE_COLLECTIVE_TIMEOUT='ten'",
         "number of seconds > 0", env={"RLSCALE_COLLECTIVE_TIMEOUT": "ten"}),
    case("env-collective-timeout-zero", TRAIN, "RLSCALE_COLLECTIVE_TIMEOUT='0'", "> 0",
         env={"RLSCALE_COLLECTIVE_TIMEOUT": "0"}),
    case("study-agent-override-range", "agent_overrides: {rsl_rl: [agent.algorithm.gamma=2]}",
         "agent_overrides.rsl_rl[0] (from ", "): agent.algorithm.gamma=2: ", "must be <= 1", how="study"),
    case("study-agent-override-type", "agent_overrides: {skrl: [agent.agent.rollouts=many]}",
         "agent_overrides.skrl[0]", "agent.rollouts must be an integer", "'many'", how="study"),
    case("study-lease-timeout-text", "study: mine", "RLSCALE_LEASE_TIMEOUT_S='soon'", "number of seconds > 0",
         env={"RLSCALE_LEASE_TIMEOUT_S": "soon"}, how="study"),
    case("study-lease-shared-jobs-zero", "study: mine", "RLSCALE_LEASE_SHARED_JOBS='0'", "whole number >= 1",
         env={"RLSCALE_LEASE_SHARED_JOBS": "0"}, how="study"),
    case("study-lease-dir-read-only", "study: mine", f"RLSCALE_LEASE_DIR='{READ_ONLY}/lease'", "cannot write in",
         env={"RLSCALE_LEASE_DIR": f"{READ_ONLY}/lease"}, how="study"),
    # --- files: folders that cannot be written (a read-only file system refuses root too)
    case("log-root-read-only", f"{TRAIN} --log_root {READ_ONLY}/logs", f"--log_root {READ_ONLY}/logs",
         "cannot write in", "a directory you can write"),
    case("log-root-read-only-launcher", f"{MULTI} --log_root {READ_ONLY}/logs", "rlscale train_multigpu: error:",
         "cannot write in", "a directory you can write"),
    case("log-root-under-a-file", f"{TRAIN} --log_root notes.txt/logs", "--log_root notes.txt/logs",
         "notes.txt is a file", files=("notes.txt",)),
    case("bundle-folder-is-a-file", "benchmark training --task Isaac-Cartpole --device cpu",
         "bundle folder results/benchmarks", "results is a file", "pass --output_path FILE", files=("results",)),
    case("output-path-read-only", f"benchmark training --task Isaac-Cartpole --device cpu --output_path "
         f"{READ_ONLY}/bundle.json", f"--output_path {READ_ONLY}/bundle.json", "cannot write in",
         "a directory you can write"),
]  # fmt: skip


@pytest.mark.parametrize("item", CATALOGUE, ids=[item.id for item in CATALOGUE])
def test_one_line_exit_2_nothing_written(item, tmp_path, monkeypatch, capsys):
    """Refused with one line naming key, value and bound; exit 2; no file appears; no rank or run starts."""
    monkeypatch.chdir(tmp_path)
    for name in item.files:
        (tmp_path / name).mkdir() if name.endswith("/") else (tmp_path / name).write_bytes(b"\x80\x02garbage")
    before = tree(tmp_path)
    code, out, lines = run_case(item, tmp_path, monkeypatch, capsys)
    assert (code, out) == ({"study": None}.get(item.how, 2), ""), lines
    assert len(lines) == 1, lines
    missing = [text for text in item.needs if text not in lines[0]]
    assert not missing, f"{missing} not in: {lines[0]}"
    assert tree(tmp_path) == before


def write_checkpoint(folder: Path, top_key: str, inputs: int, run: tuple[str, str] | None = None) -> Path:
    """A checkpoint whose policy (under ``top_key``) reads ``inputs`` observations, with its run's manifest when
    ``run`` (task, library) is given: its agent config had networks of 32 x 32."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model_1.pt"
    torch.save({top_key: {"mlp.0.weight": torch.zeros(32, inputs)}, "iter": 1}, path)
    if run is not None:
        agent_cfg = {"actor": {"hidden_dims": [32, 32]}, "critic": {"hidden_dims": [32, 32]}}
        manifest = manifest_data({"args": {"task": run[0], "rl_library": run[1]}, "agent_cfg": agent_cfg})
        (folder / "manifest.json").write_text(json.dumps(manifest))
    return path


@pytest.mark.parametrize(
    ("command", "top_key", "inputs", "run", "needs"),
    [
        (MULTI, "actor_state_dict", 4, ("Isaac-Cartpole-Direct", "rsl_rl"),
         ["run of Isaac-Cartpole-Direct with rsl_rl", "this run is Isaac-Cartpole with rsl_rl"]),
        (f"{MULTI} --rl_library skrl", "actor_state_dict", 4, None,
         ["a rsl_rl checkpoint", "this run is Isaac-Cartpole with skrl", "pass --rl_library rsl_rl"]),
        (TRAIN, "policy", 4, None, ["a skrl checkpoint", "this run is Isaac-Cartpole with rsl_rl"]),
        (MULTI, "actor_state_dict", 34, None,
         ["reads 34 observations", "Isaac-Cartpole's policy observations are 4"]),
        (f"{TRAIN} agent.actor.hidden_dims=[64,64]", "actor_state_dict", 4, ("Isaac-Cartpole", "rsl_rl"),
         ["its networks have actor.hidden_dims [32, 32]", "this run's actor.hidden_dims is [64, 64]"]),
    ],
    ids=["other-task-launcher", "other-library-launcher", "other-library-train", "other-shapes-launcher",
         "other-layers-train"],
)  # fmt: skip
def test_resume_checkpoint_of_another_run(command, top_key, inputs, run, needs, tmp_path, monkeypatch, capsys):
    """A checkpoint of another task, library or observation size: one line naming both, before any rank starts."""
    monkeypatch.chdir(tmp_path)
    path = write_checkpoint(tmp_path / "old_run", top_key, inputs, run)
    before = tree(tmp_path)
    code, out, lines = run_case(case("resume", f"{command} --resume {path}", "x"), tmp_path, monkeypatch, capsys)
    assert (code, out, len(lines)) == (2, "", 1), lines
    assert all(text in lines[0] for text in [f"--resume {path}", *needs]), lines[0]
    assert tree(tmp_path) == before


def run_on_full_disk(tmp_path: Path, command: str) -> subprocess.CompletedProcess:
    """Run ``rlscale <command>`` in ``tmp_path`` with the run's manifest going to /dev/full: ENOSPC while it writes."""
    run_dir = tmp_path / "logs" / "rsl_rl" / "Isaac-Cartpole" / "stamp"
    run_dir.mkdir(parents=True)
    (run_dir / ".manifest.json.tmp").symlink_to("/dev/full")
    return rlscale(
        *shlex.split(command), "--log_root", "logs", "--num_envs", "4",
        env={"RLSCALE_RUN_TIMESTAMP": "stamp", "RLSCALE_INJECT_FAULT": None}, cwd=tmp_path,
    )  # fmt: skip


FULL_DISK = "rlscale train: error: No space left on device"


def test_full_disk_is_one_line(tmp_path):
    """ENOSPC while the run writes: one line and exit 1, no traceback."""
    result = run_on_full_disk(tmp_path, TRAIN)
    lines = result.stderr.splitlines()
    assert (result.returncode, len(lines)) == (1, 1), result.stderr
    assert lines[0].startswith(FULL_DISK) and "free space there" in lines[0]


def test_full_disk_under_torchrun_is_one_line(tmp_path):
    """The same on a train_multigpu rank: its line, repeated by the launcher's summary, and exit 1; no traceback from
    torchrun either, whose report would have nothing to show for a rank that printed its own line."""
    result = run_on_full_disk(tmp_path, "train_multigpu --task Isaac-Cartpole --device cpu --num_gpus 1")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "ChildFailedError" not in result.stderr, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith(FULL_DISK)], result.stderr
    assert f"[ERROR] rank 0 exited 1 ({FULL_DISK}" in result.stderr, result.stderr


@pytest.mark.parametrize("stop", ["crash", "interrupt"])
def test_stopped_manifest_keeps_finished_iterations(stop, tmp_path, monkeypatch):
    """A run stopped at iteration 2 (crashed, or Ctrl-C) keeps the records of iterations 0 and 1 in its manifest."""
    monkeypatch.setenv("RLSCALE_INJECT_FAULT", "crash:rank=0,iteration=2")
    if stop == "interrupt":

        def interrupt(self, rank, iteration, parameters=None):
            if iteration == self.iteration:
                raise KeyboardInterrupt

        monkeypatch.setattr(Fault, "trigger_if_due", interrupt)
    argv = [*shlex.split(TRAIN)[1:], "--num_envs", "4", "--max_iterations", "4", "--log_root", str(tmp_path)]
    if stop == "crash":
        with pytest.raises(RuntimeError, match="injected crash"):
            train_main(argv)
    else:
        assert train_main(argv) == 130
    (manifest_path,) = tmp_path.rglob("manifest.json")
    manifest = json.loads(manifest_path.read_text())
    assert manifest["status"] == {"crash": "crashed", "interrupt": "interrupted"}[stop]
    assert [record["iteration"] for record in manifest["iterations"]] == [0, 1]


def agent_configs() -> list[tuple[str, Path]]:
    """Every agent config rlscale ships: the generic one of each library and each built-in task's."""
    source = Path(__file__).resolve().parents[1] / "src" / "rlscale"
    found = [(path.stem.removesuffix("_ppo"), path) for path in (source / "rl" / "default_agents").glob("*.yaml")]
    for path in (source / "tasks").glob("*/agents/*.yaml"):
        found.append((next(name for name in LIBRARIES if name in path.name), path))
    return found


@pytest.mark.parametrize(("library", "path"), agent_configs(), ids=lambda value: getattr(value, "name", value))
def test_agent_rules_accept_the_shipped_configs(library, path):
    """Each rule names a key of every shipped config of its library, whose own value keeps the rule, and so does
    each network entry a checkpoint is compared on: the tables cannot drift from the configs."""
    assert set(AGENT_RULES) == set(LIBRARIES)
    cfg = yaml.safe_load(path.read_text())
    for key in LIBRARIES[library].network_keys:
        assert key.split(".")[-1] in functools.reduce(lambda node, part: node[part], key.split(".")[:-1], cfg)
    for key in AGENT_RULES[library]:
        node = cfg
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, f"{path.name} has no {key}"
            node = node[part]
        assert checked_value(key, node, node, library) == node


@pytest.mark.parametrize("command", ["train_multigpu", "train"])
def test_a_full_log_root_is_refused_before_launch(command, tmp_path, monkeypatch, capsys):
    """A disk with no space left still lets one create an empty file; its free space is what refuses it, in one line
    and before anything is written or started."""
    from rlscale import cli, paths

    full = collections.namedtuple("usage", "total used free")(10 << 30, 10 << 30, 4096)
    monkeypatch.setattr(paths.shutil, "disk_usage", lambda path: full)
    monkeypatch.chdir(tmp_path)
    argv = [command, "--task", "Isaac-Cartpole", "--device", "cpu", "--log_root", "logs"]
    with pytest.raises(SystemExit) as stopped:
        cli.main([*argv, "--dry_run"] if command == "train_multigpu" else argv)
    lines = capsys.readouterr().err.splitlines()
    assert stopped.value.code == 2 and len(lines) == 1, lines
    assert f"--log_root logs: no space left in {tmp_path} (4,096 bytes free)" in lines[0]
    assert not (tmp_path / "logs").exists()


OOM_PLUGIN = """
import torch
from rlscale.tasks import get_spec, register_task

cartpole = get_spec("Isaac-Cartpole")


def make(cfg):
    if cfg.num_envs > 8:  # what the device says when the envs do not fit
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
    return cartpole.task_class(cfg)


register_task("Huge-Cartpole", make, cartpole.cfg_class, cartpole.agent_cfg_files, package=cartpole.agent_package)
"""


@pytest.mark.parametrize("launcher", ["train", "train_multigpu --num_gpus 2"])
def test_envs_the_device_cannot_hold_are_one_line_and_nothing_written(launcher, tmp_path):
    """A task whose build runs out of device memory: one line naming --num_envs, exit 2, and the run directory this
    invocation made is taken back (every rank's)."""
    (tmp_path / "oom_plugin.py").write_text(OOM_PLUGIN)
    env = {"PYTHONPATH": os.pathsep.join((str(tmp_path), *sys.path))}
    command = f"{launcher} --task oom_plugin:Huge-Cartpole --device cpu --num_envs 16 --log_root logs"
    result = rlscale(*shlex.split(command), env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    refusal = "rlscale train: error: --num_envs 16: cpu ran out of memory building oom_plugin:Huge-Cartpole"
    lines = [line for line in result.stderr.splitlines() if line.startswith(refusal)]
    assert lines and "use fewer envs" in lines[0], result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    if launcher == "train":
        assert len(result.stderr.splitlines()) == 1, result.stderr
    assert not (tmp_path / "logs").exists(), sorted(p.name for p in (tmp_path / "logs").rglob("*"))


def test_a_manifest_outlasts_another_ranks_take_back_of_its_folder(tmp_path, monkeypatch):
    """A rank whose task did not fit takes its empty folders back; one may be the folder another rank has just made
    for its manifest, before the file is in it. The manifest is written anyway."""
    from rlscale import manifest

    write_atomic, calls = manifest.write_atomic, []

    def after_a_take_back(path, text):
        calls.append(path)
        if len(calls) == 1:
            path.parent.rmdir()
        write_atomic(path, text)

    monkeypatch.setattr(manifest, "write_atomic", after_a_take_back)
    segment = manifest.Segment.starting_now(1, 8, 0)
    written = manifest.Manifest(tmp_path / "run" / "manifest.json", segment, **starting_fields(seed=7))
    assert len(calls) == 2 and json.loads(written.path.read_text())["seed"] == 7


def test_each_rank_takes_back_what_was_missing_when_the_ranks_started(tmp_path, monkeypatch):
    """Another rank made the run directory while this one was loading its library, and took its own folder back
    first: this rank, out last, takes back every folder the launch made."""
    from rlscale import rl
    from rlscale.dist import RUN_TIMESTAMP_ENV
    from rlscale.run import phases
    from rlscale.run.spec import resolve_spec

    monkeypatch.setenv(RUN_TIMESTAMP_ENV, "launch")
    other_rank = tmp_path / "logs" / "rsl_rl" / "Isaac-Cartpole" / "launch" / "rank_1"
    load_adapter = rl.load_adapter

    def load_adapter_after_the_other_rank(name):
        other_rank.mkdir(parents=True)
        return load_adapter(name)

    monkeypatch.setattr(rl, "load_adapter", load_adapter_after_the_other_rank)
    spec = resolve_spec(["--task", "Isaac-Cartpole", "--device", "cpu", "--log_root", str(tmp_path / "logs")])
    threads = torch.get_num_threads()
    try:
        run = phases.prepare(spec)
    finally:
        torch.set_num_threads(threads)
    other_rank.rmdir()
    phases.discard_run_directory(run)
    assert not (tmp_path / "logs").exists(), sorted(p.name for p in (tmp_path / "logs").rglob("*"))
