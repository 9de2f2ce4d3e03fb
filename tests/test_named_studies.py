"""Every result set made by a named study (config/studies/) is one command away: the command in its README's
"Command" section dry-runs, and plans exactly the runs whose outputs the set holds. Every result set's README follows
one template, and results/README.md indexes them all.

The GPU studies are dry-run on a faked two-GPU host (``CUDA_VISIBLE_DEVICES=0,1``, as tests/test_study_workflow.py
does), the default study of results/h100/default_study/ and the full matrix of results/h200/first_hour/ on a faked
one-GPU host. cpu4's four CPU ranks need four cores, which a smaller host refuses at parse time, so it is dry-run the
SLURM way (``cluster=slurm``: a cluster's nodes are not counted here), which plans the same runs. The robots'
scaling study, which has not run (its set holds the scaling model's prediction), is dry-run with its header's command
on a faked 8-GPU host.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
INDEX = ROOT / "results" / "README.md"
TEMPLATE = ["Hardware", "Software versions", "Command", "What came out", "Caveats"]
"""The sections of every result set's README, in this order."""
CELL = re.compile(r"results/([A-Za-z0-9_.-]+)/((?:benchmark|parity)/[^\s,]+?/seed\d+\.json)")
"""A benchmark bundle or parity record among the outputs ``snakemake -n`` lists: its study and its path in it."""


def readme_command(folder: str) -> list[str]:
    """The first shell block of the README's "## Command" section, as argv."""
    text = (ROOT / folder / "README.md").read_text()
    section = text.split("\n## Command\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)[1]
    return shlex.split(block.replace("\\\n", " "))


def header_command(config: str) -> list[str]:
    """The command in a study config's header comment (``#   snakemake ...``, with its continued lines), as argv."""
    lines = [line.removeprefix("#").strip() for line in (ROOT / config).read_text().splitlines()]
    start = next(index for index, line in enumerate(lines) if line.startswith("snakemake "))
    end = next(index for index in range(start, len(lines)) if not lines[index].endswith("\\"))
    return shlex.split(" ".join(line.removesuffix("\\") for line in lines[start : end + 1]))


def planned_cells(
    folder: str, tmp_path: Path, *test_only: str, gpus: str = "0,1", command: list[str] | None = None
) -> set[str]:
    """Dry-run the README's command (or ``command``) in an empty directory on a host with ``gpus`` visible; the cells
    it plans, as ``<study>/<path in it>``."""
    command = command or readme_command(folder)
    assert command[0] == "snakemake", command
    cut = command.index("--") if "--" in command else len(command)
    argv = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path), "-n", *command[1:cut]]
    if "--configfile" not in command:  # Snakemake's default, which it looks for in the working directory
        argv += ["--configfile", str(ROOT / "config" / "config.yaml")]
    argv += [*test_only, *command[cut:]]
    env = {**os.environ, "RLSCALE_LEASE_DIR": str(tmp_path / "lease"), "CUDA_VISIBLE_DEVICES": gpus}
    result = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert re.search(r"^plan: ", result.stdout + result.stderr, re.MULTILINE)  # The plan lines are printed.
    return {f"{study}/{path}" for study, path in CELL.findall(result.stdout)}


def bundles(folder: str) -> set[str]:
    """The benchmark bundles a study's copy holds, as paths in the study (``benchmark/...``)."""
    return {str(path.relative_to(ROOT / folder)) for path in (ROOT / folder / "benchmark").rglob("seed*.json")}


@pytest.mark.parametrize(
    ("folder", "study", "test_only"),
    [
        ("results/cpu4", "cpu4", ("--config", "cluster=slurm")),
        ("results/h200x2", "h200x2", ()),
        ("results/h200x2/ant", "ant_scaling", ()),
    ],
)
def test_scaling_study_plans_the_committed_bundles(folder, study, test_only, tmp_path):
    """The study plans one benchmark bundle per committed one (training, startup, runtime), and no other."""
    planned = {cell.removeprefix(f"{study}/") for cell in planned_cells(folder, tmp_path, *test_only)}
    assert {cell for cell in planned if cell.startswith("benchmark/")} == bundles(folder)


def test_parity_study_plans_the_committed_runs(tmp_path):
    """The parity study plans exactly the 24 runs whose records results/h200x2/parity/records.tgz holds."""
    with tarfile.open(ROOT / "results/h200x2/parity/records.tgz") as archive:
        records = {name.removeprefix("results/") for name in archive.getnames() if CELL.fullmatch(name)}
    assert len(records) == 24
    assert planned_cells("results/h200x2/parity", tmp_path) == records


