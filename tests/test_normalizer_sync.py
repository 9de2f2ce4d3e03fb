"""``--sync_normalizer`` through the real rl_games and skrl adapters: two gloo ranks under a real torchrun train
Isaac-Cartpole-Direct (whose agent configs normalize observations and values), and each rank saves what its
library's normalizers hold at the end (``tests/normalizer_probe.py``). With the flag the ranks' statistics are equal;
without it they differ, each rank having normalized only its own envs' samples."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

PROBE = Path(__file__).with_name("normalizer_probe.py")
NORMALIZERS = {"rl_games": "RunningMeanStd", "skrl": "RunningStandardScaler"}


def final_statistics(tmp_path: Path, library: str, sync: bool) -> list[list[tuple]]:
    """Each rank's normalizers after 2 iterations of 8 envs per rank."""
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir(parents=True)
    argv = [
        *(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(PROBE)),
        *("--task", "Isaac-Cartpole-Direct", "--rl_library", library, "--device", "cpu", "--num_envs", "8"),
        *("--max_iterations", "2", "--log_root", str(tmp_path / "runs")),
        *(["--sync_normalizer"] if sync else []),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NORMALIZER_PROBE_DIR": str(probe_dir)}
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [torch.load(probe_dir / f"rank{rank}.pt") for rank in range(2)]


@pytest.mark.parametrize("library", ["rl_games", "skrl"])
def test_ranks_normalizers_end_equal_only_with_the_flag(tmp_path, library):
    synced = final_statistics(tmp_path / "synced", library, sync=True)
    apart = final_statistics(tmp_path / "apart", library, sync=False)
    for ranks in (synced, apart):
        kinds = [[entry[0] for entry in rank] for rank in ranks]
        # Observations and values, on each rank.
        assert kinds[0] == kinds[1] and kinds[0].count(NORMALIZERS[library]) >= 2, kinds
    for first, second in zip(*synced, strict=True):
        for name, one, two in zip(("mean", "var", "count"), first[1:], second[1:], strict=True):
            assert torch.equal(one, two), (first[0], name)
    # Pooled: both ranks' samples (as many a rank with or without the flag) on the count of 1 both libraries start at.
    pooled = [float(one[3] + two[3] - 1) for one, two in zip(*apart, strict=True)]
    assert [float(entry[3]) for entry in synced[0]] == pooled
    differing = [first[0] for first, second in zip(*apart, strict=True) if not torch.equal(first[1], second[1])]
    assert differing, "without --sync_normalizer each rank's normalizers saw only its own samples"
