"""The Snakemake internals the study reads (rlscale.study.snakemake_internals) are there, and as it reads them, in the
installed Snakemake. A failure names the installed Snakemake and what changed; no study runs, only a two-job
workflow."""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from snakemake_interface_logger_plugins.common import LogEvent

from rlscale.study.snakemake_internals import (
    SNAKEMAKE_VERSION,
    SUPPORTED_SNAKEMAKE,
    UnsupportedSnakemake,
    gpu_limit,
    load_config_file,
    parse_arguments,
    parse_config_entries,
    reads_as_size_or_time,
    scheduler_event,
    unsupported_message,
)

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
SLURM_PROFILE = ROOT / "config" / "profiles" / "slurm"
DEFAULT_PROFILE = ROOT / "workflow" / "profiles" / "default"


def changed(internal: str, found: object) -> str:
    return unsupported_message(f"changed {internal}: found {found!r}")


class TestSupportedRange:
    def test_pyproject_pins_the_supported_range(self):
        dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
        pin = next(Requirement(entry) for entry in dependencies if Requirement(entry).name == "snakemake")
        assert pin.specifier == SpecifierSet(SUPPORTED_SNAKEMAKE)
        # `snakemake --report` (make study's last step) shows the aggregation scripts with pygments.
        assert "reports" in pin.extras

    def test_the_docs_state_it(self):
        assert f"Snakemake `{SUPPORTED_SNAKEMAKE}`" in (ROOT / "docs" / "study.md").read_text()

    def test_another_version_stops_the_import_in_one_line(self):
        script = "import snakemake; snakemake.__version__ = '10.0.0'; import rlscale.study.snakemake_internals"
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        assert result.returncode != 0
        assert result.stderr.splitlines()[-1] == (
            f"rlscale.study.snakemake_internals.UnsupportedSnakemake: Snakemake 10.0.0 is not supported; rlscale's "
            f"study supports Snakemake {SUPPORTED_SNAKEMAKE}"
        )

    def test_a_changed_internal_is_named_in_one_line(self):
        with pytest.raises(UnsupportedSnakemake) as error:
            gpu_limit(SimpleNamespace())
        assert str(error.value).startswith(
            f"Snakemake {SNAKEMAKE_VERSION} changed workflow.global_resources (AttributeError: "
        )
        assert str(error.value).endswith(f"; rlscale's study supports Snakemake {SUPPORTED_SNAKEMAKE}")
        record = logging.LogRecord("snakemake", logging.INFO, __file__, 1, None, None, None)
        record.event = LogEvent.JOB_INFO  # without its jobid
        with pytest.raises(UnsupportedSnakemake, match="changed its job_info log record"):
            scheduler_event(record)


class TestCommandLine:
    def test_the_parser_reads_profiles_config_and_resources(self):
        argv = ["-n", "--profile", str(SLURM_PROFILE), "--workflow-profile", str(DEFAULT_PROFILE)]
        argv += ["--config", "study=foo", "seeds=[1]", "--set-resources", "train:cpus_per_gpu=8", "train:mem_mb=lots"]
        argv += ["--default-resources", "mem_mb=1000"]
        found = parse_arguments(argv, ROOT)
        profiles = [SLURM_PROFILE / "profile.yaml", DEFAULT_PROFILE / "profile.yaml"]
        assert found.profile_files == profiles, changed("its profile lookup (snakemake.cli)", found.profile_files)
        assert found.config == ["study=foo", "seeds=[1]"], changed("its --config option (snakemake.cli)", found.config)
        written = {("set-resources", "train:cpus_per_gpu=8"), ("set-resources", "train:mem_mb=lots")}
        written.add(("default-resources", "mem_mb=1000"))
        assert written <= set(found.resources), changed("its resource options (snakemake.cli)", found.resources)

    def test_the_profile_variable_and_none(self, monkeypatch):
        monkeypatch.setenv("SNAKEMAKE_PROFILE", str(SLURM_PROFILE))
        found = parse_arguments(["-n", "--workflow-profile", "none"], ROOT).profile_files
        assert found == [SLURM_PROFILE / "profile.yaml"], changed("$SNAKEMAKE_PROFILE or --workflow-profile", found)

    def test_config_entries_are_read_as_snakemake_reads_them(self):
        found = parse_config_entries(["count=2", "rate=0.5", "flag=True", "name=x", "sizes=[1,2]"])
        expected = {"count": 2, "rate": 0.5, "flag": True, "name": "x", "sizes": ["1", "2"]}
        assert found == expected, changed("its --config parser (snakemake.cli.parse_config)", found)

    @pytest.mark.parametrize(
        ("name", "text", "reads"),
        [("mem", "64G", True), ("runtime", "2h", True), ("mem_mb", "lots", False), ("cpus_per_gpu", "eight", False)],
    )
    def test_sizes_and_times(self, name, text, reads):
        found = reads_as_size_or_time(name, text)
        assert found == reads, changed(f"its resource parser (Resource.parse_human_friendly) for {name}={text}", found)

    def test_config_files_load(self, tmp_path):
        (tmp_path / "overlay.yaml").write_text("study: mine\niterations: {train: 5}\n")
        (tmp_path / "overlay.json").write_text('{"study": "mine"}')
        found = [load_config_file(tmp_path / name) for name in ("overlay.yaml", "overlay.json")]
        expected = [{"study": "mine", "iterations": {"train": 5}}, {"study": "mine"}]
        assert found == expected, changed("its config file loader (load_configfile)", found)