def test_peer_study_plans_the_committed_pairs(tmp_path):
    """The peer study plans a training bundle (rlscale beside its peer) for each committed one: 3 libraries, 1 and 2
    GPUs, 4096 envs, seeds 1-5."""
    folder = ROOT / "results/h200x2/peer_like_for_like/bundles"
    committed = {
        f"peer_h200x2/benchmark/training/Isaac-Cartpole-Direct/{path.relative_to(folder)}"
        for path in folder.rglob("seed*.json")
    }
    planned = planned_cells("results/h200x2/peer_like_for_like", tmp_path)
    assert len(committed) == 30
    assert {cell for cell in planned if "/benchmark/training/" in cell} == committed


def test_full_matrix_on_one_gpu_plans_what_ran_of_it(tmp_path):
    """The full-matrix study on one GPU plans its 1-GPU cells: every bundle and parity record of the part that ran
    (results/h200/first_hour/second_run/, made under the default study's name of the time) among them."""
    outputs = ROOT / "results/h200/first_hour/second_run/outputs"
    committed = {f"full_matrix/{path.relative_to(outputs)}" for path in outputs.rglob("seed*.json")}
    planned = planned_cells("results/h200/first_hour", tmp_path, gpus="0")
    assert len(committed) == 40 and committed <= planned
    assert not any("/ws2/" in cell for cell in planned)


def test_index_names_every_result_set_and_study():
    """results/README.md links every result folder's README and names every study config and compare spec."""
    index = INDEX.read_text()
    for readme in (ROOT / "results").rglob("README.md"):
        folder = readme.parent.relative_to(ROOT / "results")
        if readme != INDEX:
            assert f"({folder}/README.md)" in index, folder
    for config in [*(ROOT / "config/studies").glob("*.yaml"), *(ROOT / "config/compare").glob("*.yaml")]:
        assert str(config.relative_to(ROOT)) in index, config.name


def test_every_result_readme_follows_the_template():
    """Each result set's README has the template's sections, in order, and no others."""
    for readme in (ROOT / "results").rglob("README.md"):
        if readme != INDEX:
            sections = re.findall(r"^## (.+)$", readme.read_text(), re.MULTILINE)
            assert sections == TEMPLATE, readme.relative_to(ROOT)


def test_default_study_on_one_gpu_plans_the_committed_runs(tmp_path):
    """The default study on one GPU plans exactly the benchmark bundles and parity records of
    results/h100/default_study/ (world size 2 dropped: one GPU is visible)."""
    folder = ROOT / "results/h100/default_study"
    committed = {
        f"scaling/{path.relative_to(folder)}"
        for stage in ("benchmark", "parity")
        for path in (folder / stage).rglob("seed*.json")
    }
    assert len(committed) == 15
    assert planned_cells("results/h100/default_study", tmp_path, gpus="0") == committed


def test_robots_study_on_one_gpu_plans_the_committed_bundles(tmp_path):
    """The robots study on one GPU plans exactly the benchmark bundles of results/h100/robots_study/: both robots'
    training, startup and runtime benchmarks, and no parity run."""
    committed = {f"robots/{path}" for path in bundles("results/h100/robots_study")}
    assert len(committed) == 6
    assert planned_cells("results/h100/robots_study", tmp_path, gpus="0") == committed


def test_robots_scaling_study_plans_every_world_size_on_eight_gpus(tmp_path):
    """The robots' scaling study (config/studies/robots_scaling.yaml, not run yet: results/predictions/robots_scaling/
    holds its prediction) dry-runs with its header's command on a faked 8-GPU host: both robots at world sizes 1, 2,
    4 and 8, three seeds each, as training benchmarks and parity runs."""
    command = header_command("config/studies/robots_scaling.yaml")
    assert command[-2:] == ["--configfile", "config/studies/robots_scaling.yaml"] and "gpu=8" in command
    planned = planned_cells("", tmp_path, gpus="0,1,2,3,4,5,6,7", command=command)
    expected = {
        f"robots_scaling/{stage}/{task}/rsl_rl/ws{size}/{cell}/seed{seed}.json"
        for task in ("Rlscale-Go1-Flat", "Rlscale-G1-Flat")
        for size in (1, 2, 4, 8)
        for seed in (1, 2, 3)
        for stage, cell in (("benchmark/training", "envs16384"), ("parity", "lr-none_norm-library"))
    }
    assert {cell for cell in planned if "/benchmark/training/" in cell or "/parity/" in cell} == expected
