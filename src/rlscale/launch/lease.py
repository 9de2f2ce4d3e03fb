"""Host-wide leases of GPU ids, so that concurrent Snakemake jobs never share one, and of the host itself, so that a
job measuring speed never runs beside another job.

Snakemake's ``resources: gpu=N`` is only a counter: it never says *which* GPUs a job may use, and jobs inherit the
caller's ``CUDA_VISIBLE_DEVICES`` unchanged. Before a job starts torchrun, its launcher therefore takes N ids from a
pool of lock files, one per visible GPU id. Locks are ``fcntl.flock`` locks on open files, so the kernel frees them
when the last process holding the file closes it, even after SIGKILL. No port is leased: a single-node job passes none
and torchrun's rendezvous takes a free one from the kernel, which no other program on the host can hold.

The directory is ``$RLSCALE_LEASE_DIR`` (default :data:`DEFAULT_LEASE_DIR`), shared by every user of the host: the
files are opened read-only (``flock`` needs no write access) and the directory is world-writable and sticky like
``/tmp``. The pool is ``$RLSCALE_LEASE_GPUS`` (a comma-separated list of fake ids, for tests), else the entries of
``CUDA_VISIBLE_DEVICES``, else NVML's device indices.

A GPU id is leased alone (an exclusive lock: a job that times its run) or shared (a shared lock: jobs that time
nothing, which may run together on one GPU while no job holds it alone). At most ``$RLSCALE_LEASE_SHARED_JOBS``
(default :data:`DEFAULT_SHARED_JOBS`) shared holders use one GPU at once, each holding one of its share slots, so that
a study with many ready jobs does not fill a small GPU's memory.

The host lease (:func:`acquire_host`) is a reader-writer lock on one file: every job that computes shares it, and a
job that measures speed holds it alone. A job takes it **before** its GPUs, everywhere, so no two jobs can
each hold one while waiting for the other. Shared holders pass a gate first that an exclusive waiter closes, so a
stream of overlapping shared jobs cannot starve a speed measurement.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from rlscale.dist import env_seconds
from rlscale.launch.gpus import nvml_device_count
from rlscale.paths import unwritable_reason

LEASE_DIR_ENV = "RLSCALE_LEASE_DIR"
"""Directory of the lock files; every job of a host must use the same one."""
LEASE_GPUS_ENV = "RLSCALE_LEASE_GPUS"
"""Comma-separated GPU ids that replace the visible GPUs as the pool (tests use fake ids)."""
LEASE_SHARED_JOBS_ENV = "RLSCALE_LEASE_SHARED_JOBS"
"""Most jobs that share one GPU at once."""
LEASE_TIMEOUT_ENV = "RLSCALE_LEASE_TIMEOUT_S"
"""Seconds to wait for a lease before failing; unset waits as long as it takes."""

DEFAULT_SHARED_JOBS = 4
"""The default study starts four 16 384-env Go1 jobs at once on one GPU; with the rest they used at most 7.8 GB of an
H200 (results/h200/default_study/)."""
DEFAULT_LEASE_DIR = "/tmp/rlscale-lease"
"""Host-wide: one directory for all users, so that two users' jobs cannot share a GPU either."""
POLL_INTERVAL_S = 0.2
"""Pause between attempts while the GPUs a job needs are leased."""
WAIT_REPORT_S = 30.0
"""How often a waiting job says what it waits for."""
HOST_LOCK = "host.lock"
"""Shared by every computing job of the host, held alone by a speed measurement."""
HOST_GATE = "host-gate.lock"
"""Held exclusively by a job waiting to hold the host alone, so that no new shared holder gets past it meanwhile."""


class LeaseError(RuntimeError):
    """A lease that can never be granted (the pool is too small) or was not granted in time."""


def gpu_pool(environ: Mapping[str, str], nvml_count: Callable[[], int] = nvml_device_count) -> tuple[list[str], str]:
    """Return the GPU ids a job may lease on this host and where they came from."""
    for name in (LEASE_GPUS_ENV, "CUDA_VISIBLE_DEVICES"):
        raw = environ.get(name)
        if raw is not None:
            return [entry.strip() for entry in raw.split(",") if entry.strip()], f"{name}={raw!r}"
    try:
        return [str(index) for index in range(nvml_count())], "NVML"
    except Exception as exc:  # No driver or no library both mean no GPU to lease.
        return [], f"NVML unavailable: {exc or type(exc).__name__}"


def lease_timeout(environ: Mapping[str, str]) -> float | None:
    """``$RLSCALE_LEASE_TIMEOUT_S`` in seconds, None when unset (wait as long as it takes).

    Raises:
        LeaseError: for a value that is not a number of seconds > 0.
    """
    try:
        return env_seconds(environ, LEASE_TIMEOUT_ENV, allow_zero=False, when_unset="to wait as long as it takes")
    except ValueError as error:
        raise LeaseError(str(error)) from None


