"""What the Snakefile does once per parse, before any rule: resolve the study config from Snakemake's config, files,
profiles and command line, and set the environment every job of the study inherits.

``workflow/rules/common.smk`` calls these two functions, the first with Snakemake's logger; the Snakemake internals
they read are :mod:`rlscale.study.snakemake_internals`'.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rlscale.study import paths
from rlscale.study.checks import check_gpu_limit
from rlscale.study.config import StudyConfigError, validated_config
from rlscale.study.config_source import check_command_line, explicit_keys, study_config
from rlscale.study.job_times import JOB_TIMES_ENV, STUDY_CALL_ENV
from rlscale.study.plan_summary import plan_lines
from rlscale.study.profiles import (
    check_resources,
    profile_config_dropped,
    profile_resources_dropped,
    read_command_line,
)
from rlscale.study.snakemake_internals import append_config_args, config_given, configfiles_given, gpu_limit
from rlscale.study.verdict import PARITY_METRICS_ENV


def resolved_study(workflow: Any, config: MutableMapping, argv: Sequence[str], log: Callable[[str], None]) -> dict:
    """The effective study config of this parse; ``log`` gets the lines about it (its source, the device, the plan),
    the source before any check, so that a refused config still says where it came from.

    The schema (defaults filled in, as ``snakemake.utils.validate`` does), the task ids, then ``device: auto`` resolved
    (``cpu_fallback`` applied on a host without a GPU) and the cross-field checks, then the GPU limit (``--resources
    gpu=N``) against the world sizes and the profiles' and the command line's resource values. A user's
    ``--configfile`` replaces ``config/config.yaml`` unless it is named first (the Snakefile). Snakemake lets a
    ``--config`` on the command line replace a profile's whole ``config:`` list: the profile's other keys are layered
    back under it, and handed to the jobs Snakemake spawns (a SLURM job parses the workflow again). ``config`` is
    updated in place to the user's layers.

    Raises:
        StudyConfigError: A bad config, in one line naming the key.
    """
    default = Path(workflow.basedir, "config", "config.yaml")
    user_config, source, base = study_config(config, configfiles_given(workflow), default)
    command_line = read_command_line(argv, Path(workflow.basedir))
    dropped = profile_config_dropped(command_line.layers, config_given(workflow))
    for key, layer in dropped.items():
        user_config[key] = layer.values[key]
    append_config_args(workflow, [layer.entries[key] for key, layer in dropped.items()])
    config.clear()
    config.update(user_config)
    if source:
        log(source)
    if dropped:
        kept = ", ".join(f"{layer.entries[key]} ({layer.source})" for key, layer in dropped.items())
        log(f"config: --config sets only its own keys; kept from the profiles: {kept}")
    try:
        check_command_line(command_line.layers)
        check_resources(command_line.resources)
    except ValueError as error:
        raise StudyConfigError(f"config: {error}") from None
    if replaced := profile_resources_dropped(command_line.resources):
        log(
            f"config: the command line's resource options replace the profiles' whole lists; dropped: "
            f"{', '.join(replaced)} (repeat on the command line those to keep)"
        )
    study = validated_config(
        config,
        Path(workflow.basedir, "workflow", "schemas", "config.schema.yaml"),
        explicit=explicit_keys(configfiles_given(workflow), command_line.layers, default),
        base=base,
    )
    check_gpu_limit(study, gpu_limit(workflow))
    # Which device, and why, at the top of the console and of .snakemake/log/ (summary.md repeats it).
    for line in [study["device_reason"], *plan_lines(study)]:
        log(line)
    return study


def job_environment(study: Mapping, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables every job of the study inherits (set in this process before Snakemake starts any):

    - the parity metric of each task, which its validate job checks the task logs (:mod:`rlscale.study.verdict`);
    - the study's JAX compilation cache and MuJoCo Warp kernel cache: the first job compiles, the others load; a
      user's own cache paths are kept;
    - the job time records (:mod:`rlscale.study.job_times`) and this Snakemake call's start, which the aggregate rule
      tables each call apart; a job step that parses the workflow again (a SLURM job) keeps the call it inherited.
    """
    name = study["study"]
    targets = (study["parity"].get("target") or {}).items()
    variables = {
        PARITY_METRICS_ENV: json.dumps({task: target["metric"] for task, target in targets if task in study["tasks"]}),
        JOB_TIMES_ENV: str(Path(paths.JOB_TIMES.format(study=name)).resolve()),
    }
    kept = {
        "JAX_COMPILATION_CACHE_DIR": str(Path(paths.JAX_CACHE.format(study=name)).resolve()),
        "WARP_CACHE_PATH": str(Path(paths.WARP_CACHE.format(study=name)).resolve()),
        STUDY_CALL_ENV: datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    return {**variables, **{key: environ.get(key, value) for key, value in kept.items()}}
