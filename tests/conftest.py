"""Fixtures shared by test modules, and the order in which the test files run."""

from __future__ import annotations

import pytest
from physics_support import FAST_COMPILE

from rlscale.tasks import registry

MULTI_PROCESS_FIRST = (
    "test_benchmark.py",
    "test_train.py",
    "test_multigpu.py",
    "test_resume.py",
    "test_rank_audit.py",
    "test_ant.py",
    "test_reliability.py",
)
"""Files whose tests start several training processes each: they run first."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the longest files first. ``make test`` hands whole files to its workers in collection order
    (``--dist loadfile``); a long file left to the end would run on one worker while the other has nothing to do."""
    first = {name: rank for rank, name in enumerate(MULTI_PROCESS_FIRST)}
    items.sort(key=lambda item: first.get(item.path.name, len(first)))


@pytest.fixture(scope="module")
def jax_env(tmp_path_factory):
    """Environment for every JAX process of a test module: MJX's compile dominates on CPU, so they share one
    persistent compilation cache and XLA's cheap optimisation level."""
    return {
        "JAX_COMPILATION_CACHE_DIR": str(tmp_path_factory.mktemp("jax_cache")),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "XLA_FLAGS": FAST_COMPILE,
    }


@pytest.fixture
def own_registry(monkeypatch):
    """Registrations made by the test are dropped afterwards."""
    registry.list_tasks()
    for table in ("_REGISTRY", "_ALIASES", "_CLOSEST"):
        monkeypatch.setattr(registry, table, dict(getattr(registry, table)))


@pytest.fixture
def figures():
    """Figures a test builds; closed afterwards, as pyplot keeps every open figure alive."""
    import matplotlib.pyplot as plt  # only the tests that draw pay for the import

    built = []
    yield built
    for figure in built:
        plt.close(figure)
