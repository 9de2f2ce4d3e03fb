"""`rlscale train` end to end on CPU: the four library paths, resume, learning, and an Isaac Lab command line (bad
input: tests/test_bad_inputs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from library_paths import PATHS
from rlscale_command import rlscale

from rlscale.manifest import read_manifest
from rlscale.rl import load_adapter
from rlscale.rl.agent_overrides import apply_override

CHECKPOINTS_OF_3_ITERATIONS = {"rsl_rl": [1, 3], "rl_games": [3, 3], "skrl": [3]}
"""Iterations the checkpoints of a 3-iteration Isaac-Cartpole run hold, its configs saving every 25-50 iterations
(docs/troubleshooting.md): rsl_rl's periodic one at iteration index 0, and each library's one at the end (rl_games
writes its own beside rlscale's)."""


def only_run_dir(log_root: Path) -> Path:
    manifests = list(log_root.rglob("manifest.json"))
    assert len(manifests) == 1, manifests
    return manifests[0].parent


def most_tensorboard_points(run_dir: Path) -> int:
    """The most points any scalar has in the TensorBoard events under ``run_dir`` (0 without any)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    counts = [0]
    for events in run_dir.rglob("events.out.tfevents.*"):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        counts += [len(accumulator.Scalars(tag)) for tag in accumulator.Tags()["scalars"]]
    return max(counts)


class TestLibraryPaths:
    @pytest.mark.parametrize(("library", "framework"), PATHS)
    def test_train_then_resume_continues_the_iteration_count(self, tmp_path, library, framework):
        """Each path leaves TensorBoard points of every iteration, the checkpoints the documented cadence gives and a
        completed manifest, its console shows no NaN; a resume from its checkpoint file counts on from there in a new
        run, and a rerun with ``--resume auto`` and a larger total continues the run in place from its final
        checkpoint, training only the rest."""
        common = ["--task", "Isaac-Cartpole", "--rl_library", library, "--ml_framework", framework]
        common += ["--num_envs", "64", "--device", "cpu"]
        in_place = [*common, "--resume", "auto", "--log_root", str(tmp_path / "a")]
        first = rlscale("train", *in_place, "--max_iterations", "3")
        assert first.returncode == 0, first.stderr[-3000:]
        assert "nan" not in first.stdout
        assert "--resume auto: starting from scratch in" in first.stdout
        run_dir = only_run_dir(tmp_path / "a")
        assert most_tensorboard_points(run_dir) == 3
        manifest = json.loads((run_dir / "manifest.json").read_text())
        found = load_adapter(library).find_checkpoints(run_dir, manifest["agent_cfg"], framework)
        assert sorted(iterations for iterations, _ in found) == CHECKPOINTS_OF_3_ITERATIONS[library], found
        assert manifest["status"] == "completed"
        assert manifest["iterations_completed"] == 3
        assert manifest["args"]["rl_library"] == library and manifest["world_size"] == 1
        assert manifest["versions"]["torch"] and manifest["git"].keys() == {"sha", "dirty"}
        checkpoint = Path(manifest["checkpoint"])
        assert checkpoint.is_file()
        assert len(manifest["iterations"]) == 3

        from_file = rlscale(
            "train", *common, "--max_iterations", "2", "--resume", str(checkpoint), "--log_root", str(tmp_path / "b")
        )
        assert from_file.returncode == 0, from_file.stderr[-3000:]
        resumed = json.loads((only_run_dir(tmp_path / "b") / "manifest.json").read_text())
        assert (resumed["start_iteration"], resumed["iterations_completed"]) == (3, 5)
        assert [record["iteration"] for record in resumed["iterations"]] == [3, 4]
        assert "it 5/5" in from_file.stdout

        continued = rlscale("train", *in_place, "--max_iterations", "5")
        assert continued.returncode == 0, continued.stderr[-3000:]
        assert only_run_dir(tmp_path / "a") == run_dir  # the rerun appended to the first run's directory
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert (manifest["start_iteration"], manifest["iterations_completed"]) == (3, 5)
        assert [record["iteration"] for record in manifest["iterations"]] == [0, 1, 2, 3, 4]  # the first's kept
        assert Path(manifest["resumed_from"]).name in continued.stdout and "(3/5)" in continued.stdout
        assert Path(manifest["resumed_from"]).parent.is_relative_to(manifest["run_dir"])
        segments = read_manifest(run_dir / "manifest.json").segments  # the first invocation's segment is kept
        assert [(segment.first_iteration, segment.last_iteration) for segment in segments] == [(0, 2), (3, 4)]
        assert [(segment.world_size, segment.num_envs_per_rank, segment.status) for segment in segments] == [
            (1, 64, "completed")
        ] * 2
        assert [segment.began for segment in segments] == ["start", "resume"]
        assert segments[0].start_time <= segments[1].start_time == manifest["start_time"]
        assert segments[1].wall_time_s == manifest["wall_time_s"] and segments[0].wall_time_s > 0


class TestDeterminism:
    def test_same_seed_same_policy_and_different_seed_differs(self, tmp_path):
        """Two CPU runs with one seed end with identical parameters; another seed does not."""

        def digest(seed: str, name: str) -> str:
            result = rlscale(
                "train", "--task", "Isaac-Cartpole-Direct", "--num_envs", "32", "--max_iterations", "2",
                "--device", "cpu", "--seed", seed, "--log_root", str(tmp_path / name),
            )  # fmt: skip
            assert result.returncode == 0, result.stderr[-2000:]
            return json.loads((only_run_dir(tmp_path / name) / "manifest.json").read_text())["param_digest"]

        first = digest("7", "a")
        assert first == digest("7", "b")
        assert first != digest("8", "c")


@pytest.mark.slow
class TestLearning:
    def test_rsl_rl_balances_the_pole(self, tmp_path):
        """rsl_rl with Isaac Lab's defaults (fewer envs) lifts the mean episode length from random to >= 250/300."""
        result = rlscale(
            "train", "--task", "Isaac-Cartpole", "--num_envs", "512", "--device", "cpu", "--log_root", str(tmp_path),
            timeout=600,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        iterations = json.loads((only_run_dir(tmp_path) / "manifest.json").read_text())["iterations"]
        assert len(iterations) == 150
        assert iterations[0]["mean_episode_length"] < 150  # a random policy drops the pole early
        assert iterations[-1]["mean_episode_length"] >= 250


class TestIsaacLabCommandLine:
    def test_alias_overrides_and_headless_reach_the_run(self, tmp_path):
        """An Isaac Lab line runs: the alias as its canonical task, env.* in the task, agent.* in the agent config."""
        result = rlscale(
            "train", "--task", "Isaac-Cartpole-v0", "--num_envs", "16", "--max_iterations", "1", "--device", "cpu",
            "env.episode_length_s=0.1", "--headless", "agent.algorithm.learning_rate=5e-4", "--log_root", str(tmp_path),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        run_dir = only_run_dir(tmp_path)
        assert run_dir.parent == tmp_path / "rsl_rl" / "Isaac-Cartpole"
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert (manifest["args"]["task"], manifest["args"]["task_alias"]) == ("Isaac-Cartpole", "Isaac-Cartpole-v0")
        assert manifest["args"]["env_overrides"] == {"episode_length_s": 0.1}
        assert manifest["agent_cfg"]["algorithm"]["learning_rate"] == 5e-4
        # 0.1 s episodes are 6 control steps: every env finished at least two in the 16-step rollout (default: 300).
        assert 0 < manifest["iterations"][0]["mean_episode_length"] <= 6


class TestAgentOverride:
    def test_nested_numeric_and_yaml_values(self):
        """Dotted keys reach nested entries; 5e-4 is a float, not YAML 1.1's string."""
        cfg = {"algorithm": {"learning_rate": 1e-3, "schedule": "adaptive"}, "actor": {"hidden_dims": [32, 32]}}
        apply_override(cfg, "algorithm.learning_rate=5e-4", "rsl_rl")
        apply_override(cfg, "actor.hidden_dims=[64, 64]", "rsl_rl")
        apply_override(cfg, "algorithm.schedule=fixed", "rsl_rl")
        assert cfg == {"algorithm": {"learning_rate": 5e-4, "schedule": "fixed"}, "actor": {"hidden_dims": [64, 64]}}

    @pytest.mark.parametrize("override", ["algorithm", "=3", "algorithm.nope=1", "nope.learning_rate=1"])
    def test_malformed_or_unknown_keys_are_errors(self, override):
        """A typo in a key must not silently add a setting nobody reads."""
        with pytest.raises(ValueError):
            apply_override({"algorithm": {"learning_rate": 1e-3}}, override, "rsl_rl")


class TestManifestDevice:
    def test_names_the_gpu_by_uuid_as_well_as_by_index(self, monkeypatch):
        """``cuda:0`` of a rank that sees only its own GPU is not GPU 0 of the host: the UUID says which it was."""
        import types

        import torch

        from rlscale.device import CPU, Device
        from rlscale.manifest import device_description

        uuids = {0: "aaaa-0000", 1: "bbbb-1111"}
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H200")
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: types.SimpleNamespace(uuid=uuids[index]))
        assert device_description(Device("cuda", 1))["gpu_uuid"] == "GPU-bbbb-1111"
        assert device_description(CPU)["gpu_uuid"] is None
