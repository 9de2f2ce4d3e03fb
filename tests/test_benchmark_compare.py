"""Tests of ``rlscale benchmark compare``: the interleaved order, the pairing and intervals, the files, bad input."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime

import pandas as pd
import psutil
import pytest
from rlscale_command import rlscale

from rlscale.benchmark.compare.cli import main
from rlscale.benchmark.compare.plan import PLAN_FILE, parse_variant, planned_runs, run_order
from rlscale.benchmark.compare.run import run_one
from rlscale.benchmark.compare.summary import (
    CSV_FILE,
    JSON_FILE,
    MARKDOWN_FILE,
    quoted,
    ratio_interval,
    verdict,
    write_summary,
)

COMMON = ["--task", "Isaac-Cartpole-Direct", "--rl_library", "rsl_rl", "--device", "cpu", "--max_iterations", "2"]
"""The smallest real training benchmark: 2 iterations (1 warm-up, 1 measured) of Cartpole on CPU."""
PROGRESS_LINE = re.compile(r"^\[\d+/\d+\] (\S+) repeat (\d+): ", re.MULTILINE)
"""The line the tool prints as each run ends: ``[3/6] broken repeat 0: FAILED ...``."""


class TestPlan:
    def test_order_rotates_each_repeat(self):
        """Repeat r starts with the r-th variant, so no variant always goes first."""
        assert [run_order(["A", "B", "C"], repeat) for repeat in range(4)] == [
            ["A", "B", "C"],
            ["B", "C", "A"],
            ["C", "A", "B"],
            ["A", "B", "C"],
        ]

    def test_every_variant_of_a_repeat_shares_its_seed(self):
        """Repeat r runs every variant once with base seed + r, at the position the rotation gives it."""
        runs = planned_runs(["A", "B"], repeats=2, base_seed=10)
        assert [(run["variant"], run["repeat"], run["position"], run["seed"]) for run in runs] == [
            ("A", 0, 0, 10),
            ("B", 0, 1, 10),
            ("B", 1, 0, 11),
            ("A", 1, 1, 11),
        ]

    def test_variant_with_environment_and_overrides(self):
        """Leading KEY=VALUE words are the variant's environment; then the workflow and its own arguments."""
        variant = parse_variant("ll=NCCL_PROTO=LL A_B='x y' training_multigpu --num_gpus 2 agent.seed=3")
        assert variant.name == "ll" and variant.workflow == "training_multigpu"
        assert variant.env == {"NCCL_PROTO": "LL", "A_B": "x y"}
        assert variant.args == ("--num_gpus", "2", "agent.seed=3")

    def test_variant_arguments_override_common_ones(self, tmp_path):
        """A variant's own options come after the common ones, where argparse lets the last one win."""
        argv = parse_variant("big=training --num_envs 16").command(["--num_envs", "8"], 3, tmp_path / "b.json")
        assert argv[argv.index("benchmark") :] == [
            *("benchmark", "training", "--num_envs", "8", "--num_envs", "16"),
            *("--seed", "3", "--output_path", str(tmp_path / "b.json")),
        ]


class TestBadInput:
    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["--variant", "a=training"], "at least two --variant"),
            (["--variant", "a=training", "--variant", "b=trainin"], "unknown workflow 'trainin'"),
            (["--variant", "a=training", "--variant", "1b=training"], "expected NAME=WORKFLOW"),
            (["--variant", "a=training", "--variant", "b=X=1"], "no workflow after the environment"),
            (["--variant", "a=training", "--variant", "a=runtime"], "names must differ"),
            (["--variant", "a=training", "--variant", "b=training", "--repeats", "0"], "at least 1"),
            (["--variant", "a=training", "--variant", "b=training --seed 3"], "--variant b sets --seed"),
            (["--variant", "a=training", "--variant", "b=training", "--", "--output_path=x"], "common arguments"),
        ],
    )
    def test_refused_in_one_line_with_nothing_written(self, tmp_path, capsys, argv, message):
        """Each bad command line is one line on stderr, exit 2, and no output directory."""
        with pytest.raises(SystemExit) as exit_info:
            main(["--output_dir", str(tmp_path / "out"), *argv])
        assert exit_info.value.code == 2
        stderr = capsys.readouterr().err
        assert message in stderr and stderr.count("\n") == 1
        assert not (tmp_path / "out").exists()

    def test_summarise_only_needs_a_plan(self, tmp_path, capsys):
        """Re-tabulating a directory without a comparison is refused in one line."""
        with pytest.raises(SystemExit) as exit_info:
            main(["--output_dir", str(tmp_path), "--summarise_only"])
        assert exit_info.value.code == 2 and "plan.json does not exist" in capsys.readouterr().err


