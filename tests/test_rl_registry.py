"""The one list of RL libraries (``rlscale.rl.LIBRARIES``): torch-free, every list derived from it agrees with it,
and the JSON and YAML schemas take their library values from it when they load."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from rlscale.benchmark.bundle import PACKAGE_KEYS
from rlscale.benchmark.bundle import schema as bundle_schema
from rlscale.benchmark.peer import PEER_SCRIPTS
from rlscale.launch.command import TRAIN_MULTIGPU, benchmark_launcher_cfg, build_parser
from rlscale.manifest import PACKAGES
from rlscale.rl import LIBRARIES as REGISTRY
from rlscale.rl import config_entry, default_agent_path, load_adapter, set_config_entry
from rlscale.rl.adapter import Adapter
from rlscale.study.schema import library_schema

ROOT = Path(__file__).resolve().parents[1]
BUNDLE_SCHEMA = bundle_schema()
CONFIG_SCHEMA_FILE = ROOT / "workflow" / "schemas" / "config.schema.yaml"
LIBRARIES = list(REGISTRY)
ML_FRAMEWORKS = sorted({framework for library in REGISTRY.values() for framework in library.ml_frameworks})


def config_schema() -> dict:
    """The study config's schema as ``study/config.py`` loads it."""
    schema = yaml.safe_load(CONFIG_SCHEMA_FILE.read_text())
    library_schema(schema)
    return schema


def test_registry_needs_no_torch_nor_any_library():
    """Reading the registry imports neither torch nor an RL library, so the launcher's --dry_run can use it."""
    code = (
        "import sys\n"
        "from rlscale.rl import LIBRARIES\n"
        "heavy = {'torch', 'jax', *LIBRARIES} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "print(' '.join(LIBRARIES))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == LIBRARIES


@pytest.mark.parametrize("name", LIBRARIES)
def test_every_library_has_its_adapter_and_peer(name):
    """Each entry names an adapter module ``rlscale.rl.<name>`` and a peer script (found, not imported)."""
    assert importlib.util.find_spec(f"rlscale.rl.{name}") is not None
    assert Path(PEER_SCRIPTS[name]).is_file()


@pytest.mark.parametrize("name", LIBRARIES)
def test_adapter_provides_the_protocol(name):
    adapter = load_adapter(name)
    assert isinstance(adapter, Adapter)
    # rlscale evaluate and play load a library's checkpoints when its record says its adapter gives their policy
    assert callable(getattr(adapter, "inference_policy", None)) == REGISTRY[name].evaluates


@pytest.mark.parametrize("name", LIBRARIES)
def test_record_names_entries_of_its_generic_config(name):
    """The record's dotted keys (rollout, seed, the defaults' layout, the networks) name entries of the library's
    generic PPO config, and its rollout length is the adapter's."""
    record = REGISTRY[name]
    cfg = yaml.safe_load(default_agent_path(name).read_text())
    layout = record.agent_layout
    optional = [layout.observation_groups] if layout.observation_groups else []
    for key in (record.rollout_key, record.seed_key, layout.run_name, *layout.hidden_units, *optional):
        config_entry(cfg, key)
    for key in record.network_keys:
        config_entry(cfg, key)
    assert record.rollout_length(cfg) == load_adapter(name).rollout_length(cfg)
    assert record.seed(cfg) == 42


def test_a_layout_naming_a_missing_entry_is_refused():
    """A new library's layout that names no entry of its YAML fails, rather than adding one the library ignores."""
    with pytest.raises(KeyError, match="model.units"):
        set_config_entry({"model": {}}, "model.units", [64])
    cfg = {"models": [{"layers": None}]}
    set_config_entry(cfg, "models.0.layers", [64])
    assert cfg == {"models": [{"layers": [64]}]}


def test_checkpoint_policy_keys_tell_the_libraries_apart():
    keys = [library.checkpoint_policy_key for library in REGISTRY.values()]
    assert len(set(keys)) == len(keys)


def test_unknown_library_has_no_adapter():
    with pytest.raises(KeyError):
        load_adapter("common")  # a module of rlscale.rl, but no library


@pytest.mark.parametrize("name", LIBRARIES)
def test_distribution_is_installed(name):
    """The distribution name is the one pip installed, so recorded versions are never silently None."""
    assert metadata.version(REGISTRY[name].distribution)


def test_recorded_versions_cover_every_library():
    """Manifests and bundles record each library's version, bundles under the library's own name."""
    distributions = [library.distribution for library in REGISTRY.values()]
    assert set(distributions) <= set(PACKAGES)
    assert {name: PACKAGE_KEYS[name] for name in LIBRARIES} == dict(zip(LIBRARIES, distributions, strict=True))


def test_agent_entry_points_are_isaac_lab_names_of_one_library():
    """Isaac Lab names a library's agent config ``<library>[_<algorithm>]_cfg_entry_point``; no name is shared."""
    entry_points = [(name, entry) for name, library in REGISTRY.items() for entry in library.agent_entry_points]
    assert len({entry for _, entry in entry_points}) == len(entry_points)
    for name, entry in entry_points:
        assert entry.startswith(f"{name}_") and entry.endswith("_cfg_entry_point"), entry


def test_launchers_offer_every_library():
    """--rl_library of train_multigpu and benchmark training_multigpu accepts exactly the registered libraries."""
    for cfg in (TRAIN_MULTIGPU, benchmark_launcher_cfg("training", uses_library=True)):
        action = next(action for action in build_parser(cfg)._actions if action.dest == "rl_library")
        assert list(action.choices) == LIBRARIES


class TestSchemasAgree:
    """The schemas cannot import Python, so their loaders fill in the libraries' values from the registry."""

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
        schema = config_schema()
        entry = schema["properties"]["libraries"]["items"]["properties"]
        assert entry["name"]["enum"] == LIBRARIES
        assert sorted(entry["ml_framework"]["enum"]) == ML_FRAMEWORKS
        assert schema["properties"]["agent_overrides"]["propertyNames"]["enum"] == LIBRARIES

    def test_schema_files_list_no_library(self):
        """The values live in the registry alone: neither file names a library."""
        bundle_file = ROOT / "src" / "rlscale" / "benchmark" / "bundle.schema.json"
        for text in (bundle_file.read_text(), CONFIG_SCHEMA_FILE.read_text()):
            listed = [line for line in text.splitlines() if "enum" in line and any(name in line for name in LIBRARIES)]
            assert not listed, listed

    def test_a_schema_that_lists_its_own_libraries_fails_to_load(self):
        """A file that lists the values again (which would drift) is refused as it loads, naming the place."""
        schema = yaml.safe_load(CONFIG_SCHEMA_FILE.read_text())
        schema["properties"]["agent_overrides"]["propertyNames"]["enum"] = ["rsl_rl", "rl_games"]
        with pytest.raises(ValueError, match=r"agent_overrides\.propertyNames's values itself"):
            library_schema(schema)

    def test_a_schema_without_the_place_fails_to_load(self):
        """A schema restructured so that a library list moved is refused too, not left without its values."""
        schema = yaml.safe_load(CONFIG_SCHEMA_FILE.read_text())
        del schema["properties"]["libraries"]["items"]["properties"]["name"]
        with pytest.raises(ValueError, match=r"no 'properties\.libraries\.items\.properties\.name'"):
            library_schema(schema)
