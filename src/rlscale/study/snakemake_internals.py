"""Every part of Snakemake the study reads beyond its documented interfaces, behind small typed functions: a Snakemake
release may change any of them without notice, so they live here alone, and tests/test_snakemake_contract.py checks
each against the installed Snakemake.

Supported: Snakemake >=9,<10 (:data:`SUPPORTED_SNAKEMAKE`, the pin in pyproject.toml), tested with 9.27.1. Importing
this module under another version fails in one line naming it and the range; a use that finds an internal changed
fails in one line naming the version and what changed.

Why each internal, and not a documented interface:

- Snakemake's own command-line parser (``snakemake.cli``), run again on ``sys.argv``: the workflow gets the merged
  ``--config`` values, not which profile or the command line wrote each one, nor where each resource value came from.
- ``workflow.config_settings``: the ``--configfile`` files (the Snakefile loads config/config.yaml only without
  them), the ``--config`` values, and the ``--config`` entries Snakemake hands to the jobs it spawns. A profile key
  that a command-line ``--config`` dropped is appended there, so that a SLURM job that parses the workflow again sees
  it too; no documented setting adds a ``--config`` entry.
- ``workflow.global_resources``: the ``--resources gpu=N`` limit, checked against the world sizes at parse time.
- ``snakemake.resources.Resource.parse_human_friendly``: the sizes and times Snakemake reads for a resource.
- ``snakemake.common.configfile.load_configfile``: a config file read as Snakemake reads ``--configfile``.
- Snakemake's logger: the filters of its console handler (they apply ``--quiet``), and what its job and progress
  records carry (the logger-plugin interface names the events; in Snakemake 9 their attributes are Snakemake's).
  A logger plugin is the documented route, but it is a package of its own that each command line names with
  ``--logger``; a handler added at parse time needs neither, and keeps the estimate on every command line.

Used directly elsewhere, as Snakemake's docs and workflows at large use them: ``snakemake.utils.update_config``,
``workflow.basedir`` (the main Snakefile's folder), ``WorkflowError`` (``snakemake_interface_common``'s, the plugin
interfaces' own) and ``snakemake.logging.logger``, the logger every Snakemake message goes through, which the preamble
Snakemake writes into each ``script:`` imports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import snakemake
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from snakemake.exceptions import WorkflowError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from snakemake.workflow import Workflow

SUPPORTED_SNAKEMAKE = ">=9,<10"
"""The Snakemake releases the study supports (a version specifier, as pyproject.toml pins it): those whose internals
are as this module reads them."""
SNAKEMAKE_VERSION = snakemake.__version__
"""The Snakemake this process runs."""


class UnsupportedSnakemake(WorkflowError):
    """A Snakemake outside :data:`SUPPORTED_SNAKEMAKE`, or one whose internals changed (a WorkflowError: Snakemake
    shows its line first, as it shows a bad config's)."""


def unsupported_message(change: str) -> str:
    """The one line that names the running Snakemake, what of it the study cannot use, and the supported range."""
    return f"Snakemake {SNAKEMAKE_VERSION} {change}; rlscale's study supports Snakemake {SUPPORTED_SNAKEMAKE}"


def _check_version() -> None:
    if not SpecifierSet(SUPPORTED_SNAKEMAKE).contains(Version(SNAKEMAKE_VERSION), prereleases=True):
        raise UnsupportedSnakemake(unsupported_message("is not supported"))


_check_version()

# Imported once the version is known to be supported: an older Snakemake has no logger-plugin interface.
from snakemake.logging import logger as snakemake_logger  # noqa: E402
from snakemake_interface_logger_plugins.common import LogEvent  # noqa: E402


@contextmanager
def _relying_on(internal: str) -> Iterator[None]:
    """Turn a missing or reshaped internal into :class:`UnsupportedSnakemake` naming it."""
    try:
        yield
    except (ImportError, AttributeError, KeyError, TypeError) as error:
        change = f"changed {internal} ({type(error).__name__}: {error})"
        raise UnsupportedSnakemake(unsupported_message(change)) from None


# --- The command line --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SnakemakeArguments:
    """What the study reads of a ``snakemake`` command line and the profiles it names."""

    profile_files: list[Path]
    """The profiles' YAML files, in the order Snakemake applies them: ``--profile`` (or ``$SNAKEMAKE_PROFILE``) in
    order, then the workflow profile."""
    config: list[str]
    """The command line's ``--config`` entries, as written."""
    resources: list[tuple[str, str]]
    """``(option, entry)`` of each resource value on the command line: ``("set-resources", "train:gpu=2")``,
    ``("default-resources", "mem_mb=1000")``."""


def parse_arguments(arguments: Sequence[str], workflow_dir: Path) -> SnakemakeArguments:
    """``snakemake`` arguments (``sys.argv[1:]``) as Snakemake's own parser reads them, without the profiles' values,
    and the profiles' files as Snakemake finds them (``workflow_dir``: the main Snakefile's folder)."""
    with _relying_on("its command-line parser (snakemake.cli.get_argument_parser)"):
        from snakemake.cli import get_argument_parser

        args, _ = get_argument_parser().parse_known_args(list(arguments))
        resources = [
            ("set-resources", f"{rule}:{resource.name}={resource.raw}")
            for rule, items in (args.set_resources or {}).items()
            for resource in items.values()
            if resource.raw is not None
        ]
        resources += [
            ("default-resources", f"{resource.name}={resource.raw}")
            for resource in (args.default_resources or {}).values()
            if resource.raw is not None
        ]
        names = [name for name in args.profile or [] if name != "none"]
        workflow_profile = args.workflow_profile
        config = list(args.config or [])
    if workflow_profile != "none":
        # Snakemake's parse_args: a file as given, else the first folder of these that exists.
        given = Path(workflow_profile) if workflow_profile else None
        if given is not None and given.is_file():
            names.append(str(given))
        else:
            name = given or Path("default")
            candidates = (name, Path("profiles") / name, workflow_dir / "profiles" / name)
            names += [str(path) for path in candidates if path.exists()][:1]
    return SnakemakeArguments([path for path in map(_profile_file, names) if path is not None], config, resources)


def _profile_file(name: str) -> Path | None:
    """The YAML file of a profile (a folder, a file, or a name Snakemake looks up), as Snakemake picks it."""
    with _relying_on("its profile lookup (snakemake.cli.get_profile_dir)"):
        from snakemake.cli import get_profile_dir

        found = get_profile_dir(name)
    return None if found is None else Path(found[1])


def parse_config_entries(entries: Sequence[str]) -> dict:
    """``--config`` entries (``key=value``) as Snakemake reads them: a number, a boolean, a list or mapping of
    strings, else a string.

    Raises:
        ValueError: an entry Snakemake refuses, in its words.
    """
    with _relying_on("its --config parser (snakemake.cli.parse_config)"):
        from snakemake.cli import parse_config

        return parse_config(list(entries))


def reads_as_size_or_time(name: str, text: str) -> bool:
    """Whether Snakemake reads ``text`` as a size or time for resource ``name`` (``mem=64G``, ``runtime=2h``)."""
    with _relying_on("its resource parser (snakemake.resources.Resource.parse_human_friendly)"):
        from snakemake.resources import Resource

        try:
            return not isinstance(Resource.parse_human_friendly(name, text), str)
        except WorkflowError:
            return False


def load_config_file(path: Path) -> dict:
    """A config file as Snakemake loads a ``--configfile`` (YAML or JSON)."""
    with _relying_on("its config file loader (snakemake.common.configfile.load_configfile)"):
        from snakemake.common.configfile import load_configfile

        return dict(load_configfile(str(path)) or {})


# --- The workflow ------------------------------------------------------------------------------------------------


def configfiles_given(workflow: Workflow) -> list[Path]:
    """The ``--configfile`` files, in order (none: the Snakefile's own ``configfile:`` applies)."""
    with _relying_on("workflow.config_settings.configfiles"):
        return [Path(path) for path in workflow.config_settings.configfiles]


def config_given(workflow: Workflow) -> Mapping:
    """The ``--config`` values Snakemake applied: the command line's, else those of the profiles' ``config:``."""
    with _relying_on("workflow.config_settings.config"):
        return workflow.config_settings.config


def append_config_args(workflow: Workflow, entries: Sequence[str]) -> None:
    """Add ``key=value`` entries to the ``--config`` that Snakemake passes to the jobs it spawns."""
    if not entries:
        return
    with _relying_on("workflow.config_settings.config_args"):
        settings = workflow.config_settings
        settings.config_args = [*(settings.config_args or []), *entries]


def gpu_limit(workflow: Workflow) -> int | None:
    """``--resources gpu=N``'s N, or None without one."""
    with _relying_on("workflow.global_resources"):
        return workflow.global_resources.get("gpu").value


# --- The logger --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunPlanned:
    """The jobs this call will run (finished jobs excluded)."""

    jobs_per_rule: dict[str, int]


@dataclass(frozen=True)
class JobStarted:
    job_id: int
    rule: str


@dataclass(frozen=True)
class JobFinished:
    job_id: int


@dataclass(frozen=True)
class Progress:
    """The progress line: ``done`` of ``total`` steps."""

    done: int
    total: int


SchedulerEvent = RunPlanned | JobStarted | JobFinished | Progress


def scheduler_event(record: logging.LogRecord) -> SchedulerEvent | None:
    """The job or progress event a record of Snakemake's logger carries, or None for any other record."""
    event = getattr(record, "event", None)
    if event not in (LogEvent.RUN_INFO, LogEvent.JOB_INFO, LogEvent.JOB_FINISHED, LogEvent.PROGRESS):
        return None
    with _relying_on(f"its {event} log record"):
        if event == LogEvent.RUN_INFO:
            return RunPlanned({rule: int(count) for rule, count in record.stats.items() if rule != "total"})
        if event == LogEvent.JOB_INFO:
            return JobStarted(int(record.jobid), str(record.rule_name))
        if event == LogEvent.JOB_FINISHED:
            return JobFinished(int(record.job_id))
        return Progress(int(record.done), int(record.total))


def shown_on_console() -> Callable[[logging.LogRecord], bool]:
    """Whether Snakemake's console shows a record: its handlers' filters as set up now, which apply ``--quiet``."""
    console = list(snakemake_logger.handlers)

    def shown(record: logging.LogRecord) -> bool:
        return any(handler.filter(record) for handler in console)

    return shown


def add_log_handler(handler: logging.Handler) -> None:
    """Add ``handler`` to Snakemake's logger, after its console handler: it sees each record after the console."""
    snakemake_logger.addHandler(handler)