def shared_jobs(environ: Mapping[str, str]) -> int:
    """``$RLSCALE_LEASE_SHARED_JOBS``: the most jobs sharing one GPU at once (:data:`DEFAULT_SHARED_JOBS` if unset).

    Raises:
        LeaseError: for a value that is not a whole number >= 1.
    """
    raw = environ.get(LEASE_SHARED_JOBS_ENV)
    if not raw:
        return DEFAULT_SHARED_JOBS
    if not raw.strip().isdigit() or int(raw) < 1:
        raise LeaseError(
            f"{LEASE_SHARED_JOBS_ENV}={raw!r} must be a whole number >= 1; unset it for {DEFAULT_SHARED_JOBS}"
        )
    return int(raw)


def check_lease_environment(environ: Mapping[str, str]) -> None:
    """Refuse, before a study starts, the ``RLSCALE_LEASE_*`` values its jobs would fail on.

    Raises:
        LeaseError: naming the variable, its value and the fix.
    """
    lease_timeout(environ)
    shared_jobs(environ)
    folder = environ.get(LEASE_DIR_ENV)
    unwritable = folder and unwritable_reason(Path(folder))
    if unwritable:
        raise LeaseError(f"{LEASE_DIR_ENV}={folder!r}: {unwritable}; name a directory every job of the host can write")


def _lease_dir(environ: Mapping[str, str]) -> Path:
    """Create the lock directory world-writable and sticky, so every user of the host shares it."""
    path = Path(environ.get(LEASE_DIR_ENV) or DEFAULT_LEASE_DIR)
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(PermissionError):  # Another user created it first.
            path.chmod(0o1777)
    return path


def _try_lock(path: Path, shared: bool = False) -> int | None:
    """Return an fd holding a shared or exclusive flock on ``path``, or ``None`` if another process's lock stops it."""
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


