"""Four values a study job hands down (num_envs, world size, rl_library, device), followed from the train rule's
job record to the spec a rank loads: each arrives intact, and each process parses them once.

No process starts: the study job's launch and the launcher's torchrun are intercepted where they would start one,
and each next step runs in this process on what the previous one would have run.
"""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path

import pytest

from rlscale.benchmark.arguments import launcher_check
from rlscale.benchmark.workflows import WORKFLOWS
from rlscale.device import Device
from rlscale.launch import launcher as launcher_module
from rlscale.launch import supervise
from rlscale.launch.command import benchmark_launcher_cfg, parse_launcher_args
from rlscale.launch.lease import LEASE_DIR_ENV
from rlscale.run import args as run_args
from rlscale.run import spec as run_spec
from rlscale.study import __main__ as study_main
from rlscale.study import job_runner, stages
from rlscale.study.job import Job, Library, RunArgs
from rlscale.study.paths import JobKind

RUN = RunArgs(task="Isaac-Cartpole-Direct", library=Library("rl_games", "torch"), num_envs=64, max_iterations=1)


@pytest.fixture
def parses(monkeypatch) -> collections.Counter:
    """Counts, by name, the parses of the four values: ``Device.parse``, the ranks' argument parser (``num_envs``, the
    ranks' device) and whether ``--rl_library`` reaches it as text, the study job's record."""
    counts = collections.Counter()

    def counted(name, function):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)

        return wrapper

    device_parse = Device.parse
    monkeypatch.setattr(Device, "parse", staticmethod(counted("device", device_parse)))

    def parse_rank_arguments(parser, argv):
        counts["rl_library given as text"] += "--rl_library" in argv
        return run_args.parse_command_line(parser, argv)

    monkeypatch.setattr(run_spec, "parse_command_line", counted("rank arguments", parse_rank_arguments))
    monkeypatch.setattr(study_main.Job, "from_json", counted("job record", study_main.Job.from_json))
    return counts


def test_four_values_from_the_study_cell_to_the_rank(parses, monkeypatch, tmp_path):
    monkeypatch.setenv(LEASE_DIR_ENV, str(tmp_path / "leases"))
    monkeypatch.delenv(run_spec.RUN_SPEC_ENV, raising=False)
    log_root = tmp_path / "run"
    job = Job(
        id="train/Isaac-Cartpole-Direct/rl_games/ws2",
        kind=JobKind.TRAIN,
        device="cpu",
        output=str(tmp_path / "manifest.json"),
        world_size=2,
        run=dataclasses.replace(RUN, log_root=str(log_root)),
    )

    # The study job (python -m rlscale.study run): its record read once; the launcher command it would run.
    launched = []
    monkeypatch.setattr(job_runner, "run_supervised", lambda command, env, **kwargs: launched.append(command) or 0)
    monkeypatch.setattr(stages, "collect_manifest", lambda run_root, output: 0)
    assert study_main.main(["run", job.to_json(), "--granted_gpus", "0"]) == 0
    assert (parses["job record"], parses["device"], parses["rank arguments"]) == (1, 0, 0)
    (command,) = launched
    assert command[command.index("-m") + 1 :][:2] == ["rlscale", "train_multigpu"]

    # The launcher (rlscale train_multigpu): the ranks' arguments and device parsed once into the spec it leaves.
    parses.clear()
    started = []

    def start_ranks(argv, env=None, **kwargs):
        started.append(dict(env))
        return 0

    monkeypatch.setattr(supervise, "run_supervised", start_ranks)
    monkeypatch.setattr(launcher_module, "failed_ranks", lambda status_dir, ranks: [])
    spec_texts = []
    write_spec = run_spec.write_spec

    def keep_spec(spec, folder):
        path = write_spec(spec, folder)
        spec_texts.append(path.read_text())
        return path

    monkeypatch.setattr(launcher_module, "write_spec", keep_spec)
    launcher_argv = command[command.index("train_multigpu") + 1 :]
    launcher_module.main_train_multigpu(launcher_argv)
    # The launcher's own parser reads --rl_library (its choices, the launcher it needs) and hands the value on.
    assert (parses["device"], parses["rank arguments"], parses["rl_library given as text"]) == (1, 1, 0)
    (spec_text,) = spec_texts
    (rank_env,) = started

    # A rank: the launcher's spec, loaded, not parsed again from arguments.
    parses.clear()
    spec_file = Path(tmp_path / "run_spec.json")
    spec_file.write_text(spec_text)
    monkeypatch.setenv(run_spec.RUN_SPEC_ENV, str(spec_file))
    monkeypatch.setenv("WORLD_SIZE", "2")
    spec = run_spec.spec_from_environment()
    assert (parses["rank arguments"], parses["device"]) == (0, 1)
    assert (spec.num_envs, spec.rl_library, spec.device, spec.world_size) == (64, "rl_games", Device("cpu"), 2)
    assert rank_env[run_spec.RUN_SPEC_ENV]  # the ranks are told where the spec is


@pytest.mark.parametrize("workflow", ["startup", "runtime", "training"])
def test_benchmark_ranks_find_their_workflow_in_the_spec(workflow):
    """The benchmark launcher's spec names the workflow, which its ranks take from there (benchmark/worker.py)."""
    cfg = benchmark_launcher_cfg(workflow, uses_library=WORKFLOWS[workflow].uses_library)
    argv = ["--task", "Isaac-Cartpole-Direct", "--device", "cpu", "--num_gpus", "2", "--dry_run"]
    args, forwarded = parse_launcher_args(argv, cfg, {})
    assert launcher_check(WORKFLOWS[workflow], cfg)(args, forwarded).options["workflow"] == workflow
