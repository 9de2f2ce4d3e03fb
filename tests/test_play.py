"""``rlscale play``: a checkpoint's policy run and filmed.

Bad input is refused in one line, exit code 2, nothing written. A Cartpole checkpoint of each library and ML framework
plays without a video, writing nothing, and the adapters' deterministic policy is the action each library's own
evaluation takes on the same observations (``tests/evaluation_probe.py``). The video writer is checked on made-up
frames. The robots' part (marked ``robots``, as tests/test_robots.py: MJX compiles slowly
on the CPU) trains a tiny Go1 and G1 checkpoint and films a few frames of each on the CPU (MuJoCo's EGL through
Mesa), then reads the files back: format, size, frame count and timing, pictures that are not blank and show the
robot's colours.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from physics_support import requires_warp
from rlscale_command import rlscale
from run_manifests import manifest_data

from rlscale.run.play import main as play_main
from rlscale.run.video import video_file

pytestmark = pytest.mark.extras  # make test-extras

ROBOTS = ("Rlscale-Go1-Flat", "Rlscale-G1-Flat")
ROBOT_ENVS = 4
TIMEOUT_S = 600
"""Of each rlscale child: a robot trained, evaluated or filmed on CPU takes minutes."""
POLICY_HZ = 50  # the robots' control rate (sim_dt 0.005, decimation 4)
PATHS = [("rsl_rl", "torch"), ("rl_games", "torch"), ("skrl", "torch"), ("skrl", "jax")]
PROBE = Path(__file__).with_name("evaluation_probe.py")
MEAN_BEYOND_THE_CLAMP = "params.network.space.continuous.mu_init={name: const_initializer, val: 0.1}"


def tree(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def trained(
    log_root: Path,
    task_id: str,
    num_envs: int,
    *options: str,
    library: str = "rsl_rl",
    framework: str = "torch",
    env: dict | None = None,
) -> Path:
    """The final checkpoint of a short run of ``task_id`` on the CPU (one iteration unless ``options`` say)."""
    result = rlscale(
        "train", "--task", task_id, "--rl_library", library, "--ml_framework", framework, "--num_envs", str(num_envs),
        "--max_iterations", "1", "--device", "cpu", "--log_root", str(log_root), *options, env=env, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (manifest,) = log_root.rglob("manifest.json")
    return Path(json.loads(manifest.read_text())["checkpoint"])


# --- bad input --------------------------------------------------------------------------------------------------


@pytest.fixture
def fake_runs(tmp_path):
    """Empty checkpoints where each library saves them in run directories whose manifests name a task and a library:
    refusals never load them."""
    runs = {}
    for name, task, library, checkpoint in [
        ("go1", "Rlscale-Go1-Flat", "rsl_rl", "model_0.pt"),
        ("cartpole", "Isaac-Cartpole", "rsl_rl", "model_0.pt"),
        ("rl_games", "Isaac-Cartpole", "rl_games", "nn/model_1.pth"),
        ("skrl", "Isaac-Cartpole", "skrl", "checkpoints/agent_16.pickle"),
        ("newlib", "Isaac-Cartpole", "newlib", "model_0.pt"),
    ]:
        run = tmp_path / "runs" / name
        (run / checkpoint).parent.mkdir(parents=True)
        (run / "manifest.json").write_text(json.dumps(manifest_data({"args": {"task": task, "rl_library": library}})))
        (run / checkpoint).write_bytes(b"")
        runs[name] = run / checkpoint
    (tmp_path / "runs" / "bare").mkdir()
    runs["bare"] = tmp_path / "runs" / "bare" / "model_0.pt"
    runs["bare"].write_bytes(b"")
    return runs


def refused(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        play_main(argv)
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(error.strip().splitlines()) == 1, error
    return error


@pytest.mark.parametrize(
    ("run", "args", "expected"),
    [
        ("go1", ["--checkpoint", "no/such/model.pt"], "--checkpoint no/such/model.pt: no such file"),
        ("bare", [], "no manifest.json beside it"),
        ("newlib", [], "--checkpoint: play loads rsl_rl, rl_games, skrl checkpoints, not newlib"),
        ("rl_games", ["--steps", "0"], "--steps 0: must be at least 1"),  # past the checkpoint's checks
        ("skrl", ["--steps", "0"], "--steps 0: must be at least 1"),
        ("go1", ["--command", "1,0"], "argument --command: invalid parse_command value: '1,0'"),
        ("go1", ["--steps", "0"], "--steps 0: must be at least 1"),
        ("go1", ["--num_envs", "0"], "--num_envs 0: must be at least 1"),
        ("go1", ["--seed", "-1"], "--seed -1: must be >= 0"),
        ("go1", ["--camera", "above"], "argument --camera: invalid choice: 'above'"),
        ("go1", ["--fps", "10"], "--fps: only with --video"),
        ("go1", ["--camera", "side", "--size", "320x240"], "--camera, --size: only with --video"),
        ("cartpole", ["--command", "1,0,0"], "--command: Isaac-Cartpole takes no velocity command"),
        ("go1", ["--device", "gpu"], "--device 'gpu' is not cpu, cuda or cuda:N"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, fake_runs, run, args, expected):
    argv = args if "--checkpoint" in args else ["--checkpoint", str(fake_runs[run]), *args]
    before = tree(tmp_path)
    assert expected in refused(capsys, argv)
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    ("run", "args", "expected"),
    [
        ("go1", ["--video", "{tmp}/go1.avi"], "--video {tmp}/go1.avi: write .gif or .mp4, not .avi"),
        ("go1", ["--video", "/proc/go1.gif"], "--video /proc/go1.gif: cannot write in /proc"),
        ("go1", ["--video", "{tmp}/go1.gif", "--size", "321x240"], "--size 321x240: width and height must be even"),
        ("go1", ["--video", "{tmp}/go1.gif", "--fps", "0"], "--fps 0: must be positive"),
        ("cartpole", ["--video", "{tmp}/cartpole.gif"], "--video: Isaac-Cartpole has no MuJoCo model to render"),
    ],
)
def test_bad_video_input_is_one_line_and_exit_2(tmp_path, fake_runs, run, args, expected):
    """In a process of its own: a video's checks choose MuJoCo's GL backend, which MuJoCo reads once per process."""
    args = [arg.format(tmp=tmp_path) for arg in args]
    before = tree(tmp_path)
    result = rlscale("play", "--checkpoint", str(fake_runs[run]), *args, timeout=120)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert expected.format(tmp=tmp_path) in result.stderr
    assert tree(tmp_path) == before


@requires_warp
def test_a_gl_backend_that_cannot_render_names_itself_in_one_line(tmp_path, fake_runs):
    result = rlscale(
        "play", "--checkpoint", str(fake_runs["go1"]), "--video", str(tmp_path / "go1.gif"),
        env={"MUJOCO_GL": "nonesuch"}, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "--video: MuJoCo cannot render with MUJOCO_GL=nonesuch" in result.stderr
    assert not (tmp_path / "go1.gif").exists()


# --- Cartpole of every library, no video ------------------------------------------------------------------------


@pytest.mark.parametrize(("library", "framework"), PATHS)
def test_cartpole_plays_and_prints_each_episode(tmp_path, library, framework):
    checkpoint = trained(tmp_path / "runs", "Isaac-Cartpole", 16, library=library, framework=framework)
    before = tree(tmp_path)
    result = rlscale("play", "--checkpoint", str(checkpoint), "--num_envs", "2", "--steps", "300", timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    episodes = [line for line in result.stdout.splitlines() if line.startswith("episode ")]
    assert episodes, result.stdout  # an untrained Cartpole falls within 300 steps (5 s)
    assert all(" steps (" in line and ", return " in line for line in episodes), episodes
    assert result.stdout.splitlines()[-1].startswith(f"episodes ended: {len(episodes)}, ")
    assert "play: step 300/300" in result.stderr
    assert tree(tmp_path) == before  # the library wrote no logs or checkpoints


@pytest.mark.parametrize(
    ("library", "framework", "options"),
    [
        # rl_games clamps the mean to [-1, 1] and rescales it to the action space, here half the usual one; the
        # output layer's constant start makes a quarter of the means exceed the clamp.
        ("rl_games", "torch", ["--agent", "params.env.clip_actions=0.5", "--agent", MEAN_BEYOND_THE_CLAMP]),
        ("skrl", "torch", []),
        ("skrl", "jax", []),
    ],
)
def test_the_policy_acts_as_its_library_evaluates(tmp_path, library, framework, options):
    """Isaac-Cartpole-Direct's configs normalise observations (rl_games' running mean and std, skrl's
    RunningStandardScaler); the probe's observations exceed rl_games' observation clipping."""
    checkpoint = trained(tmp_path / "runs", "Isaac-Cartpole-Direct", 16, *options, library=library, framework=framework)
    output = tmp_path / "actions.pt"
    probe = subprocess.run(
        [sys.executable, str(PROBE), str(checkpoint), str(output)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    actions = torch.load(output)
    assert actions["library"].shape == (12, 8, 1)
    assert torch.equal(actions["adapter"], actions["library"])
    if library == "rl_games":  # the clipping took part
        assert actions["library"].abs().max() == 0.5


# --- the video writer on made-up frames -------------------------------------------------------------------------


def made_up_frames(count: int, width: int = 32, height: int = 24) -> list[np.ndarray]:
    """Frames that differ from each other: a white square walking over a grey ground."""
    frames = []
    for index in range(count):
        frame = np.full((height, width, 3), 90, np.uint8)
        frame[4:12, 2 * index : 2 * index + 8] = 255
        frames.append(frame)
    return frames


def test_a_gif_has_every_frame_at_the_rate_asked_and_loops(tmp_path):
    from PIL import Image

    path = tmp_path / "made_up.gif"
    with video_file(path, fps=12.5, width=32, height=24) as add:
        for frame in made_up_frames(9):
            add(frame)
    with Image.open(path) as gif:
        assert (gif.format, gif.size, gif.n_frames, gif.info["loop"]) == ("GIF", (32, 24), 9, 0)
        durations = []
        for index in range(gif.n_frames):
            gif.seek(index)
            durations.append(gif.info["duration"])
        assert durations == [80] * 9


def test_an_mp4_has_every_frame(tmp_path):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    path = tmp_path / "made_up.mp4"
    with video_file(path, fps=25.0, width=32, height=24) as add:
        for frame in made_up_frames(10):
            add(frame)
    assert imageio_ffmpeg.count_frames_and_secs(str(path)) == (10, 0.4)


def test_a_video_stopped_midway_leaves_no_file(tmp_path):
    with pytest.raises(KeyboardInterrupt), video_file(tmp_path / "stopped.gif", 10.0, 32, 24) as add:
        add(made_up_frames(1)[0])
        raise KeyboardInterrupt
    assert tree(tmp_path) == []


# --- the robots, filmed on the CPU ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def robot_checkpoints(tmp_path_factory, jax_env):
    log_root = tmp_path_factory.mktemp("robot_runs")
    return {task_id: trained(log_root / task_id, task_id, ROBOT_ENVS, env=jax_env) for task_id in ROBOTS}


def robot_colour_shares(frame: np.ndarray) -> tuple[float, float]:
    """Shares of the picture in the left limbs' orange and the right limbs' blue, by hue, and saturation above the
    floor's greys and the sky's pale blue."""
    from PIL import Image

    hue, saturation, _ = np.moveaxis(np.asarray(Image.fromarray(frame).convert("HSV")).astype(int), -1, 0)
    degrees, percent = hue * 360 / 255, saturation * 100 / 255
    orange = (degrees > 10) & (degrees < 40) & (percent > 40)
    limb_blue = (degrees > 195) & (degrees < 225) & (percent > 45)
    return float(orange.mean()), float(limb_blue.mean())


@requires_warp
@pytest.mark.robots
@pytest.mark.parametrize("task_id", ROBOTS)
def test_each_robot_is_filmed_as_a_gif_on_the_cpu(tmp_path, jax_env, robot_checkpoints, task_id):
    from PIL import Image

    steps, fps = 12, 25  # every 2nd of the 50 Hz policy steps, and the first state: 7 frames
    frames = 1 + steps // (POLICY_HZ // fps)
    path = tmp_path / "videos" / f"{task_id}.gif"  # the folder is made
    result = rlscale(
        "play", "--checkpoint", str(robot_checkpoints[task_id]), "--steps", str(steps), "--command", "0.5,0,0",
        "--video", str(path), "--size", "160x120", "--fps", str(fps), "--camera", "front",
        env=jax_env, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"wrote {path}: {frames} frames, 160x120, 25 fps" in result.stdout
    with Image.open(path) as gif:
        assert (gif.format, gif.size, gif.n_frames) == ("GIF", (160, 120), frames)
        pictures = []
        for index in range(frames):
            gif.seek(index)
            assert gif.info["duration"] == 1000 // fps
            pictures.append(np.asarray(gif.convert("RGB")))
    for picture in pictures:
        assert picture.std() > 20  # floor, sky and robot, not one colour
        orange, blue = robot_colour_shares(picture)
        assert orange > 0.001 and blue > 0.001, (orange, blue)  # both sides of the robot in view
    assert not all(np.array_equal(pictures[0], picture) for picture in pictures[1:])  # it moves


@requires_warp
@pytest.mark.robots
def test_a_robot_is_filmed_as_an_mp4(tmp_path, jax_env, robot_checkpoints):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    path = tmp_path / "go1.mp4"
    result = rlscale(
        "play", "--checkpoint", str(robot_checkpoints["Rlscale-Go1-Flat"]), "--steps", "10", "--video", str(path),
        "--size", "160x120", env=jax_env, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert imageio_ffmpeg.count_frames_and_secs(str(path)) == (1 + 10 // 2, 0.24)  # 25 fps by default: every 2nd step
