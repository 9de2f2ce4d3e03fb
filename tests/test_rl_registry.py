"""The one list of RL libraries (``rlscale.rl.ADAPTERS``): torch-free, and every list that cannot import it (the JSON
and YAML schemas) or is derived from it agrees with it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from rlscale.benchmark.bundle import PACKAGE_KEYS
from rlscale.benchmark.peer import PEER_SCRIPTS
from rlscale.launch.command import TRAIN_MULTIGPU, benchmark_launcher_cfg, build_parser
from rlscale.manifest import PACKAGES
from rlscale.rl import ADAPTERS, load_adapter

ROOT = Path(__file__).resolve().parents[1]
BUNDLE_SCHEMA = json.loads((ROOT / "src" / "rlscale" / "benchmark" / "bundle.schema.json").read_text())
CONFIG_SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
LIBRARIES = list(ADAPTERS)
ML_FRAMEWORKS = sorted({framework for library in ADAPTERS.values() for framework in library.ml_frameworks})


def test_registry_needs_no_torch_nor_any_library():
    """Reading the registry imports neither torch nor an RL library, so the launcher's --dry_run can use it."""
    code = (
        "import sys\n"
        "from rlscale.rl import ADAPTERS\n"
        "heavy = {'torch', 'jax', *ADAPTERS} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "print(' '.join(ADAPTERS))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == LIBRARIES


@pytest.mark.parametrize("name", LIBRARIES)
def test_every_library_has_its_adapter_and_peer(name):
    """Each entry names an adapter module ``rlscale.rl.<name>`` and a peer script (found, not imported)."""
    assert importlib.util.find_spec(f"rlscale.rl.{name}") is not None
    assert Path(PEER_SCRIPTS[name]).is_file()


def test_unknown_library_has_no_adapter():
    with pytest.raises(KeyError):
        load_adapter("common")  # a module of rlscale.rl, but no library


@pytest.mark.parametrize("name", LIBRARIES)
def test_distribution_is_installed(name):
    """The distribution name is the one pip installed, so recorded versions are never silently None."""
    assert metadata.version(ADAPTERS[name].distribution)


def test_recorded_versions_cover_every_library():
    """Manifests and bundles record each library's version, bundles under the library's own name."""
    distributions = [library.distribution for library in ADAPTERS.values()]
    assert set(distributions) <= set(PACKAGES)
    assert {name: PACKAGE_KEYS[name] for name in LIBRARIES} == dict(zip(LIBRARIES, distributions, strict=True))


def test_agent_entry_points_are_isaac_lab_names_of_one_library():
    """Isaac Lab names a library's agent config ``<library>[_<algorithm>]_cfg_entry_point``; no name is shared."""
    entry_points = [(name, entry) for name, library in ADAPTERS.items() for entry in library.agent_entry_points]
    assert len({entry for _, entry in entry_points}) == len(entry_points)
    for name, entry in entry_points:
        assert entry.startswith(f"{name}_") and entry.endswith("_cfg_entry_point"), entry


def test_launchers_offer_every_library():
    """--rl_library of train_multigpu and benchmark training_multigpu accepts exactly the registered libraries."""
    for cfg in (TRAIN_MULTIGPU, benchmark_launcher_cfg("training", uses_library=True)):
        action = next(action for action in build_parser(cfg)._actions if action.dest == "rl_library")
        assert list(action.choices) == LIBRARIES


class TestSchemasAgree:
    """The schemas cannot import Python, so they list the libraries themselves; these keep them from drifting."""

    def test_bundle_run(self):
        run = BUNDLE_SCHEMA["properties"]["run"]["properties"]
        assert run["framework"]["enum"] == [*LIBRARIES, None]
        assert sorted(run["ml_framework"]["enum"]) == ML_FRAMEWORKS

    def test_bundle_versions(self):
        versions = BUNDLE_SCHEMA["properties"]["versions"]
        assert set(PACKAGE_KEYS) <= set(versions["required"]) & set(versions["properties"])
        assert set(LIBRARIES) <= set(versions["required"])

    def test_bundle_peer(self):
        peer = next(
            option
            for option in BUNDLE_SCHEMA["properties"]["runtime"]["properties"]["peer"]["oneOf"]
            if option.get("type") == "object"
        )
        assert peer["properties"]["library"]["enum"] == LIBRARIES

    def test_study_config(self):
        entry = CONFIG_SCHEMA["properties"]["libraries"]["items"]["properties"]
        assert entry["name"]["enum"] == LIBRARIES
        assert sorted(entry["ml_framework"]["enum"]) == ML_FRAMEWORKS
        assert CONFIG_SCHEMA["properties"]["agent_overrides"]["propertyNames"]["enum"] == LIBRARIES
