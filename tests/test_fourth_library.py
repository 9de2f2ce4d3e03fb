"""A fourth RL library, added as ``docs/architecture.md`` "Adding a fourth RL library" says, and nothing else: its
adapter module, its generic PPO config and its one :data:`rlscale.rl.LIBRARIES` entry (its peer script is a file
found by rule). ``rlscale train``'s spec, the agent defaults, the seed, the rollout length and the parity stage's
iteration count then work for it. In-process and fast: the fake never trains."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest
import yaml

import rlscale.rl
from rlscale.benchmark import bundle
from rlscale.rl import LIBRARIES, AgentLayout, Library, load_adapter
from rlscale.rl.adapter import Adapter
from rlscale.run.spec import resolve_spec
from rlscale.run.start import resolve_seed, run_directory
from rlscale.study.config import effective_config, validate_schema
from rlscale.study.parity import parity_cells, rollout_length

ROOT = Path(__file__).resolve().parents[1]
NAME = "toy_rl"
CARTPOLE = "Isaac-Cartpole-Direct"

TOY_PPO = """\
# The toy library's generic PPO: its own layout, unlike any shipped library's.
run:
  name: null
  seed: 5
  rollout: 12
  iterations: 40
model:
  actor_units: null
  critic_units: null
optim:
  learning_rate: 1.0e-3
"""

RECORD = Library(
    "toy-rl",
    ("toy_rl_cfg_entry_point",),
    rollout_key="run.rollout",
    seed_key="run.seed",
    agent_layout=AgentLayout("run.name", ("model.actor_units", "model.critic_units")),
    checkpoint_policy_key="toy_policy",
    network_keys=("model.actor_units", "model.critic_units"),
)


def toy_adapter() -> types.ModuleType:
    """``rlscale/rl/toy_rl.py``: every function the adapter Protocol names."""
    module = types.ModuleType(f"rlscale.rl.{NAME}")

    def train(task, agent_cfg, ctx):
        raise AssertionError("the fake never trains")

    module.rollout_length = lambda agent_cfg: int(agent_cfg["run"]["rollout"])
    module.default_iterations = lambda agent_cfg: int(agent_cfg["run"]["iterations"])
    module.speed_levers = lambda agent_cfg: {}
    module.train = train
    module.checkpoint_iteration = lambda path, agent_cfg: 0
    module.find_checkpoints = lambda run_dir, agent_cfg, ml_framework: []
    return module


@pytest.fixture
def toy_library(tmp_path, monkeypatch):
    """Register the toy library: its adapter module, ``default_agents/toy_rl_ppo.yaml`` (beside a copy of the
    shipped ones) and its record entry."""
    monkeypatch.setitem(sys.modules, f"rlscale.rl.{NAME}", toy_adapter())
    default_agents = tmp_path / "default_agents"
    shutil.copytree(Path(str(rlscale.rl.DEFAULT_AGENTS)), default_agents)
    (default_agents / f"{NAME}_ppo.yaml").write_text(TOY_PPO)
    monkeypatch.setattr(rlscale.rl, "DEFAULT_AGENTS", default_agents)
    monkeypatch.setitem(LIBRARIES, NAME, RECORD)
    return tmp_path


def test_the_adapter_is_one(toy_library):
    assert isinstance(load_adapter(NAME), Adapter)


def test_train_resolves_its_spec_from_the_generic_config(toy_library):
    """``rlscale train --rl_library toy_rl`` resolves: the generic config sized for Cartpole where the record's layout
    says, an override checked by its type, the run directory under the library's name."""
    argv = ["--task", CARTPOLE, "--rl_library", NAME, "--device", "cpu", "--log_root", str(toy_library / "logs")]
    spec = resolve_spec([*argv, "agent.optim.learning_rate=5e-4"])
    assert spec.rl_library == NAME
    assert spec.agent_cfg["run"]["name"] == "isaac_cartpole_direct"
    assert spec.agent_cfg["model"] == {"actor_units": [64, 64], "critic_units": [64, 64]}
    assert spec.agent_cfg["optim"]["learning_rate"] == 5e-4
    assert run_directory(spec).parent == toy_library / "logs" / NAME / CARTPOLE
    assert resolve_spec([*argv, "--agent", "toy_rl_cfg_entry_point"]).agent_cfg == spec.agent_cfg | {
        "optim": {"learning_rate": 1e-3}
    }
    with pytest.raises(SystemExit):  # a value of the wrong type, refused as for any library
        resolve_spec([*argv, "agent.run.rollout=many"])


def test_seed_comes_from_its_seed_key(toy_library):
    argv = ["--task", CARTPOLE, "--rl_library", NAME, "--device", "cpu"]
    assert resolve_seed(resolve_spec(argv)) == 5
    assert resolve_seed(resolve_spec([*argv, "--seed", "9"])) == 9


def test_rollout_without_the_adapter_agrees_with_it(toy_library):
    cfg = resolve_spec(["--task", CARTPOLE, "--rl_library", NAME, "--device", "cpu"]).agent_cfg
    assert rollout_length(cfg, NAME) == load_adapter(NAME).rollout_length(cfg) == 12


def test_the_study_plans_its_parity_runs(toy_library):
    """A study of the toy library alone passes the schema (whose library values the record fills in) and its parity
    runs take as many iterations as their budget of global env steps needs at its rollout length."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["tasks"] = [CARTPOLE]
    config["libraries"] = [{"name": NAME}]
    config["agent_overrides"] = {NAME: ["agent.optim.learning_rate=5e-4"]}
    config["parity"] = {
        **config["parity"],
        "max_env_steps": {CARTPOLE: 8_000_000},
        "target": {CARTPOLE: {"metric": "mean_episode_length", "at_least": 290}},
        "num_envs_per_rank": {CARTPOLE: 4096},
        "libraries": {},
    }
    validate_schema(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    study = effective_config(config, {"CUDA_VISIBLE_DEVICES": "0,1"}, nvml_count=lambda: 0, hardware_probe=lambda: None)
    cells = [cell for cell in parity_cells(study, [NAME]) if cell["task"] == CARTPOLE]
    assert cells and {cell["rl_library"] for cell in cells} == {NAME}
    budget = study["parity"]["max_env_steps"][CARTPOLE]
    for cell in cells:
        per_iteration = 12 * cell["num_envs_per_rank"] * cell["world_size"]
        assert (cell["iterations"] - 1) * per_iteration < budget <= cell["iterations"] * per_iteration


def test_bundles_accept_it(toy_library):
    """The bundle schema, loaded afresh, names the toy library wherever it names the libraries."""
    schema = bundle.schema.__wrapped__()  # schema() keeps the one loaded before the toy library came
    assert NAME in schema["properties"]["run"]["properties"]["framework"]["enum"]
    assert NAME in schema["properties"]["runtime"]["properties"]["peer"]["oneOf"][1]["properties"]["library"]["enum"]
    assert NAME in schema["properties"]["versions"]["required"]
