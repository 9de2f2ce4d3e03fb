"""Peer baselines: for each library, the plain script one would write without rlscale, on rlscale's own task.

``peer_rsl_rl.py``, ``peer_rl_games.py`` and ``peer_skrl.py`` each train with the library's own runner, the task's
agent config and no logging, under ``python`` or ``torchrun`` as the library expects. Each builds its task with
rlscale's own :func:`rlscale.tasks.graph.build_task` and rlscale's CUDA-graph setting, so that both sides step the
same env step and the ratio measures rlscale's own overhead; :mod:`.peer_clock` times them as rlscale's
``TrackedTask`` times rlscale. ``rlscale benchmark training --peer`` runs one before its own measurement
(:mod:`rlscale.benchmark.peer_ratio`). File names differ from the libraries' packages because a script's folder heads
``sys.path``.
"""

from pathlib import Path

from rlscale.rl import LIBRARIES

PEER_SCRIPTS = {library: str(Path(__file__).resolve().with_name(f"peer_{library}.py")) for library in LIBRARIES}
"""Library → path of its peer script (every library has one: ``peer_<library>.py``)."""
