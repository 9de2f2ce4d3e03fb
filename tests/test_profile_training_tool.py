"""``rlscale profile_training`` runs ``rlscale train``'s phases under the torch profiler, and keeps up with the run
API on CPU, where CI sees it."""

import json

from rlscale_command import rlscale


def test_profiles_the_requested_iterations_of_a_cpu_run(tmp_path):
    out = tmp_path / "profile"
    train = ["--task", "Isaac-Cartpole-Direct", "--rl_library", "rsl_rl", "--num_envs", "16", "--max_iterations", "5"]
    result = rlscale(
        *("profile_training", "--out", str(out), "--first", "2", "--count", "2"),
        *("--", *train, "--device", "cpu", "--log_root", str(tmp_path / "runs")),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((out / "rank0_summary.json").read_text())
    assert summary["status"] == "completed"
    profiled = summary["profiled_iterations"]
    assert [record["iteration"] for record in profiled] == [2, 3]
    for record in profiled:
        assert record["env_step_host_s"] > 0 and 0 < record["collection_s"] < record["iteration_s"]
    assert "env.step" in (out / "rank0_table.txt").read_text()


def test_refused_in_one_line_without_train_arguments(tmp_path):
    """No `rlscale train` arguments after --: one line, exit 2, nothing written."""
    out = tmp_path / "profile"
    result = rlscale("profile_training", "--out", str(out))
    assert result.returncode == 2 and "after --" in result.stderr and result.stderr.count("\n") == 1
    assert not out.exists()
