"""Video files of a played policy (``rlscale play --video``): MuJoCo's GL backend, checked before anything is built,
and the GIF (Pillow) or MP4 (imageio-ffmpeg's bundled ffmpeg) written whole or not at all."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rlscale.paths import atomic_path, unwritable_reason
from rlscale.tasks.mjx import INSTALL_HINT
from rlscale.tasks.plugins import one_line

if TYPE_CHECKING:
    import numpy as np

FORMATS = (".gif", ".mp4")
DEFAULT_FPS = {".gif": 12.0, ".mp4": 25.0}
"""Frame rate asked for when none is given: a GIF stays small, an MP4 plays smoothly."""
DEFAULT_GL = "egl"
"""MuJoCo's GL backend unless ``MUJOCO_GL`` names one: EGL renders without a display, on a GPU through its driver and
on a CPU through Mesa."""
GL_INSTALL_HINTS = {
    "egl": "install the EGL loader (Debian/Ubuntu: apt-get install libegl1 libopengl0), which draws through the GPU "
    "driver's EGL where it has one (NVIDIA: libEGL_nvidia.so.0) and otherwise through Mesa's (libgl1-mesa-dri)",
    "osmesa": "install OSMesa (Debian/Ubuntu: apt-get install libosmesa6)",
    "glfw": "GLFW needs a display; without one set MUJOCO_GL=egl",
}
GIF_COLOURS = 128
"""Palette size of a GIF: the scenes' flat colours need no more, and fewer keep the file small."""
GIF_PALETTE_FRAMES = 8
"""Frames, spread over the video, whose colours make the GIF's one palette (one palette: no flicker between frames)."""


def video_refusal(path: Path) -> str | None:
    """One line for a video file that cannot be written (its format, its encoder, its folder), or None."""
    if path.suffix.lower() not in FORMATS:
        return f"--video {path}: write {' or '.join(FORMATS)}, not {path.suffix or 'a name without an extension'}"
    if path.suffix.lower() == ".mp4" and importlib.util.find_spec("imageio_ffmpeg") is None:
        return f"--video {path}: MP4 needs imageio-ffmpeg: {INSTALL_HINT}"
    if path.is_dir():
        return f"--video {path}: is a directory"
    unwritable = unwritable_reason(path.parent)
    return f"--video {path}: {unwritable}" if unwritable else None


def choose_gl_backend() -> str:
    """Set MuJoCo's GL backend to :data:`DEFAULT_GL` unless ``MUJOCO_GL`` names one, and return it. Call it before
    anything imports MuJoCo (finding ``mujoco.mjx`` does too): MuJoCo reads ``MUJOCO_GL`` once, on import."""
    return os.environ.setdefault("MUJOCO_GL", DEFAULT_GL)


def gl_refusal() -> str | None:
    """One line naming what to install when MuJoCo cannot render with the chosen GL backend, else None."""
    if importlib.util.find_spec("mujoco") is None:
        return f"--video: MuJoCo renders the videos: {INSTALL_HINT}"
    backend = choose_gl_backend()
    try:
        with warnings.catch_warnings():  # GLFW warns before it fails: the one line below says it
            warnings.simplefilter("ignore")
            import mujoco  # fails here for a backend whose libraries are missing

            mujoco.Renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), 8, 8).close()
    except Exception as error:  # each backend fails its own way: ImportError, AttributeError, mujoco.FatalError
        hint = GL_INSTALL_HINTS.get(backend.lower(), f"set MUJOCO_GL to one of {', '.join(GL_INSTALL_HINTS)}")
        return f"--video: MuJoCo cannot render with MUJOCO_GL={backend} ({one_line(error)}); {hint}"
    return None


@contextlib.contextmanager
def video_file(path: Path, fps: float, width: int, height: int) -> Iterator[Callable[[np.ndarray], None]]:
    """Yield a function that adds one ``(height, width, 3)`` uint8 frame; the file is in place once the block ends
    (nothing is left when it raises but the folder, made when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as temporary:
        if path.suffix.lower() == ".gif":
            frames: list[np.ndarray] = []
            yield frames.append
            write_gif(temporary, frames, fps)
            return
        import imageio_ffmpeg

        writer = imageio_ffmpeg.write_frames(
            str(temporary),
            (width, height),
            fps=fps,
            codec="libx264",
            quality=8,
            macro_block_size=2,
            ffmpeg_log_level="error",
        )
        with warnings.catch_warnings():  # JAX warns of any fork; subprocess execs ffmpeg at once, which is safe
            warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
            writer.send(None)  # starts ffmpeg
        try:
            yield writer.send
        finally:
            writer.close()


def write_gif(path: Path, frames: list[np.ndarray], fps: float) -> None:
    """An endlessly looping GIF of ``frames``, with one palette and no dithering (flat colours stay flat)."""
    from PIL import Image

    pictures = [Image.fromarray(frame) for frame in frames]
    sample = pictures[:: max(1, len(pictures) // GIF_PALETTE_FRAMES)]
    width, height = sample[0].size
    mosaic = Image.new("RGB", (width, height * len(sample)))
    for index, picture in enumerate(sample):
        mosaic.paste(picture, (0, height * index))
    # Octree keeps the robot's few saturated pixels close to their colours; median cut spends the palette on the floor
    palette = mosaic.quantize(GIF_COLOURS, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    indexed = [picture.quantize(palette=palette, dither=Image.Dither.NONE) for picture in pictures]
    indexed[0].save(path, format="GIF", save_all=True, append_images=indexed[1:], duration=round(1000 / fps), loop=0)