SNAKEFILE = """
import dataclasses
import json
import logging
from pathlib import Path

from snakemake_interface_executor_plugins.settings import CommonSettings
from snakemake_interface_logger_plugins.common import LogEvent

from rlscale.study import snakemake_internals as internals


def record(**entry):
    with Path("records.jsonl").open("a") as out:
        out.write(json.dumps(entry, default=str) + "\\n")


record(
    configfiles=[str(path.resolve()) for path in internals.configfiles_given(workflow)],
    config=dict(internals.config_given(workflow)),
    gpu_limit=internals.gpu_limit(workflow),
)
internals.append_config_args(workflow, ["added=yes"])
shown = internals.shown_on_console()


class Recorder(logging.Handler):
    def emit(self, log_record):
        try:
            event = internals.scheduler_event(log_record)
        except internals.UnsupportedSnakemake as error:
            record(error=str(error))
            return
        if event is not None:
            record(event=type(event).__name__, shown=shown(log_record), **dataclasses.asdict(event))


internals.add_log_handler(Recorder())


onstart:
    # The arguments of a job Snakemake spawns, as an executor plugin asks for them, and whether the console shows a
    # progress record.
    common = CommonSettings(non_local_exec=True, implies_no_shared_fs=False, job_deploy_sources=False)
    progress = logging.LogRecord("snakemake", logging.INFO, "Snakefile", 1, None, None, None)
    progress.event, progress.done, progress.total = LogEvent.PROGRESS, 1, 3
    record(spawned_args=workflow.spawned_job_args_factory.general_args(common), progress_shown=shown(progress))


rule all:
    input: expand("out/{i}.txt", i=range(2))

rule work:
    output: "out/{i}.txt"
    shell: "echo {wildcards.i} > {output}"
"""


@pytest.mark.parametrize(("quiet", "gpus"), [(False, 3), (True, None)], ids=["gpu-limit", "quiet"])
def test_a_workflow_reads_its_settings_and_log_records(tmp_path, quiet, gpus):
    """In a real run: the settings the study reads, a --config entry appended for spawned jobs, the console's
    filters, and the job and progress records."""
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    (tmp_path / "overlay.yaml").write_text("seed: 3\n")
    argv = [SNAKEMAKE, "--cores", "1", "--configfile", "overlay.yaml", "--config", "study=contract"]
    argv += ["--resources", f"gpu={gpus}"] if gpus else []
    argv += ["--quiet", "progress"] if quiet else []
    result = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    unsupported = [line for line in result.stderr.splitlines() if "rlscale's study supports Snakemake" in line]
    assert result.returncode == 0, unsupported[0] if unsupported else result.stderr[-2000:]
    entries = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    errors = [entry["error"] for entry in entries if "error" in entry]
    assert not errors, errors[0]

    settings = entries[0]
    expected = {"configfiles": [str(tmp_path.resolve() / "overlay.yaml")], "config": {"study": "contract"}}
    expected["gpu_limit"] = gpus
    assert settings == expected, changed("workflow.config_settings or workflow.global_resources", settings)

    onstart = next(entry for entry in entries if "spawned_args" in entry)
    spawned = shlex.split(onstart["spawned_args"])
    config = spawned[spawned.index("--config") + 1 :][:2]
    assert config == ["study=contract", "added=yes"], changed("the --config of spawned jobs (config_args)", config)
    shown = onstart["progress_shown"]
    assert shown is not quiet, changed("its console handler's filters (--quiet progress)", shown)

    events = [entry for entry in entries if "event" in entry]
    planned = [entry["jobs_per_rule"] for entry in events if entry["event"] == "RunPlanned"]
    started = {entry["job_id"]: entry["rule"] for entry in events if entry["event"] == "JobStarted"}
    finished = {entry["job_id"] for entry in events if entry["event"] == "JobFinished"}
    progress = [(entry["done"], entry["total"]) for entry in events if entry["event"] == "Progress" and entry["shown"]]
    assert planned == [{"work": 2, "all": 1}], changed("its run_info log record", planned)
    assert sorted(started.values()) == ["all", "work", "work"], changed("its job_info log record", started)
    assert progress == ([] if quiet else [(1, 3), (2, 3), (3, 3)]), changed("its progress log record", progress)
    if not quiet:  # under --quiet progress Snakemake 9 sends no job-end record
        assert finished == set(started), changed("its job_finished log record", finished)
