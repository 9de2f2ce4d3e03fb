"""A rank of ``rlscale train`` that saves its libraries' normalizer statistics when training ends.

Run by ``tests/test_normalizer_sync.py`` under a real torchrun, in place of rlscale's own worker. It watches the
libraries' normalizer classes, not rlscale's sync, so it sees what each rank's normalizers hold whether or not the
adapter synced them: ``$NORMALIZER_PROBE_DIR/rank<R>.pt`` holds ``[(class name, mean, var, count), ...]`` in the
order the normalizers were made. The classes are patched as their modules load: importing skrl any earlier would
start its NCCL process group before rlscale routes it to gloo.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path

import torch

from rlscale.launch.worker import run_rank
from rlscale.run.train import main as train_main

WATCHED = {
    "rl_games.algos_torch.running_mean_std": ("RunningMeanStd", ("running_mean", "running_var", "count")),
    "skrl.resources.preprocessors.torch.running_standard_scaler": (
        "RunningStandardScaler",
        ("running_mean", "running_variance", "current_count"),
    ),
}
made = []


class WatchNormalizers(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the real loader of a watched module so that its class records each instance."""

    def find_spec(self, name, path, target=None):
        if name not in WATCHED:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        execute = spec.loader.exec_module

        def execute_and_watch(module) -> None:
            execute(module)
            kind = getattr(module, WATCHED[name][0])
            build = kind.__init__

            def build_and_remember(self, *args, **kwargs) -> None:
                build(self, *args, **kwargs)
                made.append([self, *WATCHED[name]])

            kind.__init__ = build_and_remember

        spec.loader.exec_module = execute_and_watch
        return spec


def watch_scripting() -> None:
    """rl_games scripts its normalizers (``torch.jit.script``), which copies them: follow the copy, which trains."""
    script = torch.jit.script

    def script_and_follow(obj, *args, **kwargs):
        scripted = script(obj, *args, **kwargs)
        for entry in made:
            if entry[0] is obj:
                entry[0] = scripted
        return scripted

    torch.jit.script = script_and_follow


if __name__ == "__main__":
    sys.meta_path.insert(0, WatchNormalizers())
    watch_scripting()
    code = run_rank(train_main, sys.argv[1:])
    statistics = [
        (kind, *(getattr(module, name).detach().clone() for name in buffers)) for module, kind, buffers in made
    ]
    torch.save(statistics, Path(os.environ["NORMALIZER_PROBE_DIR"], f"rank{os.environ['RANK']}.pt"))
    sys.exit(code)