class TestRunOne:
    def test_timeout_stops_the_run_and_is_recorded(self, tmp_path):
        """A run past --run_timeout_s is stopped (its process group signalled) and marked timed out: it never gets to
        finish its sleep."""
        code = "import time; print('started', flush=True); time.sleep(60); print('finished', flush=True)"
        outcome = run_one([sys.executable, "-c", code], dict(os.environ), tmp_path / "run.log", timeout_s=0.5)
        assert outcome["timed_out"] and outcome["exit_code"] != 0
        assert (tmp_path / "run.log").read_text().splitlines()[1:] == ["started"]  # after the command line


def fake_bundle(fps: float, world_size: int = 1) -> dict:
    """The bundle fields the comparison reads."""
    return {
        "run": {"status": "completed"},
        "runtime": {"total_fps": {"mean": fps}, "total_wall_time_s": 1.0, "startup_time_s": {}},
        "resources": {"gpu_process_mem_gb": 2.5},
        "extra": {"world_size": world_size, "num_envs_per_rank": 64},
    }


class TestSummary:
    @pytest.mark.parametrize(
        ("figure", "text"),
        [
            ({"median": 7_021_500.0, "low": 5_604_000.0, "high": 999_700.0, "coverage": 0.96}, "7022 [5604, 1000]"),
            ({"median": 431_000.0, "low": 385_400.0, "high": 438_600.0, "coverage": 0.96}, "431 [385, 439]"),
            ({"median": 2.5, "low": 0.0123, "high": 12.34, "coverage": 0.96}, "0.0025 [1.23e-05, 0.0123]"),
            (
                {"median": 431_000.0, "low": 385_400.0, "high": 438_600.0, "coverage": 0.9375},
                "431 [385, 439] (93.8% range)",
            ),
        ],
        ids=["millions", "thousands", "small", "range"],
    )
    def test_throughput_is_quoted_without_a_positive_exponent(self, figure, text):
        assert quoted(figure, 1e3) == text

    @pytest.mark.parametrize(
        ("ratios", "interval", "expected"),
        [
            # Six pairs: only their range covers 95 % (1 - 2 / 64).
            ([1.1, 1.2, 1.15, 1.12, 1.3, 1.05], (1.135, 1.05, 1.3, 1 - 2 / 64, 6, 2 / 64), "higher"),
            ([0.8, 0.9, 0.85, 0.95, 0.7, 0.99], (0.875, 0.7, 0.99, 1 - 2 / 64, 6, 2 / 64), "lower"),
            # Nine pairs: [x(2), x(8)], 1 - 2 × 10 / 512. One pair below 1 leaves the interval clear of it.
            ([0.9, *(1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8)], (1.4, 1.1, 1.7, 1 - 20 / 512, 9, 20 / 512), "higher"),
            # ... and two below 1 do not: x(2) = 0.95.
            (
                [0.9, 0.95, *(1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7)],
                (1.3, 0.95, 1.6, 1 - 20 / 512, 9, 92 / 512),
                "inconclusive",
            ),
            # Five pairs have no 95 % interval: their range covers 93.75 %, and all 5 above 1 is a sign test p of 1/16.
            (
                [1.1, 1.2, 1.15, 1.12, 1.3],
                (1.15, 1.1, 1.3, 0.9375, 5, 2 / 32),
                "too few pairs (< 6); all 5 above 1, sign test p = 0.0625",
            ),
            ([0.9, 1.1, 1.0, 1.05, 0.95], (1.0, 0.9, 1.1, 0.9375, 5, 1.0), "too few pairs (< 6)"),
        ],
        ids=["six-higher", "six-lower", "nine-higher", "nine-inconclusive", "five-one-side", "five-mixed"],
    )
    def test_interval_and_verdict_by_hand(self, ratios, interval, expected):
        """The ratios' interval, sign test and verdict, worked out by hand (exact order statistics, not percentiles)."""
        ratio = ratio_interval(ratios)
        keys = ("median", "low", "high", "coverage", "n", "sign_test_p")
        assert [ratio[key] for key in keys] == pytest.approx(interval)
        assert verdict(ratio) == expected

    def test_paired_ratios_and_intervals_from_the_bundles(self, tmp_path):
        """With a 1-rank baseline and a 2-rank variant over 3 repeats (one of the variant's runs failed), the ratios
        pair runs by repeat, skip the unpaired one; two ratios' median is their mean, their interval their range,
        which covers the median with 1 - 2 / 4."""
        fps = {"one": [100.0, 120.0, 90.0], "two": [190.0, None, 200.0]}
        plan = {
            "variants": [
                {"name": "one", "workflow": "training", "args": [], "env": {}},
                {"name": "two", "workflow": "training_multigpu", "args": ["--num_gpus", "2"], "env": {}},
            ],
            "common": ["--task", "T"],
            "repeats": 3,
            "base_seed": 0,
            "outcomes": {},
        }
        for name, values in fps.items():
            (tmp_path / name).mkdir()
            for repeat, value in enumerate(values):
                outcome = {"exit_code": 0 if value else 1, "timed_out": False, "wall_s": 1.0}
                plan["outcomes"][f"{name}/repeat{repeat}"] = outcome
                if value:
                    bundle = fake_bundle(value, world_size=1 if name == "one" else 2)
                    (tmp_path / name / f"repeat{repeat}.json").write_text(json.dumps(bundle))
        (tmp_path / PLAN_FILE).write_text(json.dumps(plan))
        summary = write_summary(tmp_path)
        one, two = summary["variants"]
        assert (one["completed"], two["completed"]) == (3, 2)
        assert one["throughput"]["median"] == 100.0
        ratios = [190.0 / 100.0, 200.0 / 90.0]
        assert two["ratio_per_repeat"] == {0: pytest.approx(ratios[0]), 2: pytest.approx(ratios[1])}
        keys = ("median", "low", "high", "coverage", "n", "sign_test_p")
        assert [two["ratio"][key] for key in keys] == pytest.approx([(1.9 + 200 / 90) / 2, 1.9, 200 / 90, 0.5, 2, 0.5])
        per_rank = [two["per_rank_ratio"][key] for key in keys[:5]]
        assert per_rank == pytest.approx([(1.9 + 200 / 90) / 4, 0.95, 100 / 90, 0.5, 2])
        # Both ratios are above 1, but 2 pairs settle nothing: p = 2 / 4.
        assert two["verdict"] == "too few pairs (< 6); all 2 above 1, sign test p = 0.5"
        table = pd.read_csv(tmp_path / CSV_FILE)
        assert table["status"].tolist().count("failed (exit 1, no bundle)") == 1
        assert table["gpu_process_mem_gb"].dropna().tolist() == [2.5] * 5
        markdown = (tmp_path / MARKDOWN_FILE).read_text()
        assert "| two | 2 |" in markdown and "| one | `training` | 3/3 |" in markdown


