"""The RL libraries rlscale trains with: :data:`LIBRARIES` is the one list of them, with every fact rlscale knows of
each outside its adapter.

Each library has an adapter module ``rlscale.rl.<name>`` (:class:`rlscale.rl.adapter.Adapter` says what it provides),
a generic PPO config ``default_agents/<name>_ppo.yaml`` and a peer script ``benchmark/peer/peer_<name>.py``. Adapters
are imported on demand: importing skrl creates the process group, and rl_games changes global torch flags. This module
imports neither torch nor any library, so the launcher's ``--dry_run``, the study's Snakefile and the schemas' loaders
can read it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from rlscale.rl.adapter import Adapter


@dataclass(frozen=True)
class AgentLayout:
    """Where a library's generic PPO config keeps what :mod:`rlscale.rl.agent_defaults` fills in for a task, each a
    dotted key of the config (see :func:`config_entry`).

    Args:
        run_name: The experiment's name, set to the task id's lowercase word characters.
        hidden_units: Each network's hidden layer widths (all set to the same list).
        observation_groups: The observation groups the actor and critic read, where the library asks for them:
            ``{"actor": ["policy"], "critic": ["critic" or "policy"]}``.
    """

    run_name: str
    hidden_units: tuple[str, ...]
    observation_groups: str | None = None


@dataclass(frozen=True)
class Library:
    """What rlscale knows of one RL library besides its adapter.

    Args:
        distribution: Its pip distribution, whose installed version manifests and bundles record.
        agent_entry_points: Isaac Lab's ``--agent`` entry-point names that name its default agent config (the task's
            PPO), the first being the one to suggest.
        rollout_key: Dotted key of the agent config's rollout length (env steps per env per iteration), read where
            the adapter, which imports the library, cannot be (the study's parity cells).
        seed_key: Dotted key of the agent config's seed, the run's base seed unless ``--seed`` gives one.
        agent_layout: Where its generic PPO config keeps the task-dependent entries.
        checkpoint_policy_key: The top-level key of its checkpoints that holds the policy weights: how a
            ``--resume`` checkpoint shows its library (:mod:`rlscale.rl.checkpoint_fit`).
        network_keys: Dotted keys of the agent config entries that set its networks' layers: a checkpoint loads
            only into the same ones.
        ml_frameworks: ML frameworks it trains with (``--ml_framework``), the default first.
        evaluates: Whether its adapter gives a checkpoint's deterministic policy (``inference_policy``, an
            :class:`~rlscale.rl.adapter.EvaluatingAdapter`), which ``rlscale evaluate`` runs.
    """

    distribution: str
    agent_entry_points: tuple[str, ...]
    rollout_key: str
    seed_key: str
    agent_layout: AgentLayout
    checkpoint_policy_key: str
    network_keys: tuple[str, ...]
    ml_frameworks: tuple[str, ...] = ("torch",)
    evaluates: bool = False

    def rollout_length(self, agent_cfg: Mapping) -> int:
        """Env steps per env per iteration of one of its agent configs."""
        return int(config_entry(agent_cfg, self.rollout_key))

    def seed(self, agent_cfg: Mapping) -> int:
        """The seed of one of its agent configs."""
        return int(config_entry(agent_cfg, self.seed_key))


LIBRARIES = {
    "rsl_rl": Library(
        "rsl-rl-lib",
        ("rsl_rl_cfg_entry_point",),
        rollout_key="num_steps_per_env",
        seed_key="seed",
        agent_layout=AgentLayout(
            "experiment_name", ("actor.hidden_dims", "critic.hidden_dims"), observation_groups="obs_groups"
        ),
        checkpoint_policy_key="actor_state_dict",  # rsl-rl-lib 5
        network_keys=("actor.hidden_dims", "critic.hidden_dims"),
        evaluates=True,
    ),
    "rl_games": Library(
        "rl-games",
        ("rl_games_cfg_entry_point",),
        rollout_key="params.config.horizon_length",
        seed_key="params.seed",
        agent_layout=AgentLayout("params.config.name", ("params.network.mlp.units",)),
        checkpoint_policy_key="model",  # rl-games 1.6
        network_keys=("params.network.mlp.units",),
        evaluates=True,
    ),
    "skrl": Library(
        "skrl",
        ("skrl_cfg_entry_point", "skrl_ppo_cfg_entry_point"),
        rollout_key="agent.rollouts",
        seed_key="seed",
        agent_layout=AgentLayout(
            "agent.experiment.directory", ("models.policy.network.0.layers", "models.value.network.0.layers")
        ),
        checkpoint_policy_key="policy",  # skrl 2
        network_keys=("models.policy.network", "models.value.network"),
        ml_frameworks=("torch", "jax"),
        evaluates=True,
    ),
}
"""Library name (``--rl_library``, the adapter's module name) → :class:`Library`, in the order help text lists them."""


def ml_frameworks() -> tuple[str, ...]:
    """Every ML framework some library trains with, in :data:`LIBRARIES`' order."""
    return tuple(dict.fromkeys(framework for library in LIBRARIES.values() for framework in library.ml_frameworks))


DEFAULT_AGENTS: Traversable = resources.files(__name__) / "default_agents"
"""The folder of the libraries' generic PPO configs, ``<library>_ppo.yaml`` each."""


def default_agent_path(rl_library: str) -> Traversable:
    """rlscale's generic PPO config of one library: the agent config of a task that ships none for it."""
    return DEFAULT_AGENTS / f"{rl_library}_ppo.yaml"


def load_adapter(rl_library: str) -> Adapter:
    """Import the adapter module of one library."""
    if rl_library not in LIBRARIES:
        raise KeyError(rl_library)
    return cast("Adapter", importlib.import_module(f"{__name__}.{rl_library}"))


def config_entry(cfg: Any, key: str) -> Any:
    """``cfg[a][b][n]...`` of a dotted key ``a.b.n``, a number indexing a list.

    Raises:
        KeyError: naming the key, when the config has no such entry.
    """
    node = cfg
    for part in key.split("."):
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, TypeError, ValueError):
            raise KeyError(f"the agent config has no {key!r}") from None
    return node


def set_config_entry(cfg: Any, key: str, value: Any) -> None:
    """Replace the existing entry ``cfg[a][b][n]...`` of a dotted key ``a.b.n`` with ``value``.

    Raises:
        KeyError: naming the key, when the config has no such entry.
    """
    config_entry(cfg, key)  # the entry must exist: a layout that names a missing one is wrong
    parent, _, leaf = key.rpartition(".")
    node = config_entry(cfg, parent) if parent else cfg
    node[int(leaf) if isinstance(node, list) else leaf] = value


def fill_schema_enum(schema: dict, key: str, values: list) -> None:
    """Give the subschema at ``key`` (a dotted key, as :func:`config_entry`'s) the ``enum`` ``values``, taken from
    :data:`LIBRARIES` by a schema's loader, so that the schema files list no library of their own.

    Raises:
        ValueError: when the schema has no subschema there, or lists values there itself (one would drift).
    """
    try:
        node = config_entry(schema, key)
    except KeyError:
        node = None
    if not isinstance(node, dict):
        raise ValueError(f"the schema has no {key!r} to list the libraries' values in")
    if "enum" in node:
        raise ValueError(f"the schema lists {key}'s values itself; rlscale.rl.LIBRARIES is their one home")
    node["enum"] = values
