"""``--agent KEY=VALUE`` / ``agent.KEY=VALUE``: one agent config entry replaced, checked by type and, where the
library bounds it, by range.

A value must have the type of the entry it replaces (an int where a float is expected is fine; a default of None takes
anything). :data:`AGENT_RULES` is the one table of ranges, and of the entries whose default's type is too narrow
(rl_games' ``critic_coef: 2`` is a float). Torch-free: only the config's dict is read.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal

import yaml
from annotated_types import Ge, Gt, Interval

from rlscale.rl import default_agent_path
from rlscale.tasks.overrides import bound_violation, parse_value

POSITIVE, NON_NEGATIVE, AT_LEAST_ONE = Gt(0), Ge(0), Ge(1)
DISCOUNT = Interval(gt=0, le=1)
"""gamma: 0 would ignore every reward after the first; above 1 the returns diverge."""
FRACTION = Interval(ge=0, le=1)
SKRL_INTERVAL = Annotated[int | Literal["auto"], NON_NEGATIVE]
"""skrl's write and checkpoint intervals: timesteps, 0 for never, or auto (whole iterations, as
:data:`rlscale.rl.skrl.AUTO_INTERVALS` resolves it)."""

AGENT_RULES: dict[str, dict[str, Any]] = {
    "rsl_rl": {
        "seed": Annotated[int, NON_NEGATIVE],
        "max_iterations": Annotated[int, AT_LEAST_ONE],
        "num_steps_per_env": Annotated[int, AT_LEAST_ONE],
        "save_interval": Annotated[int, AT_LEAST_ONE],
        "algorithm.learning_rate": Annotated[float, POSITIVE],
        "algorithm.gamma": Annotated[float, DISCOUNT],
        "algorithm.lam": Annotated[float, FRACTION],
        "algorithm.clip_param": Annotated[float, POSITIVE],
        "algorithm.num_learning_epochs": Annotated[int, AT_LEAST_ONE],
        "algorithm.num_mini_batches": Annotated[int, AT_LEAST_ONE],
        "algorithm.value_loss_coef": Annotated[float, NON_NEGATIVE],
        "algorithm.entropy_coef": Annotated[float, NON_NEGATIVE],
        "algorithm.desired_kl": Annotated[float | None, POSITIVE],
        "algorithm.max_grad_norm": Annotated[float, POSITIVE],
        "algorithm.schedule": Literal["adaptive", "fixed"],
        "algorithm.grad_reduce_bucket_mb": Annotated[float, POSITIVE],
    },
    "rl_games": {
        "params.seed": Annotated[int, NON_NEGATIVE],
        "params.config.learning_rate": Annotated[float, POSITIVE],
        "params.config.gamma": Annotated[float, DISCOUNT],
        "params.config.tau": Annotated[float, FRACTION],
        "params.config.e_clip": Annotated[float, POSITIVE],
        "params.config.kl_threshold": Annotated[float, POSITIVE],
        "params.config.grad_norm": Annotated[float, POSITIVE],
        "params.config.entropy_coef": Annotated[float, NON_NEGATIVE],
        "params.config.critic_coef": Annotated[float, NON_NEGATIVE],
        "params.config.horizon_length": Annotated[int, AT_LEAST_ONE],
        "params.config.minibatch_size_per_env": Annotated[int, AT_LEAST_ONE],
        "params.config.mini_epochs": Annotated[int, AT_LEAST_ONE],
        "params.config.max_epochs": Annotated[int, AT_LEAST_ONE],
        "params.config.seq_length": Annotated[int, AT_LEAST_ONE],
        "params.config.save_frequency": Annotated[int, NON_NEGATIVE],
        "params.config.score_to_win": float,
        "params.config.lr_schedule": Literal["adaptive", "linear", "None"],
        "params.network.space.continuous.sigma_init.val": float,
    },
    "skrl": {
        "seed": Annotated[int, NON_NEGATIVE],
        "agent.rollouts": Annotated[int, AT_LEAST_ONE],
        "agent.learning_epochs": Annotated[int, AT_LEAST_ONE],
        "agent.mini_batches": Annotated[int, AT_LEAST_ONE],
        "agent.discount_factor": Annotated[float, DISCOUNT],
        "agent.gae_lambda": Annotated[float, FRACTION],
        "agent.learning_rate": Annotated[float, POSITIVE],
        "agent.grad_norm_clip": Annotated[float, NON_NEGATIVE],
        "agent.ratio_clip": Annotated[float, POSITIVE],
        "agent.value_clip": Annotated[float, POSITIVE],
        "agent.entropy_loss_scale": Annotated[float, NON_NEGATIVE],
        "agent.value_loss_scale": Annotated[float, NON_NEGATIVE],
        "agent.kl_threshold": Annotated[float, NON_NEGATIVE],
        "agent.experiment.write_interval": SKRL_INTERVAL,
        "agent.experiment.checkpoint_interval": SKRL_INTERVAL,
        "trainer.timesteps": Annotated[int, AT_LEAST_ONE],
    },
}
"""Library → dotted agent config key → the type its value must have, with its range as ``annotated_types`` bounds;
keys left out take the type of their default, unbounded."""


def apply_override(cfg: dict, override: str, rl_library: str) -> None:
    """Set ``cfg[a][b]... = value`` from ``"a.b=value"``; the key must exist, so a typo is an error, not a no-op.

    Raises:
        ValueError: for a malformed override, a key the config does not have, or a value of the wrong type or out
            of the library's range.
    """
    key, sep, text = override.partition("=")
    if not sep or not key:
        raise ValueError("expected KEY=VALUE")
    *parents, leaf = key.split(".")
    node = cfg
    for part in parents:
        if not isinstance(node.get(part), dict):
            raise ValueError(f"the agent config has no section {part!r}; sections here: {_sections(node)}")
        node = node[part]
    if leaf not in node:
        raise ValueError(f"the agent config has no key {key!r}; keys here: {', '.join(map(str, node))}")
    node[leaf] = checked_value(key, parse_value(text), node[leaf], rl_library)


def check_against_generic(override: str, rl_library: str) -> None:
    """Check the value of ``KEY=VALUE`` against ``rl_library``'s generic config (``default_agents/``) where it has
    ``KEY``, without a task: what a study config can check at parse time. A key only some task's config has is left
    to the run.

    Raises:
        ValueError: for a value of the wrong type or out of the library's range.
    """
    key, _, text = override.partition("=")
    node = yaml.safe_load(default_agent_path(rl_library).read_text())
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    checked_value(key, parse_value(text), node, rl_library)


def checked_value(key: str, value: Any, default: Any, rl_library: str) -> Any:
    """``value`` for the entry ``key`` whose default is ``default``, once checked.

    Raises:
        ValueError: naming the key, the value and what it must be.
    """
    rule = AGENT_RULES.get(rl_library, {}).get(key)
    if rule is None and default is None:
        return value
    kind = typing.get_args(rule)[0] if typing.get_origin(rule) is Annotated else rule or type(default)
    if not _conforms(kind, value):
        raise ValueError(f"{key} must be {_describe(kind)} (default {default!r}), got {value!r}")
    broken = bound_violation(value, getattr(rule, "__metadata__", ()))
    if broken:
        raise ValueError(f"{key} {broken} for {rl_library}, got {value!r}")
    return value


def _conforms(kind: Any, value: Any) -> bool:
    if typing.get_origin(kind) is Literal:
        return value in typing.get_args(kind)
    if typing.get_args(kind):  # a union
        return any(_conforms(member, value) for member in typing.get_args(kind))
    if kind is type(None):
        return value is None
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


def _describe(kind: Any) -> str:
    if typing.get_origin(kind) is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(kind)))
    if typing.get_args(kind):
        return " or ".join(_describe(member) for member in typing.get_args(kind))
    names = {bool: "true or false", int: "an integer", float: "a number", str: "text", list: "a list [...]"}
    return names.get(kind, "null" if kind is type(None) else f"a {getattr(kind, '__name__', kind)}")


def _sections(node: dict) -> str:
    return ", ".join(str(name) for name, value in node.items() if isinstance(value, dict)) or "none"