@pytest.fixture(scope="module")
def real_comparison(tmp_path_factory):
    """One real comparison on CPU: a baseline, a variant with more envs and its own environment, and a variant that
    always fails (refused arguments), over 2 repeats."""
    directory = tmp_path_factory.mktemp("compare") / "out"
    argv = [
        *("benchmark", "compare", "--repeats", "2", "--base_seed", "5"),
        *("--output_dir", str(directory), "--variant", "small=training"),
        *("--variant", "large=RLSCALE_TEST_MARK=on training --num_envs 16"),
        *("--variant", "broken=training --num_envs 0", "--"),
        *COMMON,
        *("--num_envs", "8", "--log_root", str(directory.parent / "runs")),
    ]
    result = rlscale(*argv, env={"RLSCALE_LEASE_DIR": str(directory.parent / "lease")})
    return directory, result


class TestRealComparison:
    def test_runs_interleaved_and_rotated(self, real_comparison):
        """The runs ran in turns, rotated each repeat, one seed per repeat: judged by what ran, the progress line
        printed after each run and the bundles' own start and end times, not by the planned order."""
        directory, result = real_comparison
        executed = [(name, int(repeat)) for name, repeat in PROGRESS_LINE.findall(result.stdout)]
        assert executed == [("small", 0), ("large", 0), ("broken", 0), ("large", 1), ("broken", 1), ("small", 1)]
        runs = []  # The broken variant's runs wrote no bundle.
        for name, repeat in (("small", 0), ("large", 0), ("large", 1), ("small", 1)):
            bundle = json.loads((directory / name / f"repeat{repeat}.json").read_text())
            start, end = (datetime.fromisoformat(bundle["run"][key]) for key in ("start_time_utc", "end_time_utc"))
            runs.append((start, end, name, repeat, bundle["run"]["seed"]))
        assert [run[2:] for run in sorted(runs)] == [("small", 0, 5), ("large", 0, 5), ("large", 1, 6), ("small", 1, 6)]
        assert all(earlier[1] <= later[0] for earlier, later in itertools.pairwise(sorted(runs)))  # one at a time
        table = pd.read_csv(directory / CSV_FILE)
        assert list(zip(table["variant"], table["repeat"], table["position"], strict=True)) == [
            *(("small", 0, 0), ("large", 0, 1), ("broken", 0, 2)),
            *(("large", 1, 0), ("broken", 1, 1), ("small", 1, 2)),
        ]
        assert "k env-steps/s" in result.stdout and "WARNING: 2 repeat(s)" in result.stderr

    def test_failed_runs_are_recorded_not_fatal(self, real_comparison):
        """The broken variant's runs are failures in the table; the others completed; the tool exits 1."""
        directory, result = real_comparison
        assert result.returncode == 1, result.stderr
        table = pd.read_csv(directory / CSV_FILE)
        broken = table["variant"] == "broken"
        assert table.loc[broken, "status"].str.startswith("failed (exit 2").all()
        assert (table.loc[~broken, "status"] == "completed").all()
        assert "--num_envs" in (directory / "broken" / "repeat0.log").read_text()
        summary = json.loads((directory / JSON_FILE).read_text())
        assert [variant["completed"] for variant in summary["variants"]] == [2, 2, 0]

    def test_bundles_and_ratios(self, real_comparison):
        """Each run wrote its bundle with its repeat's seed and the variant's env count; the ratios are those of the
        bundles' own total_fps.mean, paired by repeat."""
        directory, _ = real_comparison
        fps = {}
        for name, num_envs in (("small", 8), ("large", 16)):
            for repeat in range(2):
                bundle = json.loads((directory / name / f"repeat{repeat}.json").read_text())
                assert bundle["run"]["seed"] == 5 + repeat and bundle["run"]["num_envs"] == num_envs
                fps[name, repeat] = bundle["runtime"]["total_fps"]["mean"]
        large = json.loads((directory / JSON_FILE).read_text())["variants"][1]
        ratios = [fps["large", repeat] / fps["small", repeat] for repeat in range(2)]
        assert list(large["ratio_per_repeat"].values()) == pytest.approx(ratios)
        expected = [sum(ratios) / 2, min(ratios), max(ratios), 0.5]  # two pairs: their mean and range, 1 - 2 / 4
        assert [large["ratio"][key] for key in ("median", "low", "high", "coverage")] == pytest.approx(expected)
        assert "RLSCALE_TEST_MARK=on training --num_envs 16" in (directory / MARKDOWN_FILE).read_text()

    def test_summarise_only_rebuilds_the_same_tables(self, real_comparison):
        """--summarise_only regenerates identical tables from the plan and the bundles alone."""
        directory, _ = real_comparison
        before = {name: (directory / name).read_text() for name in (CSV_FILE, MARKDOWN_FILE, JSON_FILE)}
        for name in before:
            (directory / name).unlink()
        assert main(["--output_dir", str(directory), "--summarise_only"]) == 0
        assert {name: (directory / name).read_text() for name in before} == before


