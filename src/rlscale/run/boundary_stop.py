"""A stop at an iteration boundary: every rank agrees to stop at the same one (:func:`stop_if_asked`), the library's
adapter saves its checkpoint of the finished iterations (:class:`~rlscale.rl.common.StopAtBoundary`), and every rank
waits for it before recording the stop (:func:`boundary_stop_record`), so that a job that ends with any rank has it.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING

from rlscale.dist import RankInfo
from rlscale.run.stop_signals import StopRequest

if TYPE_CHECKING:
    from rlscale.rl.common import StopAtBoundary


def stop_if_asked(request: StopRequest | None, rank: RankInfo, device: str, iteration: int) -> None:
    """Raise :class:`~rlscale.rl.common.StopAtBoundary` on every rank once any rank was asked to stop: the ranks agree
    at each boundary (one small all-reduce), so that all stop at the same one."""
    from rlscale.rank_sync import any_rank
    from rlscale.rl.common import StopAtBoundary

    if request is not None and any_rank(request.signal is not None, rank, device):
        request.at_boundary()
        raise StopAtBoundary(iteration)


def boundary_stop_record(stop: StopAtBoundary, signum: int | None, rank: RankInfo, device: str) -> dict:
    """The manifest's ``stop`` entry, once every rank got here: rank 0 saved the checkpoint before it came."""
    from rlscale.rank_sync import any_rank

    any_rank(False, rank, device)
    return {
        "signal": None if signum is None else signal.Signals(signum).name,
        "iterations": stop.iterations,
        "checkpoint": None if stop.checkpoint is None else str(stop.checkpoint),
    }


def boundary_stop_line(stop: StopAtBoundary, log_dir: Path) -> str:
    """Rank 0's console line: where the run stopped and its checkpoint."""
    saved = f"checkpoint {stop.checkpoint}" if stop.checkpoint else "no new checkpoint: no iteration finished"
    return f"[rlscale] stopped after iteration {stop.iterations}; {saved}; run directory {log_dir}"
