"""The study's SLURM side on a real scheduler: the study through the SLURM executor, 2-node jobs of the
``*_multinode`` rules, scancel, a time limit, train jobs resumed after a kill, and GPU requests.

``make test-slurm`` starts the two-node cluster of ``tools/checks/slurm_local_cluster.sh`` (n1 and n2, two slurmd on
this host at 127.0.0.1, each with 2 fake GPUs), runs these tests with ``RLSCALE_SLURM_TESTS=1`` and stops the cluster.
Without that variable they are skipped (``make test``); with it, a cluster that does not answer fails them.

``device: cpu`` never makes a multi-node job (``node_split`` is one node on CPU), so the 2-node tests submit the dry-run
command of a ``*_multinode`` rule from a GPU config with ``--device cuda`` swapped for ``--device cpu``, with the
sbatch options that the executor plugin builds from the rule's resources. n1 and n2 share this host: a process
belongs to a job and a node by the ``SLURM_JOB_ID`` and ``SLURMD_NODENAME`` in its environment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from rlscale.study.job import Job

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
CONFIG = str(ROOT / "config" / "config.yaml")
CI_OVERLAY = str(ROOT / ".test" / "config" / "config.yaml")
PROFILES = ["--profile", str(ROOT / "config" / "profiles" / "slurm")]
PROFILES += ["--workflow-profile", str(ROOT / "config" / "profiles" / "slurm-local")]
NODES = ["n1", "n2"]
TASK_DIR = "Isaac-Cartpole-Direct/rsl_rl"
UNFINISHED = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED"}

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        os.environ.get("RLSCALE_SLURM_TESTS") != "1", reason="needs the local SLURM cluster: make test-slurm"
    ),
]


def job_env(tmp: Path) -> dict[str, str]:
    """One thread per CPU rank, gloo on loopback, a private lease directory (jobs inherit it: sbatch --export=ALL)."""
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "GLOO_SOCKET_IFNAME": "lo",
        "RLSCALE_LEASE_DIR": str(tmp / "lease"),
        "PYTHONUNBUFFERED": "1",
    }


def slurm(*command: str) -> str:
    """Stdout of a SLURM client command."""
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=30).stdout


def squeue(job_ids, fields: str) -> list[list[str]]:
    """squeue rows (finished jobs included, for MinJobAge) of ``job_ids``, as ``fields`` split at ``|``."""
    ids = ",".join(map(str, job_ids))
    out = slurm("squeue", "--noheader", "--states=all", f"--jobs={ids}", f"--format={fields}")
    return [line.split("|") for line in out.splitlines()]


def running_jobs(comment_prefix: str) -> list[str]:
    """Ids of the running jobs whose comment (the plugin's ``rule_<rule>_wildcards_...``) starts with the prefix."""
    rows = [
        line.split("|") for line in slurm("squeue", "--noheader", "--states=RUNNING", "--format=%i|%k").splitlines()
    ]
    return [job_id for job_id, comment in rows if comment.startswith(comment_prefix)]


def job_state(job_id: str) -> str:
    [[state]] = squeue([job_id], "%T")
    return state


def wait_until_finished(job_id: str, timeout: float) -> str:
    """Poll the job's state until it leaves the queue's active states; return the final state."""
    deadline = time.monotonic() + timeout
    while (state := job_state(job_id)) in UNFINISHED and time.monotonic() < deadline:
        time.sleep(0.5)
    return state


def job_processes(job_id: str) -> list[tuple[str, str]]:
    """(node, command line) of every live process of a SLURM job, its step daemons (slurmstepd) aside."""
    found = []
    for process in psutil.process_iter(["name", "cmdline", "status"]):
        if process.info["name"] == "slurmstepd" or process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            environ = process.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if environ.get("SLURM_JOB_ID") == job_id:
            found.append((environ.get("SLURMD_NODENAME", "?"), " ".join(process.info["cmdline"] or [])))
    return found


def wait_for_no_process(job_id: str, within: float) -> list[tuple[str, str]]:
    """Wait up to ``within`` seconds for the job's processes to end; return those still alive."""
    deadline = time.monotonic() + within
    while (alive := job_processes(job_id)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return alive


def slurmd_log(node: str) -> str:
    """A node's slurmd log, wherever the cluster's config puts it."""
    config = slurm("scontrol", "show", "config")
    pattern = re.search(r"^SlurmdLogFile\s*=\s*(\S+)", config, re.MULTILINE).group(1)
    return Path(pattern.replace("%n", node)).read_text()


def snakemake(workdir: Path, *args: str) -> list[str]:
    """argv of Snakemake on this repository's Snakefile in ``workdir``, with the SLURM and local-cluster profiles."""
    return [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *PROFILES, *args]


def dry_run_jobs(workdir: Path, overlay: str, *args: str) -> list[dict]:
    """Jobs of a dry run (``--cores 64``: a dry run clamps threads to --cores, a submission does not): each with its
    rule, threads, resources and shell command."""
    (workdir / "overlay.yaml").write_text(overlay)
    command = snakemake(workdir, "-n", "-p", "--cores", "64", "--configfile", CONFIG, CI_OVERLAY, "overlay.yaml")
    result = subprocess.run([*command, *args], capture_output=True, text=True, cwd=workdir, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", result.stdout):
        head = re.match(r"(?:local)?rule (\w+):", block)
        if not head:
            continue
        threads = re.search(r"^\s+threads: (\d+)$", block, re.MULTILINE)
        resources = {}
        for item in re.search(r"^\s+resources: (.*)$", block, re.MULTILINE).group(1).split(", "):
            key, _, value = item.partition("=")
            resources[key] = int(value) if value.isdigit() else value
        shell = re.search(r"^Shell command: (.*)$", block, re.MULTILINE)
        jobs.append(
            {
                "rule": head.group(1),
                "threads": int(threads.group(1)) if threads else 1,
                "resources": resources,
                "shell": shell.group(1) if shell else "",
            }
        )
    return jobs


def plugin_sbatch(job: dict, workdir: Path) -> str:
    """The sbatch command line the executor plugin builds for a dry-run job (its own submit-string functions)."""
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    resources = job["resources"]
    fake = SimpleNamespace(resources=SimpleNamespace(**resources, get=resources.get), threads=job["threads"])
    params = {
        "run_uuid": f"rlscale-test-{job['rule']}",
        "slurm_logfile": str(workdir / "slurm-%j.log"),
        "comment_str": f"rule_{job['rule']}",
        "account": "",
        "partition": f"-p {resources['slurm_partition']}",
        "workdir": str(workdir),
    }
    return get_submit_command(fake, params) + set_gres_string(fake)


# What the plugin's job step (snakemake-executor-plugin-slurm-jobstep 0.6.1) does before it runs the shell of a job
# with an `mpi` resource: it drops every SLURM_*, SRUN_* and SBATCH_* variable but the allocation's identity, so the
# rule's own srun finds the allocation through SLURM_JOB_ID alone. POSIX sh: sbatch --wrap runs /bin/sh.
JOBSTEP_ENVIRONMENT = (
    "unset $(env | awk -F= '/^(SLURM|SRUN|SBATCH)_/ && "
    "$1 !~ /^SLURM_(JOB_?ID|ARRAY_.*|CLUSTER_NAME|SUBMIT_DIR|SUBMIT_HOST)$/ {print $1}'); "
)


def submit(sbatch: str, wrap: str, workdir: Path) -> str:
    """Submit ``wrap`` with an sbatch command line; return the job id."""
    command = f"{sbatch} --wrap={shlex.quote(wrap)}"
    result = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, cwd=workdir, env=job_env(workdir), timeout=30
    )
    assert result.returncode == 0, f"{command}\n{result.stderr}"
    return result.stdout.strip().split(";")[0]


def job_record(job: dict) -> Job:
    """The job record a dry-run job's shell hands to ``python -m rlscale.study run``."""
    words = shlex.split(job["shell"])
    return Job.from_json(words[words.index("rlscale.study") + 2])


def submit_on_cpu(job: dict, workdir: Path, max_iterations: int | None = None) -> str:
    """Submit a ``*_multinode`` dry-run job as the plugin would, its record changed to run its ranks on CPU (and for
    ``max_iterations``, if given)."""
    record = job_record(job)
    run = record.run if max_iterations is None else dataclasses.replace(record.run, max_iterations=max_iterations)
    changed = dataclasses.replace(record, device="cpu", run=run)
    shell = job["shell"].replace(shlex.quote(record.to_json()), shlex.quote(changed.to_json()))
    assert shell != job["shell"], "the record was not found in the job's shell"
    log = re.search(r"> (\S+) 2>&1$", shell).group(1)
    (workdir / log).parent.mkdir(parents=True, exist_ok=True)  # Snakemake makes a job's log directory
    return submit(plugin_sbatch(job, workdir), JOBSTEP_ENVIRONMENT + shell, workdir)


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """The local cluster answers, with both nodes up (a missing cluster fails the tests rather than skip them)."""
    states = dict(line.split() for line in slurm("sinfo", "--noheader", "--Node", "--format=%N %t").splitlines())
    assert sorted(states) == NODES and set(states.values()) <= {"idle", "mix", "alloc"}, states


# --- The study through the SLURM executor ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> SimpleNamespace:
    """Run the tiny CPU study (.test/config) with the SLURM profile on the local cluster; its workdir and output."""
    workdir = tmp_path_factory.mktemp("study")
    command = snakemake(workdir, "--configfile", CONFIG, CI_OVERLAY)
    result = subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=job_env(workdir), timeout=480)
    assert result.returncode == 0, result.stderr[-4000:]
    return SimpleNamespace(workdir=workdir, output=result.stdout + result.stderr)


def submitted_jobs(output: str) -> dict[str, dict]:
    """SLURM job id -> the rule, threads and mem_mb that Snakemake printed for the job it submitted as that id."""
    jobs = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        head = re.search(r"^(?:local)?rule (\w+):", block, re.MULTILINE)
        jobid = re.search(r"^\s+jobid: (\d+)$", block, re.MULTILINE)
        if head and jobid:
            threads = re.search(r"^\s+threads: (\d+)$", block, re.MULTILINE)
            jobs[jobid.group(1)] = {
                "rule": head.group(1),
                "threads": int(threads.group(1)) if threads else 1,
                "mem_mb": int(re.search(r"\bmem_mb=(\d+)", block).group(1)),
            }
    submissions = re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", output)
    return {slurm_id: jobs[jobid] for jobid, slurm_id in submissions}


class TestStudyOnSlurm:
    def test_outputs(self, study):
        """validate -> plan -> probe -> train -> benchmark -> aggregate ends with the table and the plots; the parity
        runs end in parity.csv."""
        results = study.workdir / "results" / "ci_tiny"
        for name in [
            "scaling.csv",
            "throughput.png",
            "efficiency.png",
            "learning_curves.png",
            "summary.md",
            "parity.csv",
        ]:
            assert (results / name).stat().st_size > 0, name

    def test_every_job_ran_as_a_slurm_job_with_its_resources(self, study):
        """The scheduler ran every non-local job to COMPLETED on n1 or n2, with the CPUs (threads) and memory
        (mem_mb) that Snakemake declared for it; plan, aggregate and parity_aggregate (local rules) ran on the submit
        host."""
        submitted = submitted_jobs(study.output)
        assert {job["rule"] for job in submitted.values()} == {
            "check_task",
            "validate",
            "probe",
            "train",
            "benchmark",
            "benchmark_single_seed",
            "parity",
        }
        rows = squeue(submitted, "%i|%k|%T|%N|%C|%m")
        assert sorted(row[0] for row in rows) == sorted(submitted)
        print("\nSLURM jobs of the study (id, comment, state, node, CPUs, memory):")
        for job_id, comment, state, node, cpus, memory in rows:
            print(f"  {job_id} {comment} {state} {node} {cpus} {memory}")
            declared = submitted[job_id]
            assert comment.startswith(f"rule_{declared['rule']}_")
            assert (state, node in NODES) == ("COMPLETED", True), (job_id, state, node)
            assert (int(cpus), memory) == (declared["threads"], f"{declared['mem_mb']}M"), (job_id, declared)


class TestResumeAfterKill:
    TOTAL = 20

    def test_cancelled_train_job_continues_from_its_last_checkpoint(self, study):
        """A train job cancelled mid-training (scancel: SIGTERM to its steps, then SIGKILL, as at a time limit)
        leaves no process; `--rerun-incomplete` submits it again and it continues from its last checkpoint."""
        workdir = study.workdir
        (workdir / "longer.yaml").write_text(f"iterations: {{train: {self.TOTAL}}}\n")
        target = f"results/ci_tiny/train/{TASK_DIR}/ws1/manifest.json"
        run_root = workdir / target.replace("manifest.json", "run")
        command = snakemake(workdir, target, "--configfile", CONFIG, CI_OVERLAY, "longer.yaml")
        env = job_env(workdir)
        with open(workdir / "first_attempt.log", "w") as log:
            first = subprocess.Popen(command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180
            # rsl_rl's model_<i>.pt holds i + 1 iterations; this run's first periodic one, not the 4-iteration run's
            # model_2.pt: the job empties a run directory that another job's arguments left.
            while not list(run_root.rglob("model_4.pt")) and time.monotonic() < deadline:
                assert first.poll() is None, (workdir / "first_attempt.log").read_text()[-3000:]
                time.sleep(0.1)
            [job_id] = running_jobs("rule_train_")
            slurm("scancel", job_id)
            assert first.wait(timeout=120) != 0
        finally:
            if first.poll() is None:
                first.kill()
        assert job_state(job_id) == "CANCELLED"
        assert wait_for_no_process(job_id, within=60) == []
        checkpoints = {int(re.search(r"\d+", path.name).group()): path for path in run_root.rglob("model_*.pt")}
        last = max(checkpoints)
        assert last < self.TOTAL - 1, "the job finished before scancel"

        rerun = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr[-4000:]
        manifest = json.loads((workdir / target).read_text())
        assert manifest["status"] == "completed"
        assert workdir / manifest["resumed_from"] == checkpoints[last]
        assert (manifest["start_iteration"], manifest["iterations_completed"]) == (last + 1, self.TOTAL)


# --- 2-node jobs of the *_multinode rules ------------------------------------------------------------------------

MULTINODE_OVERLAY = "gpus_per_node: 1\nworld_sizes: [1, 2]\npeer_baseline: false\n"
TRAIN_WS2 = f"results/ci_tiny/train/{TASK_DIR}/ws2/manifest.json"


@pytest.fixture(scope="module")
def multinode_jobs(tmp_path_factory) -> dict[str, dict]:
    """The 2-node train and training-benchmark jobs of a 1-GPU-per-node study at world size 2, by rule."""
    jobs = dry_run_jobs(tmp_path_factory.mktemp("dry"), MULTINODE_OVERLAY, "--config", "device=cuda", "cluster=slurm")
    return {
        "train_multinode": next(job for job in jobs if job["rule"] == "train_multinode"),
        "benchmark_multinode": next(job for job in jobs if job["rule"] == "benchmark_multinode"),
    }


def launched_on_both_nodes(job_id: str) -> bool:
    """Both slurmd daemons launched the job's first step (the rule's srun: one launcher per node)."""
    return all(f"launch task StepId={job_id}.0 " in slurmd_log(node) for node in NODES)


class TestTwoNodeJobs:
    def test_training(self, multinode_jobs, tmp_path):
        """One launcher per node, ranks meet at the c10d rendezvous on n1, train, and end in sync."""
        job = multinode_jobs["train_multinode"]
        assert job["resources"]["nodes"] == 2 and "--nodes=2 " in job["shell"] and job_record(job).nodes == 2
        job_id = submit_on_cpu(job, tmp_path)
        assert wait_until_finished(job_id, timeout=240) == "COMPLETED", (tmp_path / f"slurm-{job_id}.log").read_text()
        assert squeue([job_id], "%N|%D") == [["n[1-2]", "2"]]
        assert launched_on_both_nodes(job_id)
        log = (tmp_path / f"logs/ci_tiny/train/{TASK_DIR}/ws2.log").read_text()
        launchers = [line for line in log.splitlines() if line.startswith("[study] running:")]
        endpoints = {re.search(r"--rdzv_endpoint (\S+)", line).group(1) for line in launchers}
        assert len(launchers) == 2 and len(endpoints) == 1 and endpoints.pop().startswith("n1:"), launchers
        manifest = json.loads((tmp_path / TRAIN_WS2).read_text())
        assert manifest["status"] == "completed"
        assert (manifest["world_size"], manifest["num_nodes"], manifest["local_world_size"]) == (2, 2, 1)
        digests = manifest["rank_param_digests"]
        assert len(digests) == 2 and len(set(digests)) == 1, digests

    def test_training_benchmark(self, multinode_jobs, tmp_path):
        """rlscale benchmark training_multigpu across n1 and n2: its bundle records 2 nodes of 1 rank."""
        job_id = submit_on_cpu(multinode_jobs["benchmark_multinode"], tmp_path)
        assert wait_until_finished(job_id, timeout=240) == "COMPLETED", (tmp_path / f"slurm-{job_id}.log").read_text()
        assert launched_on_both_nodes(job_id)
        bundle = json.loads(
            (tmp_path / f"results/ci_tiny/benchmark/training/{TASK_DIR}/ws2/envs32/seed1.json").read_text()
        )
        assert (bundle["extra"]["num_nodes"], bundle["extra"]["world_size"]) == (2, 2)


CANCELLED_RUN_ITERATIONS = 20


@pytest.fixture(scope="module")
def cancelled(multinode_jobs, tmp_path_factory) -> SimpleNamespace:
    """A 2-node train job cancelled once it has a checkpoint: its processes before and after scancel."""
    workdir = tmp_path_factory.mktemp("cancel")
    job = multinode_jobs["train_multinode"]
    job_id = submit_on_cpu(job, workdir, max_iterations=CANCELLED_RUN_ITERATIONS)
    deadline = time.monotonic() + 180
    while not list(workdir.rglob("model_2.pt")) and time.monotonic() < deadline:
        assert job_state(job_id) in UNFINISHED, (workdir / f"slurm-{job_id}.log").read_text()
        time.sleep(0.1)
    running = job_processes(job_id)
    slurm("scancel", job_id)
    cancelled_at = time.monotonic()
    left = wait_for_no_process(job_id, within=60)
    waited = time.monotonic() - cancelled_at
    print(f"\njob {job_id}: {len(running)} processes, {len(left)} left {waited:.1f} s after scancel")
    return SimpleNamespace(
        workdir=workdir,
        job=job,
        job_id=job_id,
        state=wait_until_finished(job_id, timeout=60),
        running=running,
        left=left,
    )


class TestCancelTwoNodeJob:
    def test_ranks_ran_on_both_nodes(self, cancelled):
        """Before scancel, each node had its launcher, torchrun and rank."""
        for node in NODES:
            commands = [command for where, command in cancelled.running if where == node]
            assert any("rlscale.study run" in command for command in commands), (node, commands)
            assert any("rlscale.launch.torchrun" in command for command in commands), (node, commands)
            assert any("launch/worker.py" in command for command in commands), (node, commands)

    def test_no_process_left(self, cancelled):
        """Within 60 s of scancel, no launcher, torchrun or rank of the job is left on either node."""
        assert (cancelled.state, cancelled.left) == ("CANCELLED", [])

    def test_resubmitted_job_resumes_on_both_nodes(self, cancelled):
        """The same job submitted again continues from the last checkpoint, every rank from the same one."""
        workdir = cancelled.workdir
        last = max(int(re.search(r"\d+", path.name).group()) for path in workdir.rglob("model_*.pt"))
        job_id = submit_on_cpu(cancelled.job, workdir, max_iterations=CANCELLED_RUN_ITERATIONS)
        assert wait_until_finished(job_id, timeout=240) == "COMPLETED", (workdir / f"slurm-{job_id}.log").read_text()
        manifest = json.loads((workdir / TRAIN_WS2).read_text())
        assert manifest["status"] == "completed"
        assert Path(manifest["resumed_from"]).name == f"model_{last}.pt"
        assert (manifest["start_iteration"], manifest["iterations_completed"]) == (last + 1, CANCELLED_RUN_ITERATIONS)
        assert len(set(manifest["rank_param_digests"])) == 1


ENDLESS = 100000
"""Iterations of a run that a time limit or a cancel stops first."""


@pytest.fixture(scope="module")
def timed_out(multinode_jobs, tmp_path_factory) -> SimpleNamespace:
    """A 2-node train job that would run for hours, submitted with a 1-minute time limit."""
    workdir = tmp_path_factory.mktemp("time_limit")
    job = {**multinode_jobs["train_multinode"]}
    # Without the profile's warning signal (USR1 300 s before the limit), which would stop and requeue it at once.
    job["resources"] = {**job["resources"], "runtime": 1, "slurm_extra": ""}
    job_id = submit_on_cpu(job, workdir, max_iterations=ENDLESS)
    # slurmctld checks time limits every 30 s; then SIGTERM, and SIGKILL KillWait (10 s) later.
    state = wait_until_finished(job_id, timeout=180)
    return SimpleNamespace(workdir=workdir, job_id=job_id, state=state, left=wait_for_no_process(job_id, within=60))


class TestTimeLimit:
    def test_job_times_out_and_leaves_no_process(self, timed_out):
        """SLURM's time limit ends the job (TIMEOUT), and with it every launcher, torchrun and rank on both nodes."""
        assert (timed_out.state, timed_out.left) == ("TIMEOUT", [])

    def test_resubmitted_job_continues_from_the_last_checkpoint(self, timed_out, multinode_jobs):
        """The same job submitted again (what Snakemake's rerun does) continues from the last checkpoint."""
        workdir = timed_out.workdir
        last = max(int(re.search(r"\d+", path.name).group()) for path in workdir.rglob("model_*.pt"))
        job_id = submit_on_cpu(multinode_jobs["train_multinode"], workdir, max_iterations=ENDLESS)
        log = workdir / f"logs/ci_tiny/train/{TASK_DIR}/ws2.log"
        expected = f"--resume auto: continuing from model_{last}.pt ({last + 1}/100000)"
        deadline = time.monotonic() + 120
        try:
            while expected not in log.read_text() and time.monotonic() < deadline:
                assert job_state(job_id) in UNFINISHED, log.read_text()[-3000:]
                time.sleep(0.5)
            assert expected in log.read_text()
        finally:
            slurm("scancel", job_id)
            assert wait_for_no_process(job_id, within=60) == []


class TestRequeue:
    def test_warning_signal_requeues_the_job_which_continues(self, multinode_jobs, tmp_path):
        """SLURM's warning signal (what ``sbatch --signal=USR1@T`` sends before the time limit) reaches a 2-node train
        job: every rank stops at the next iteration boundary with a checkpoint, the job requeues itself, and the
        requeued job continues from that checkpoint, its manifest keeping the first segment and saying why the
        second began."""
        job_id = submit_on_cpu(multinode_jobs["train_multinode"], tmp_path, max_iterations=ENDLESS)
        deadline = time.monotonic() + 180
        while not (found := list(tmp_path.rglob("model_2.pt"))) and time.monotonic() < deadline:
            assert job_state(job_id) in UNFINISHED, (tmp_path / f"slurm-{job_id}.log").read_text()
            time.sleep(0.1)
        run_dir = found[0].parent
        slurm("scancel", "--signal=USR1", job_id)
        try:
            deadline = time.monotonic() + 240
            segments = []
            while time.monotonic() < deadline:
                with contextlib.suppress(OSError, ValueError):  # rewritten meanwhile
                    segments = json.loads((run_dir / "manifest.json").read_text())["segments"]
                if len(segments) == 2 and segments[1]["first_iteration"] > 0:
                    break
                time.sleep(0.5)
            first, requeued = segments
            assert (first["began"], first["status"], requeued["began"]) == ("start", "interrupted", "requeue")
            assert requeued["first_iteration"] == first["last_iteration"] + 1  # the boundary's checkpoint: none lost
            assert (run_dir / f"model_{first['last_iteration']}.pt").is_file()
        finally:
            slurm("scancel", job_id)
            assert wait_for_no_process(job_id, within=60) == []


# --- GPU requests ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_jobs(tmp_path_factory) -> dict[str, dict]:
    """The world-size 2 (one node) and 4 (2 nodes x 2 GPUs) train jobs of a GPU study, by rule."""
    overlay = "gpus_per_node: 2\nworld_sizes: [1, 2, 4]\n"
    # Cores per GPU that fit the local nodes (2 CPUs each); the profile's 8 are a real GPU node's.
    extra = ["--config", "device=cuda", "cluster=slurm", "--set-resources", "train:cpus_per_gpu=1"]
    jobs = dry_run_jobs(tmp_path_factory.mktemp("gpu"), overlay, *extra)
    return {
        "train": next(job for job in jobs if job["rule"] == "train" and job_record(job).world_size == 2),
        "train_multinode": next(job for job in jobs if job["rule"] == "train_multinode"),
    }


class TestGpuRequests:
    def test_single_node_job_gets_its_gpus_on_one_node(self, gpu_jobs, tmp_path):
        """gpu=2 becomes --gpus=2 (a job total), no --ntasks-per-gpu; SLURM gives the job both GPUs of one node."""
        sbatch = plugin_sbatch(gpu_jobs["train"], tmp_path)
        assert "--gpus=2" in sbatch and "--cpus-per-gpu=1" in sbatch
        assert "--nodes" not in sbatch and "--ntasks-per-gpu" not in sbatch
        job_id = submit(sbatch, 'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"', tmp_path)
        assert wait_until_finished(job_id, timeout=60) == "COMPLETED"
        assert (tmp_path / f"slurm-{job_id}.log").read_text().split() in (["n1", "0,1"], ["n2", "0,1"])

    def test_two_node_job_gets_its_gpus_on_each_node(self, gpu_jobs, tmp_path):
        """gres=gpu:2 with nodes=2 becomes --nodes=2 --ntasks=2 --gres=gpu:2 (per node), never --gpus or
        --ntasks-per-gpu; the rule's srun gives each node's launcher that node's 2 GPUs."""
        job = gpu_jobs["train_multinode"]
        sbatch = plugin_sbatch(job, tmp_path)
        assert "--nodes=2" in sbatch and "--ntasks=2" in sbatch and "--gres=gpu:2" in sbatch
        assert "--gpus=" not in sbatch and "--ntasks-per-gpu" not in sbatch
        rule_srun = re.match(r"srun(?: --\S+)+", job["shell"]).group(0)  # the rule's srun and its options
        report = f"{rule_srun} bash -c 'echo $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES'"
        job_id = submit(sbatch, JOBSTEP_ENVIRONMENT + report, tmp_path)
        assert wait_until_finished(job_id, timeout=60) == "COMPLETED"
        lines = sorted((tmp_path / f"slurm-{job_id}.log").read_text().splitlines())
        assert lines == ["n1 0,1", "n2 0,1"]