class TestInterrupt:
    def test_ctrl_c_stops_the_run_and_its_children_and_tabulates(self, tmp_path):
        """SIGINT during a run stops it with everything it started, runs nothing further, writes the tables and
        exits 130."""
        directory = tmp_path / "out"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "RLSCALE_LEASE_DIR": str(tmp_path / "lease")}
        argv = [
            *(
                sys.executable,
                "-m",
                "rlscale",
                "benchmark",
                "compare",
                "--repeats",
                "1",
                "--output_dir",
                str(directory),
            ),
            *("--variant", "a=training", "--variant", "b=training", "--", *COMMON[:-1], "100000", "--num_envs", "8"),
            *("--log_root", str(tmp_path / "runs")),
        ]
        compare_process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        log = directory / "a" / "repeat0.log"
        deadline = time.monotonic() + 60
        while not (log.is_file() and log.read_text().count("\n") > 1) and time.monotonic() < deadline:  # It prints.
            time.sleep(0.2)
        children = psutil.Process(compare_process.pid).children(recursive=True)
        assert children, "the run had not started"
        compare_process.send_signal(signal.SIGINT)
        stdout, _ = compare_process.communicate(timeout=120)
        assert compare_process.returncode == 130
        assert not [child for child in children if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]
        table = pd.read_csv(directory / CSV_FILE)
        assert table["status"].tolist()[1] == "not run" and table["status"][0] != "completed"  # b never started
        assert "[1/2] a repeat 0: " in stdout
