"""``--logger wandb``: one W&B run per training run, from global rank 0 only, named and grouped after the cell, failed
by a crash on any rank, continued by a resumed run; refused in one line without the client. W&B runs offline, every
folder of its own inside the test's (nothing leaves the machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rlscale_command import rlscale
from test_bad_inputs import case, run_case, tree
from wandb_records import offline_environment, offline_runs

pytestmark = pytest.mark.extras  # make test-extras

ROOT = Path(__file__).resolve().parents[1]
CELL = ["--task", "Isaac-Cartpole-Direct", "--device", "cpu", "--num_envs", "16"]


def manifests(log_root: Path) -> dict[int, dict]:
    """Each rank's manifest by rank; with several runs under ``log_root``, the last one read of each rank."""
    return {data["rank"]: data for data in map(json.loads, map(Path.read_text, log_root.rglob("manifest.json")))}


@pytest.mark.parametrize("library", ["rsl_rl", "rl_games", "skrl"])
def test_two_ranks_log_one_run_named_after_the_cell(tmp_path, library):
    """Two CPU ranks make one offline run, rank 0's, which the manifest names: group, job type, name and config are
    the cell's, its metrics reached it, and it ended finished; rank 1 records none and writes no W&B folder."""
    logs = tmp_path / "logs"
    result = rlscale(
        "train_multigpu", "--num_gpus", "2", *CELL, "--rl_library", library, "--max_iterations", "3",
        "--seed", "5", "--log_root", str(logs), "--logger", "wandb", "--log_project_name", "scaling",
        "--log_group", "my_study", "--log_job_type", "parity", env=offline_environment(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    (run,) = offline_runs(tmp_path)
    by_rank = manifests(logs)
    assert by_rank[0]["tracker"] == {
        "logger": "wandb",
        "project": "scaling",
        "id": run.run_id,
        "name": f"Isaac-Cartpole-Direct_{library}_ws2_envs16_seed5",
    }
    assert by_rank[1]["tracker"] is None
    assert (run.project, run.group, run.job_type, run.name) == ("scaling", "my_study", "parity", run.name)
    assert run.name == by_rank[0]["tracker"]["name"]
    cell = {"task": "Isaac-Cartpole-Direct", "rl_library": library, "ml_framework": "torch", "world_size": 2}
    assert run.config.items() >= (cell | {"num_envs_per_rank": 16, "seed": 5}).items()
    assert run.kinds["history"] >= 1 and run.exit_code == 0
    assert run.path.is_relative_to(Path(by_rank[0]["run_dir"]).resolve())
    assert not list(run.path.rglob("events.out.tfevents.*")), "W&B links TensorBoard's events into its run folder"
    assert not list(Path(by_rank[1]["run_dir"]).rglob("wandb"))


def test_a_crash_on_another_rank_marks_the_run_failed(tmp_path):
    """Rank 1 crashes mid-run: rank 0's run (the only one) ends with a non-zero exit code, which W&B shows as
    failed."""
    result = rlscale(
        "train_multigpu", "--num_gpus", "2", *CELL, "--max_iterations", "30", "--hang_timeout", "0",
        "--log_root", str(tmp_path / "logs"), "--logger", "wandb",
        env={**offline_environment(tmp_path), "RLSCALE_INJECT_FAULT": "crash:rank=1,iteration=2"}, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode != 0
    (run,) = offline_runs(tmp_path)
    assert run.exit_code not in (None, 0)
    assert manifests(tmp_path / "logs")[0]["tracker"]["id"] == run.run_id


def test_resumed_runs_continue_the_tracker_run(tmp_path):
    """--resume auto continues the W&B run of the run it continues, in its run directory; --resume CHECKPOINT that of
    the run the checkpoint came from (skrl keeps it one folder below the run directory), in a new one."""
    logs = tmp_path / "logs"
    common = [*CELL, "--rl_library", "skrl", "--log_root", str(logs), "--logger", "wandb"]
    for total in ("2", "3"):
        result = rlscale(
            "train", *common, "--run_name", "long", "--resume", "auto", "--max_iterations", total,
            "--checkpoint_interval", "1", env=offline_environment(tmp_path), cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
    (first_dir,) = logs.glob("skrl/*/*_long")
    first_id = json.loads((first_dir / "manifest.json").read_text())["tracker"]["id"]
    (checkpoint,) = first_dir.glob("checkpoints/agent_32.pt")
    result = rlscale(
        "train", *common, "--resume", str(checkpoint), "--max_iterations", "1",
        env=offline_environment(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (second_dir,) = set(logs.glob("skrl/*/*")) - {first_dir}
    assert json.loads((second_dir / "manifest.json").read_text())["tracker"]["id"] == first_id
    runs = offline_runs(tmp_path)
    assert [run.run_id for run in runs] == [first_id] * 3
    assert [run.path.is_relative_to(first_dir) for run in runs] == [True, True, False]


def test_each_benchmark_seed_logs_a_run_of_its_own(tmp_path):
    """The training benchmark's --seeds runs are whole runs, each with a W&B run of job type benchmark."""
    result = rlscale(
        "benchmark", "training", *CELL, "--max_iterations", "2", "--warmup_iterations", "1",
        "--seeds", "1", "2", "--log_root", str(tmp_path / "logs"), "--output_path", str(tmp_path / "b{seed}.json"),
        "--logger", "wandb", env=offline_environment(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    runs = offline_runs(tmp_path)
    assert sorted(run.config["seed"] for run in runs) == [1, 2]
    assert {run.job_type for run in runs} == {"benchmark"} and len({run.run_id for run in runs}) == 2


def test_other_ranks_never_import_the_client():
    """rsl_rl imports wandb whenever it is installed; on a rank other than 0 of a W&B job it cannot, while rank 0
    still does."""
    code = (
        "import sys\n"
        "from rlscale.dist import RankInfo\n"
        "from rlscale.rl.tracking import keep_client_off\n"
        "keep_client_off(RankInfo(rank=int(sys.argv[1]), world_size=2), 'wandb')\n"
        "import rsl_rl.runners\n"
        "print(sys.modules.get('wandb') is not None)\n"
    )
    imported = [
        subprocess.run([sys.executable, "-c", code, rank], capture_output=True, text=True, check=True).stdout.strip()
        for rank in ("0", "1")
    ]
    assert imported == ["True", "False"]


def test_a_dry_run_imports_no_client(tmp_path):
    """The launcher checks --logger wandb without importing wandb (nor torch)."""
    code = (
        "import sys\n"
        "from rlscale.launch.launcher import main_train_multigpu\n"
        "main_train_multigpu(['--num_gpus', '2', '--task', 'Isaac-Cartpole', '--dry_run', '--logger', 'wandb'])\n"
        "print(sorted({'wandb', 'torch'} & set(sys.modules)))\n"
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"


WITHOUT_CLIENT = [
    case("train", "train --task Isaac-Cartpole --device cpu --logger wandb", "--logger wandb", "pip install",
         "'rlscale[wandb]'"),
    case("launcher", "train_multigpu --task Isaac-Cartpole --dry_run --logger wandb", "rlscale train_multigpu",
         "--logger wandb", "'rlscale[wandb]'"),
    case("benchmark", "benchmark training --task Isaac-Cartpole --device cpu --logger wandb", "--logger wandb",
         "'rlscale[wandb]'"),
    case("study", "logger: wandb", "logger: wandb", "'rlscale[wandb]'", how="study"),
]  # fmt: skip


@pytest.mark.parametrize("item", WITHOUT_CLIENT, ids=[item.id for item in WITHOUT_CLIENT])
def test_without_the_extra_wandb_is_refused_naming_it(item, tmp_path, monkeypatch, capsys):
    """Where wandb cannot be imported, asking for it is one line naming the extra to install, exit 2 (the study: its
    parse-time error), and nothing is written."""
    monkeypatch.setitem(sys.modules, "wandb", None)  # what an environment without the extra gives an import
    monkeypatch.chdir(tmp_path)
    code, out, lines = run_case(item, tmp_path, monkeypatch, capsys)
    assert (code, out) == ({"study": None}.get(item.how, 2), "")
    assert len(lines) == 1 and all(text in lines[0] for text in item.needs), lines
    assert tree(tmp_path) == []
