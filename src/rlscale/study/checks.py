"""The study config's cross-field checks, on the effective config (:func:`rlscale.study.config.validated_config`
resolves it): what the JSON schema cannot express, each refused in one line that names the key, where its value was
written and the fix; and where each world size runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rlscale.launch.ranks import NodeSplit
from rlscale.rl.agent_overrides import check_against_generic
from rlscale.rl.tracking import missing_client
from rlscale.run.args import TRACKER_OPTIONS
from rlscale.study.schema import StudyConfigError
from rlscale.tasks import UnknownTaskError, resolve_task_id

PARITY_TASK_KEYS = ("max_env_steps", "target", "num_envs_per_rank", "libraries")
"""Keys of ``parity`` that map task ids; on CPU they hold the fallback's entries and the user's, like
``num_envs_per_task``."""


def user_wrote(explicit: Mapping[str, str], key: str) -> str | None:
    """Where the user wrote ``key`` (a dotted path such as ``iterations.train``), or one of its parts; None if not."""
    for path, source in explicit.items():
        if path == key or path.startswith(f"{key}.") or key.startswith(f"{path}."):
            return source
    return None


DEFAULT_BASE = "config/config.yaml"
"""Where a value nobody wrote comes from when the user's files overlay the project's config (``base``)."""


def source_of(study: Mapping, key: str) -> str:
    """Where ``key`` of the effective config came from, for a refusal: the user's file, a profile or ``--config``,
    ``cpu_fallback``, else the base (``config/config.yaml``, or the schema's defaults where a file of the user's
    replaced it)."""
    written = user_wrote(study.get("explicit") or {}, key)
    if written is None and any(path == key or key.startswith(f"{path}.") for path in study.get("fallback_filled", ())):
        return "cpu_fallback"
    return written or study.get("base") or DEFAULT_BASE


def written_as(study: Mapping, key: str) -> str:
    """``key`` and where its value came from, as a refusal names them: ``world_sizes (from mine.yaml)``."""
    return f"{key} (from {source_of(study, key)})"


def check_task_id(key: str, task: str) -> None:
    """Refuse, naming ``key``, a task id the registry does not know or an alias of one."""
    try:
        registered = resolve_task_id(task)
    except UnknownTaskError as error:
        raise ValueError(f"{key}: {error}") from None
    if registered != task:
        raise ValueError(f"{key}: {task} is an alias of {registered}; write {registered}")


def check_task_ids(config: Mapping, source: Callable[[str], str]) -> None:
    """Refuse task ids that are not registered, in ``tasks`` and the CPU fallback's (checked on a GPU host too), so
    that a typo stops the study at parse time rather than when its validate job runs. ``num_envs_per_task`` keys
    must be among the tasks (:func:`check_config`), hence registered too.

    An Isaac Lab alias is refused as well: results and bundles are filed under the registered id, which it must match.
    A plug-in's ``package.module:Task-Id`` stays as written (every job imports the module again); a broken plug-in
    is refused here, in one line naming it.

    Raises:
        ValueError: naming the key, where it was written (``source``), the id and the registry's way out.
    """
    fallback = config.get("cpu_fallback") or {}
    for key, tasks in (("tasks", config["tasks"]), ("cpu_fallback.tasks", fallback.get("tasks", []))):
        for task in tasks:
            check_task_id(f"{key} (from {source(key)})", task)


def node_split(world_size: int, gpus_per_node: int, device: str, written_in: str | None = None) -> NodeSplit:
    """Return a world size's split over nodes: one node up to ``gpus_per_node`` (or on CPU), else
    ``world_size / gpus_per_node`` nodes of ``gpus_per_node`` ranks.

    Raises:
        ValueError: If a multi-node world size is not a multiple of ``gpus_per_node`` (naming ``written_in``, where
            the world sizes were written).
    """
    if device == "cpu" or world_size <= gpus_per_node:
        return NodeSplit(world_size)
    if world_size % gpus_per_node:
        where = f" (from {written_in})" if written_in else ""
        raise ValueError(
            f"world_sizes: {world_size}{where} spans several nodes but is not a multiple of gpus_per_node="
            f"{gpus_per_node}; use multiples of gpus_per_node above it."
        )
    return NodeSplit(world_size, world_size // gpus_per_node)


def check_config(config: Mapping) -> None:
    """Check what the JSON schema cannot express, on the effective config; raise ``ValueError`` naming the key,
    where it was written (:func:`source_of`) and the fix.

    Entries the user wrote for a library or task the study leaves out are refused (they would do nothing); the
    project's own (``config/config.yaml`` keeps agent overrides and parity entries of every library and task) are not.
    """
    explicit, iterations, tasks = config.get("explicit") or {}, config["iterations"], config["tasks"]
    if config["warmup_iterations"] >= iterations["benchmark"]:
        raise ValueError(
            f"warmup_iterations={config['warmup_iterations']} (from {source_of(config, 'warmup_iterations')}) "
            f"leaves none of iterations.benchmark={iterations['benchmark']} to measure; lower it or raise "
            "iterations.benchmark."
        )
    interval = config["checkpoint_interval"]
    if interval > iterations["train"] and user_wrote(explicit, "checkpoint_interval"):
        raise ValueError(
            f"checkpoint_interval={interval} (from {source_of(config, 'checkpoint_interval')}) is above "
            f"iterations.train={iterations['train']}: a train run would save no checkpoint before its end, so a rerun "
            f"after a crash would start over; use at most {iterations['train']}"
        )
    for entry in config["libraries"]:
        if entry["ml_framework"] != "torch":
            raise ValueError(
                f"{written_as(config, 'libraries')}: {entry['name']} with ml_framework {entry['ml_framework']}: the "
                "multi-GPU benchmark times torchrun ranks, and skrl's JAX launcher is not one; study it with "
                "ml_framework torch."
            )
    keys = [entry["name"] for entry in config["libraries"]]  # every entry is torch (above): its name is its key
    if len(set(keys)) != len(keys):
        raise ValueError(
            f"{written_as(config, 'libraries')}: lists the same library and ml_framework twice: {keys}; list each once."
        )
    for library, overrides in config["agent_overrides"].items():
        key = f"agent_overrides.{library}"
        if overrides and library not in keys and user_wrote(explicit, key):
            raise ValueError(
                f"{written_as(config, key)}: {library} is not among the libraries studied ({', '.join(keys)}, from "
                f"{source_of(config, 'libraries')}); add it to libraries or remove the entry"
            )
        for index, override in enumerate(overrides):
            entry = f"{key}[{index}] (from {source_of(config, key)}): {override}"
            if override.startswith("agent."):
                try:
                    check_against_generic(override.removeprefix("agent."), library)
                except ValueError as error:
                    raise ValueError(f"{entry}: {error}") from None
            if override.partition("=")[0] in TRACKER_OPTIONS:
                raise ValueError(
                    f"{entry}: the study's logger and log_project_name keys set the tracker of every run; set them "
                    "instead"
                )
    _check_logger(config)
    if config["peer_baseline"] and any(config["agent_overrides"].values()):
        raise ValueError(
            f"{written_as(config, 'peer_baseline')} with agent_overrides: the peer baseline trains the agent config as "
            "shipped and cannot mirror them; empty agent_overrides or set peer_baseline: false."
        )
    for task in config.get("num_envs_per_task") or {}:
        if task not in tasks:
            raise ValueError(
                f"{written_as(config, f'num_envs_per_task.{task}')}: {task} is not in tasks ({', '.join(tasks)}); "
                "add it to tasks or remove its entry (an overlay file clears every entry with "
                "`num_envs_per_task: null`)."
            )
    if 1 not in config["world_sizes"]:
        raise ValueError(
            f"{written_as(config, 'world_sizes')}: {config['world_sizes']} has no 1, the size that efficiency and "
            "parity compare every world size with; add 1"
        )
    for world_size in config["world_sizes"]:
        split = node_split(world_size, config["gpus_per_node"], config["device"], source_of(config, "world_sizes"))
        if split.nodes > 1 and config["cluster"] != "slurm":
            raise ValueError(
                f"world_sizes: {world_size} (from {source_of(config, 'world_sizes')}) spans {split.nodes} nodes of "
                f"gpus_per_node={config['gpus_per_node']}, which needs a cluster: run with --profile "
                "config/profiles/slurm (docs/cluster.md), or drop it"
            )
    check_parity(config, keys)
    _check_evaluation(config)


def _check_evaluation(config: Mapping) -> None:
    """Refuse an ``evaluation.num_envs`` below the evaluated tasks' commands: ``rlscale evaluate`` needs an env per
    command."""
    tasks = config.get("evaluated_tasks") or []
    if not tasks:
        return
    from rlscale.tasks.locomotion.cfg import EVALUATION_COMMANDS

    envs, commands = config["evaluation"]["num_envs"], len(EVALUATION_COMMANDS)
    if envs < commands:
        raise ValueError(
            f"{written_as(config, 'evaluation.num_envs')}: {envs} envs cannot cover the {commands} evaluation commands "
            f"of {', '.join(tasks)} (one env each at least); use at least {commands}"
        )


def _check_logger(config: Mapping) -> None:
    logger = config.get("logger", "tensorboard")  # the schema's default
    extra = missing_client(logger)
    if extra is not None:
        raise ValueError(
            f"logger: {logger} (from {source_of(config, 'logger')}) needs its client, which is not installed: "
            f"pip install '{extra}'"
        )
    if config["peer_baseline"] and logger != "tensorboard":
        raise ValueError(
            f"peer_baseline with logger {logger}: a tracker run adds work the peer baseline does not do to the timed "
            "iterations; set logger: tensorboard or peer_baseline: false."
        )


PARITY_METRICS = ("mean_episode_length", "mean_return")
"""Parity targets every task has; a task's ``Metrics/<name>`` log values (``extras["log"]``) are targets too."""
PARITY_METRIC_PREFIX = "Metrics/"


