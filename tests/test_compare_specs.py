"""``rlscale benchmark compare --spec``: every committed spec under config/compare/ plans the comparison its result
folder holds, and a bad spec is refused in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rlscale.benchmark.compare.cli import main

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "config" / "compare"
RESULTS = {
    "rsl_rl_levers": "results/benchmarks/h200/levers_rsl_rl_skrl/rsl_rl_levers",
    "skrl_levers": "results/benchmarks/h200/levers_rsl_rl_skrl/skrl_levers",
    "rsl_rl_levers_65536": "results/benchmarks/h200/levers_placement_startup/rsl_rl_levers_65536",
    "rl_games_levers": "results/benchmarks/h200/levers_placement_startup/rl_games_levers",
    "rsl_rl_nan_check": "results/benchmarks/h200/levers_placement_startup/rsl_rl_nan_check",
    "rsl_rl_placement_1gpu": "results/benchmarks/h200/levers_placement_startup/rsl_rl_placement_1gpu",
    "go1_runtime_envs": "results/h200/robots/throughput",
    "go1_training_envs": "results/h200/robots/training_throughput",
    "g1_warp_training": "results/h200/warp_learning/g1_training",
    "go1_warp_training": "results/h200/warp_learning/go1_training",
    "robots_engines": "results/h100/engines_interleaved/training",
}
"""Each spec whose committed comparison kept its plan.json, and that folder."""
GRAPH_GAIN = {f"graph_gain_{library}" for library in ("rsl_rl", "rl_games", "skrl")}
"""The specs of results/h200x2/graph_gain/, whose runs went graph then eager in each repeat (no plan.json)."""
PLANNED_RUN = re.compile(r"^\[\d+/\d+\] (\S+) repeat (\d+): rlscale benchmark (.*)$")


def dry_run(capsys, spec: Path, output_dir: Path, *extra: str) -> list[tuple[str, int, int, list[str]]]:
    """The runs ``--dry_run`` plans for ``spec``: variant, repeat, seed and the benchmark's arguments before it."""
    assert main(["--spec", str(spec), "--output_dir", str(output_dir), "--dry_run", *extra]) == 0
    runs = []
    for line in capsys.readouterr().out.splitlines():
        variant, repeat, command = PLANNED_RUN.match(line).groups()
        arguments, seed = re.fullmatch(r"(.*) --seed (\d+) --output_path \S+", command).groups()
        runs.append((variant, int(repeat), int(seed), arguments.split()))
    assert not output_dir.exists()  # A dry run writes nothing.
    return runs


def test_every_spec_is_named_here():
    """A new spec comes with the folder of its committed result (or is a graph-gain spec)."""
    assert {path.stem for path in SPECS.glob("*.yaml")} == set(RESULTS) | GRAPH_GAIN


@pytest.mark.parametrize("name", sorted(RESULTS))
def test_spec_plans_its_committed_comparison(name, tmp_path, capsys):
    """The dry run plans the committed plan.json's variants, arguments, repeats and seeds, in its order."""
    plan = json.loads((ROOT / RESULTS[name] / "plan.json").read_text())
    common = list(plan["common"])
    if "--log_root" in common:  # Where the runs' scratch logs went on the GPU machine: not part of the comparison.
        del common[common.index("--log_root") : common.index("--log_root") + 2]
    expected = {variant["name"]: [variant["workflow"], *common, *variant["args"]] for variant in plan["variants"]}
    runs = dry_run(capsys, SPECS / f"{name}.yaml", tmp_path / "out")
    assert [variant for variant, *_ in runs[: len(expected)]] == list(expected)  # The baseline first.
    assert len(runs) == plan["repeats"] * len(expected)
    assert all(arguments == expected[variant] for variant, _, _, arguments in runs)
    assert all(seed == plan["base_seed"] + repeat for _, repeat, seed, _ in runs)


@pytest.mark.parametrize("name", sorted(GRAPH_GAIN))
def test_graph_gain_spec_plans_graph_against_eager(name, tmp_path, capsys):
    """Graph (the default step) is the baseline; eager differs by --no_cuda_graph alone, 5 repeats."""
    runs = dry_run(capsys, SPECS / f"{name}.yaml", tmp_path / "out")
    graph = next(arguments for variant, *_, arguments in runs if variant == "graph")
    eager = next(arguments for variant, *_, arguments in runs if variant == "eager")
    assert runs[0][0] == "graph" and eager == [*graph, "--no_cuda_graph"] and len(runs) == 10
    assert graph[graph.index("--rl_library") + 1] == name.removeprefix("graph_gain_")


def test_typed_repeats_win_over_the_spec(tmp_path, capsys):
    """--repeats on the command line replaces the spec's."""
    runs = dry_run(capsys, SPECS / "rsl_rl_nan_check.yaml", tmp_path / "out", "--repeats", "2")
    assert [(variant, repeat) for variant, repeat, *_ in runs] == [
        ("nan_check", 0),
        ("no_nan_check", 0),
        ("no_nan_check", 1),
        ("nan_check", 1),
    ]


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ("variants: {a: training, b: training}\ncommon: --task X\nrepeat: 3\n", [], "unknown key(s) repeat"),
        ("variants: [training, training]\ncommon: --task X\n", [], "variants must map each name"),
        ("variants: {a: training, b: training}\ncommon: [--task, X]\n", [], "common must be"),
        ("variants: {a: training, b: training}\ncommon: --task X\nrepeats: five\n", [], "repeats must be"),
        ("variants: {a: training, b: trainin}\ncommon: --task X\n", [], "unknown workflow 'trainin'"),
        ("variants: {a: training}\ncommon: --task X\n", [], "at least two --variant"),
        ("variants: {a: training, b: training}\ncommon: --seed 3\n", [], "common arguments"),
        ("- a list\n", [], "expected a mapping"),
        ("variants: {a: training, b: training}\ncommon: --task X\n", ["--variant", "c=training"], "give no --variant"),
    ],
)
def test_bad_spec_is_refused_in_one_line(tmp_path, capsys, text, extra, message):
    """Each bad spec is one line on stderr naming the problem, exit 2, and nothing written."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    with pytest.raises(SystemExit) as exit_info:
        main(["--spec", str(spec), "--output_dir", str(tmp_path / "out"), *extra])
    assert exit_info.value.code == 2
    stderr = capsys.readouterr().err
    assert message in stderr and stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()