class HeldLocks:
    """Lock fds held by this process (``self.fds``), closed on release or when the ``with`` block ends."""

    fds: list[int]

    def release(self) -> None:
        """Close this process's lock fds (the kernel would do it at exit anyway)."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


@dataclass
class Lease(HeldLocks):
    """GPU ids held by this process (and by children it passes :attr:`fds` to) until released."""

    gpu_ids: tuple[str, ...]
    """Leased GPU ids, in pool order; empty for CPU ranks."""
    shared: bool = False
    """Whether other jobs that time nothing may hold the same ids meanwhile."""
    waited_s: float = 0.0
    """How long the job waited for the ids."""
    fds: list[int] = field(default_factory=list, repr=False)
    """Open lock files; each lock lasts while any process holds its fd."""

    def environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """Return ``environ`` with ``CUDA_VISIBLE_DEVICES`` set to the leased ids (untouched for a CPU lease)."""
        env = dict(environ)
        if self.gpu_ids:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpu_ids)
        return env


def _lock_gpu(directory: Path, name: str, shared_slots: int) -> list[int] | None:
    """Lock GPU ``name``: alone (``shared_slots`` 0), or shared plus one of its ``shared_slots`` free share slots.

    Returns:
        The held fds, or ``None`` (nothing held) if the GPU is held alone or all its share slots are taken.
    """
    fd = _try_lock(directory / f"gpu-{name}.lock", shared=bool(shared_slots))
    if fd is None or not shared_slots:
        return None if fd is None else [fd]
    for slot in range(shared_slots):
        slot_fd = _try_lock(directory / f"gpu-{name}-share{slot}.lock")
        if slot_fd is not None:
            return [fd, slot_fd]
    os.close(fd)
    return None


def _grab(directory: Path, names: list[str], count: int, shared_slots: int) -> list[tuple[str, list[int]]]:
    """Lock ``count`` of the GPUs ``names`` (see :func:`_lock_gpu`), or none of them: all-or-nothing."""
    held: list[tuple[str, list[int]]] = []
    for name in names:
        if len(held) == count:
            break
        fds = _lock_gpu(directory, name, shared_slots)
        if fds is not None:
            held.append((name, fds))
    if len(held) < count:
        for _, fds in held:
            for fd in fds:
                os.close(fd)
        return []
    return held


def acquire(
    num_gpus: int,
    *,
    shared: bool = False,
    environ: Mapping[str, str] | None = None,
    nvml_count: Callable[[], int] = nvml_device_count,
    timeout_s: float | None = None,
    log: TextIO = sys.stderr,
) -> Lease:
    """Lease ``num_gpus`` GPU ids from the host pool; wait while too few are free.

    The GPUs are taken together under a pool-wide lock, so two jobs never each hold half of what both need (which
    would make both wait forever). A shared lease takes ids that no job holds alone and that fewer than
    ``$RLSCALE_LEASE_SHARED_JOBS`` other shared holders use.

    Args:
        num_gpus: GPU ids to lease; 0 for CPU ranks, which lease none.
        shared: Share the ids with other shared leases (jobs that time nothing); else hold them alone.
        environ: Environment giving the pool and settings; defaults to ``os.environ``.
        nvml_count: GPU counter used when neither ``$RLSCALE_LEASE_GPUS`` nor ``CUDA_VISIBLE_DEVICES`` is set.
        timeout_s: Give up after this long; defaults to ``$RLSCALE_LEASE_TIMEOUT_S``, else waits indefinitely.
        log: Where the waiting job reports what it waits for.

    Returns:
        The lease; release it (or use it as a context manager) when the job ends.

    Raises:
        LeaseError: If the pool has fewer than ``num_gpus`` ids, the lease was not granted within the timeout, or a
            setting is malformed.
    """
    environ = os.environ if environ is None else environ
    shared_slots = shared_jobs(environ) if shared else 0
    pool, source = gpu_pool(environ, nvml_count) if num_gpus else ([], "")
    if num_gpus > len(pool):
        raise LeaseError(
            f"this job needs {num_gpus} GPU(s) but the host's pool has {len(pool)} ({source or 'no GPU'}); "
            "lower the world size or expose more GPUs via CUDA_VISIBLE_DEVICES."
        )
    if timeout_s is None:
        timeout_s = lease_timeout(environ)
    directory = _lease_dir(environ)
    started = last_report = time.monotonic()
    while True:
        pool_fd = os.open(directory / "pool.lock", os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(pool_fd, fcntl.LOCK_EX)  # Held only while trying locks, never while waiting.
            gpus = _grab(directory, pool, num_gpus, shared_slots)
            if gpus or not num_gpus:
                return Lease(
                    gpu_ids=tuple(name for name, _ in gpus),
                    shared=shared,
                    waited_s=time.monotonic() - started,
                    fds=[fd for _, fds in gpus for fd in fds],
                )
        finally:
            os.close(pool_fd)
        now = time.monotonic()
        if timeout_s is not None and now - started > timeout_s:
            raise LeaseError(f"no lease of {num_gpus} GPU(s) within {timeout_s:g} s (lock dir {directory}).")
        if now - last_report > WAIT_REPORT_S:
            how = "shared" if shared else "alone"
            print(f"[lease] waiting {now - started:.0f} s for {num_gpus} GPU(s) of {pool} ({how})", file=log)
            last_report = now
        time.sleep(POLL_INTERVAL_S)


@dataclass
class HostLease(HeldLocks):
    """The host lock held shared or alone by this process (and by children it passes :attr:`fds` to)."""

    exclusive: bool
    """Whether this job holds the host alone."""
    waited_s: float
    """How long the job waited for it."""
    fds: list[int] = field(default_factory=list, repr=False)
    """The open host lock file; the lock lasts while any process holds it."""


def _lock_polling(fd: int, operation: int, deadline: float | None, waiting: Callable[[], None]) -> bool:
    """Take ``flock(fd, operation)``, polling so that a deadline can end the wait; call ``waiting`` while blocked.

    Returns:
        Whether the lock is held (False: the deadline passed).
    """
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if deadline is not None and time.monotonic() > deadline:
                return False
            waiting()
            time.sleep(POLL_INTERVAL_S)


def acquire_host(
    exclusive: bool,
    *,
    environ: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    log: TextIO = sys.stderr,
    label: str = "this job",
) -> HostLease:
    """Hold the host shared (a job that computes) or alone (a job that measures speed); wait while it cannot.

    Take it before :func:`acquire` and release it after, in every caller: the fixed order keeps the two leases from
    deadlocking. A job that had to wait says so when it starts waiting and how long it waited once it holds the host.

    Args:
        exclusive: Hold the host alone: no other job of the host runs meanwhile, and none starts.
        environ: Environment giving the lock directory and the timeout; defaults to ``os.environ``.
        timeout_s: Give up after this long; defaults to ``$RLSCALE_LEASE_TIMEOUT_S``, else waits indefinitely.
        log: Where the waiting job reports.
        label: The job's name, for the report.

    Raises:
        LeaseError: If the host was not granted within the timeout.
    """
    environ = os.environ if environ is None else environ
    if timeout_s is None:
        timeout_s = lease_timeout(environ)
    directory = _lease_dir(environ)
    mode, how = (fcntl.LOCK_EX, "alone") if exclusive else (fcntl.LOCK_SH, "shared")
    started = time.monotonic()
    deadline = None if timeout_s is None else started + timeout_s
    reported: list[bool] = []

    def waiting() -> None:
        if not reported:
            holders = "another job" if exclusive else "a speed measurement"
            print(f"[lease] {label} waits for the host ({how}) while {holders} holds it", file=log, flush=True)
            reported.append(True)

    gate = os.open(directory / HOST_GATE, os.O_RDONLY | os.O_CREAT, 0o644)
    host = os.open(directory / HOST_LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        held = _lock_polling(gate, mode, deadline, waiting) and _lock_polling(host, mode, deadline, waiting)
    except BaseException:
        os.close(host)
        raise
    finally:
        os.close(gate)  # Only the host lock is kept: the gate matters only while waiting.
    waited_s = time.monotonic() - started
    if not held:
        os.close(host)
        raise LeaseError(f"the host ({how}) was not granted within {timeout_s:g} s (lock dir {directory}).")
    if reported:
        print(f"[lease] {label} holds the host ({how}) after waiting {waited_s:.1f} s", file=log, flush=True)
    return HostLease(exclusive=exclusive, waited_s=waited_s, fds=[host])