def check_parity(study: Mapping, library_keys: list[str]) -> None:
    """Check what the schema cannot in ``parity``: its task ids are registered, each key but ``target`` names a task
    with a target, an entry the user wrote names a task studied (the project's entries for tasks an overlay drops
    stay unused), and each studied target has a budget, a known metric and libraries of the study.

    Raises:
        ValueError: naming the key, where it was written and the fix.
    """
    parity, explicit, tasks = study.get("parity") or {}, study.get("explicit") or {}, study["tasks"]
    targets = parity.get("target") or {}
    for key in ("target", *(name for name in PARITY_TASK_KEYS if name != "target")):
        for task in parity.get(key) or {}:
            entry = f"parity.{key}.{task}"
            check_task_id(written_as(study, entry), task)
            if task not in targets:
                raise ValueError(
                    f"{written_as(study, entry)}: {task} has no parity.target; add one or remove the entry"
                )
            if task not in tasks and user_wrote(explicit, entry):
                raise ValueError(
                    f"{written_as(study, entry)}: {task} is not among the tasks studied ({', '.join(tasks)}, from "
                    f"{source_of(study, 'tasks')}); add it to tasks or remove the entry"
                )
    for task in (task for task in targets if task in tasks):
        target = f"parity.target.{task}"
        if task not in (parity.get("max_env_steps") or {}):
            raise ValueError(
                f"{written_as(study, target)}: {task} has a target but no budget; add parity.max_env_steps.{task}"
            )
        metric = targets[task]["metric"]
        if metric not in PARITY_METRICS and not metric.startswith(PARITY_METRIC_PREFIX):
            raise ValueError(
                f"{written_as(study, f'{target}.metric')}: {metric!r}; use {', '.join(PARITY_METRICS)} or a task log "
                f"key {PARITY_METRIC_PREFIX}<name>"
            )
        for library in (parity.get("libraries") or {}).get(task, []):
            if library not in library_keys:
                raise ValueError(
                    f"{written_as(study, f'parity.libraries.{task}')}: {library} is not among the study's libraries "
                    f"({', '.join(library_keys)})"
                )


def check_gpu_limit(study: Mapping, gpu_limit: int | None) -> None:
    """Refuse a Snakemake GPU limit (``--resources gpu=N``) below what one job of a CUDA study needs on one host.

    Snakemake accepts it and shrinks the job's grant to N, so the job's launcher would refuse only once the study
    reaches it. World sizes up to ``gpus_per_node`` need that many GPUs of one host (validate needs one); larger ones
    ask SLURM for ``gpus_per_node`` per node through ``gres``, outside this limit. Without a limit there is nothing to
    check.

    Raises:
        StudyConfigError: naming the limit, the world size that needs more and the fix.
    """
    if study["device"] != "cuda" or gpu_limit is None:
        return
    splits = [node_split(size, study["gpus_per_node"], "cuda") for size in study["world_sizes"]]
    largest = max([1, *(split.world_size for split in splits if split.nodes == 1)])  # validate runs one rank
    needed = NodeSplit(largest).gpus_per_node("cuda")
    if gpu_limit < needed:
        raise StudyConfigError(
            f"resources: gpu={gpu_limit} is below the {needed} GPU(s) that world size {largest} needs on one host, so "
            f"its jobs would be refused when they run; pass --resources gpu={needed} or more, or drop that world size"
        )
