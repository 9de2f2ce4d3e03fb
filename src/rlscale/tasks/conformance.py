"""``rlscale check_task``: does a task keep the :class:`~rlscale.tasks.base.VecTask` contract?

The task is stepped with random actions in [-1, 1] (from a seeded generator, so every build sees the same ones) and
checked for:

* the shapes, dtypes and devices of everything it returns;
* auto-reset (a finished env's ``episode_length_buf`` restarts at 0, a running one's advances by 1, and
  ``extras["episode_length"]`` is the finished episode's length) and ``terminated``/``truncated`` never both set;
* ``max_episode_length``: no episode runs longer; ``extras["log"]`` has the same keys on every step;
* determinism: two builds with one seed step alike, a build with another seed differs (with XLA's deterministic GPU
  kernels, see :func:`use_deterministic_kernels`);
* no host synchronisation inside ``step``: on every device no call that reads device data back (``.item()``,
  ``.cpu()``, ``.numpy()``, ``.tolist()``, masked indexing and writes, ``if tensor:``...;
  :mod:`rlscale.tasks.host_reads`), and on CUDA ``torch.cuda.set_sync_debug_mode("error")`` as well;
* ``graph_capturable`` (on CUDA, when claimed): a captured, replayed step gives the eager trajectory;
* the footprint the task states (:mod:`rlscale.tasks.footprint`): its observation and action sizes are the task's;

and its step throughput is measured at the given size. Each violation is one line, reported once (at its first step).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from rlscale.tasks.base import VecTask
from rlscale.tasks.graph import GraphedTask, graphed_if_possible
from rlscale.tasks.host_reads import HostReads
from rlscale.tasks.plugins import one_line
from rlscale.tasks.registry import get_spec, make_task

DETERMINISM_STEPS = 32
"""Steps compared between builds (and between the eager and the replayed step)."""
SYNC_CHECK_STEPS = 3
THROUGHPUT_STEPS = 50
ACTION_SEED = 1234


@dataclass
class Report:
    """What :func:`check_task` found."""

    task_id: str
    device: str
    num_envs: int
    violations: list[str] = field(default_factory=list)
    throughput: float | None = None
    """Env steps per second (``num_envs`` x steps per second); None if stepping failed."""
    stepping: str = "eager"
    """How the throughput was measured: ``eager`` or ``cuda_graph``."""
    unchecked: list[str] = field(default_factory=list)
    """Checks left out, each with why."""

    @property
    def conforms(self) -> bool:
        return not self.violations

    def fail(self, check: str, detail: str) -> None:
        line = f"{check}: {detail}"
        if line not in self.violations:
            self.violations.append(line)

    def lines(self) -> list[str]:
        lines = [f"check_task {self.task_id} on {self.device}, {self.num_envs} envs"]
        lines += [f"VIOLATION {violation}" for violation in self.violations]
        lines += [f"not checked: {line}" for line in self.unchecked]
        if self.throughput is not None:
            lines.append(f"throughput: {self.throughput:,.0f} env steps/s ({self.stepping})")
        lines.append("conforms" if self.conforms else f"{len(self.violations)} violation(s)")
        return lines


Record = list[tuple[dict[str, torch.Tensor], ...]]


def use_deterministic_kernels() -> None:
    """Ask XLA for deterministic GPU kernels, unless ``XLA_FLAGS`` already decides.

    Its scatters and reductions are not run-to-run deterministic: on an H200 two Rlscale-Ant builds with one seed
    drifted apart by 2e-5 after one step, which would hide whether the task's own seeding reproduces a trajectory.
    Training keeps XLA's faster default (``docs/tasks.md``). JAX reads the flag when its GPU backend starts, so this
    must run before a JAX task is built in this process.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if "--xla_gpu_deterministic_ops" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_gpu_deterministic_ops=true".strip()


def check_task(task_id: str, device: str = "cpu", num_envs: int = 16, seed: int = 0) -> Report:
    """Check a registered task against the contract; see the module docstring for what is checked."""
    use_deterministic_kernels()
    expected = torch.device(device)
    if expected.type == "cuda" and expected.index is None:
        expected = torch.device("cuda", torch.cuda.current_device())
    report = Report(task_id, str(expected), num_envs)

    def build(build_seed: int) -> VecTask:
        return make_task(task_id, num_envs=num_envs, device=str(expected), seed=build_seed)

    try:
        task = build(seed)
    except Exception as error:
        report.fail("build", one_line(error))
        return report
    _check_footprint(report, task_id, task)
    actions = _actions(task, expected, max(task.max_episode_length + 1, DETERMINISM_STEPS))
    record = _guarded(report, "step", lambda: _ContractCheck(report, task, expected).run(actions))
    if record is None:
        task.close()
        return report
    _guarded(report, "host sync", lambda: _check_host_sync(report, task, actions))
    timed, graphed = task, None
    repeatable = task.bitwise_repeatable
    if not repeatable:
        why = f"the task is not bitwise repeatable on {expected.type}"
        report.unchecked.append(
            f"that a second build with seed {seed} and the replayed step follow the trajectory ({why})"
        )
    if expected.type == "cuda" and task.graph_capturable:
        graphed = _guarded(report, "graph_capturable", lambda: GraphedTask(build(seed)))
        replay = "the replayed step"
        if graphed is not None and (
            _same(report, "graph_capturable", replay, graphed, actions, record, expect_same=repeatable)
            or not repeatable
        ):
            if graphed.captured:
                timed = graphed
            else:
                report.fail("graph_capturable", "the task claims it, but capturing its step failed (see stderr)")
    _guarded(report, "throughput", lambda: _measure(report, timed, actions))
    for built in filter(None, (task, graphed)):
        built.close()
    again = _guarded(report, "determinism", lambda: build(seed)) if repeatable else None
    if again is not None:
        _same(report, "determinism", f"a second build with seed {seed}", again, actions, record)
        again.close()
    other = _guarded(report, "determinism", lambda: build(seed + 1))
    if other is not None:
        if _same(report, "determinism", f"a build with seed {seed + 1}", other, actions, record, expect_same=False):
            report.fail("determinism", f"seeds {seed} and {seed + 1} gave the same trajectory")
        other.close()
    return report


class _ContractCheck:
    """Steps one build through more than an episode, checking every output against the contract."""

    def __init__(self, report: Report, task: VecTask, device: torch.device) -> None:
        self.report, self.task, self.device, self.n = report, task, device, report.num_envs
        self.log_keys: set[str] | None = None
        self.reported: set[str] = set()

    def run(self, actions: list[torch.Tensor]) -> Record:
        """Reset, then step every action; returns the first :data:`DETERMINISM_STEPS` outputs for comparisons.

        Those steps are eager. A task that can be captured on CUDA steps the rest of the episode as a replayed graph:
        stepped eagerly, a robot's 1000-step episode waits on the host launching its kernels one by one, and the replay
        is compared with the eager steps below.
        """
        task, fail = self.task, self.report.fail
        self._check_attributes()
        observations, extras = task.reset()
        self._check_observations("reset", observations)
        self._check_type("reset", "extras", extras, dict)
        self._check_observations("get_observations", task.get_observations())
        length = task.episode_length_buf
        self._check_tensor("episode_length_buf", length, (self.n,), torch.long)
        if bool((length != 0).any()):
            fail("reset", "episode_length_buf is not 0 after reset()")
        record: Record = [(_clone(observations),)]
        steps_taken = torch.zeros(self.n, dtype=torch.long, device=self.device)
        stepping = task
        for step, action in enumerate(actions):
            if step == DETERMINISM_STEPS:
                stepping = graphed_if_possible(task)
            before = task.episode_length_buf.clone()
            outputs = stepping.step(action)
            if not (isinstance(outputs, tuple) and len(outputs) == 5):
                fail("step", "does not return (observations, reward, terminated, truncated, extras)")
                return record
            if not self._check_step(step, outputs):
                return record  # without usable done flags, nothing later can be checked
            observations, reward, terminated, truncated, extras = outputs
            done = terminated | truncated
            steps_taken += 1
            self._check_episodes(step, before, done, steps_taken, extras)
            steps_taken.masked_fill_(done, 0)
            if step < DETERMINISM_STEPS:
                record.append((_clone(observations), _step_record(reward, terminated, truncated)))
        return record

    def _check_attributes(self) -> None:
        task, fail = self.task, self.report.fail
        if task.num_envs != self.n:
            fail("attributes", f"num_envs is {task.num_envs}, but {self.n} were asked for")
        if torch.device(task.device) != self.device:
            fail("attributes", f"device is {task.device}, but {self.device} was asked for")
        for name in ("num_actions", "max_episode_length"):
            value = getattr(task, name, None)
            if not isinstance(value, int) or value < 1:
                fail("attributes", f"{name} is {value!r}, not a positive int")
        dims = getattr(task, "observation_dims", None)
        if not isinstance(dims, dict) or "policy" not in dims:
            fail("attributes", f"observation_dims is {dims!r}, not a dict with a 'policy' group")
        if not isinstance(getattr(task, "step_dt", None), float) or task.step_dt <= 0:
            fail("attributes", f"step_dt is {getattr(task, 'step_dt', None)!r}, not a positive float")

    def _check_step(self, step: int, outputs: tuple) -> bool:
        """Check one step's outputs; False when ``terminated`` or ``truncated`` is not usable."""
        observations, reward, terminated, truncated, extras = outputs
        self._check_observations("step", observations)
        self._check_tensor("step reward", reward, (self.n,), torch.float32)
        flags = [
            self._check_tensor(f"step {name}", value, (self.n,), torch.bool)
            for name, value in (("terminated", terminated), ("truncated", truncated))
        ]
        if not all(flags):
            return False
        if bool((terminated & truncated).any()):
            self._fail_once("step", f"terminated and truncated are both set for one env (first at step {step})")
        if not bool(torch.isfinite(reward).all()):
            self._fail_once("step", f"reward is not finite (first at step {step})")
        if not self._check_type("step", "extras", extras, dict):
            return True
        for name, dtype in (("episode_return", torch.float32), ("episode_length", torch.long)):
            self._check_tensor(f"extras[{name!r}]", extras.get(name), (self.n,), dtype)
        log = extras.get("log")
        if not self._check_type("extras", "extras['log']", log, dict):
            return True
        for key, value in log.items():
            self._check_tensor(f"extras['log'][{key!r}]", value, (), None)
        if self.log_keys is None:
            self.log_keys = set(log)
        elif set(log) != self.log_keys:
            missing, new = sorted(self.log_keys - set(log)), sorted(set(log) - self.log_keys)
            self.report.fail("extras", f"extras['log'] keys change between steps (missing {missing}, new {new})")
        return True

    def _check_episodes(self, step: int, before, done, steps_taken, extras: dict) -> None:
        fail, task = self.report.fail, self.task
        longest = int(steps_taken.max())
        if longest > task.max_episode_length:
            fail(
                "max_episode_length", f"an episode ran {longest} steps; max_episode_length is {task.max_episode_length}"
            )
        expected = torch.where(done, 0, before + 1)
        if not torch.equal(task.episode_length_buf, expected):
            fail("auto-reset", "episode_length_buf is not 0 for the finished envs and +1 for the others after step")
        length = extras.get("episode_length") if isinstance(extras, dict) else None
        comparable = isinstance(length, torch.Tensor) and length.shape == done.shape  # else _check_step reports it
        if comparable and not torch.equal(length[done].long(), steps_taken[done]):
            self._fail_once("auto-reset", f"extras['episode_length'] of a finished env is not its steps (step {step})")

    def _fail_once(self, check: str, detail: str) -> None:
        """Report a breach whose line names its step at the first step only."""
        kind = f"{check}: {detail.partition('(')[0]}"
        if kind not in self.reported:
            self.reported.add(kind)
            self.report.fail(check, detail)

    def _check_observations(self, where: str, observations) -> None:
        if not self._check_type(where, "observations", observations, dict):
            return
        dims = getattr(self.task, "observation_dims", {})
        if set(observations) != set(dims):
            self.report.fail(where, f"observation groups {sorted(observations)} are not {sorted(dims)}")
        for group, value in observations.items():
            if group in dims:
                self._check_tensor(f"{where} observations[{group!r}]", value, (self.n, dims[group]), torch.float32)

    def _check_type(self, where: str, name: str, value, kind: type) -> bool:
        if not isinstance(value, kind):
            self.report.fail(where, f"{name} is {type(value).__name__}, not {kind.__name__}")
        return isinstance(value, kind)

    def _check_tensor(self, name: str, value, shape: tuple, dtype: torch.dtype | None) -> bool:
        """Whether ``value`` is a tensor of that shape, dtype (any if None) and the task's device; else report it."""
        if not isinstance(value, torch.Tensor):
            self.report.fail(name, f"is {type(value).__name__}, not a tensor")
            return False
        problems = []
        if tuple(value.shape) != shape:
            problems.append(f"has shape {tuple(value.shape)}, expected {shape}")
        if dtype is not None and value.dtype != dtype:
            problems.append(f"has dtype {value.dtype}, expected {dtype}")
        if value.device != self.device:
            problems.append(f"is on {value.device}, expected {self.device}")
        for problem in problems:
            self.report.fail(name, problem)
        return not problems


def _check_footprint(report: Report, task_id: str, task: VecTask) -> None:
    """The sizes the task states before it is built (a run's memory is estimated from them) against the built ones."""
    stated = get_spec(task_id).footprint_of(task.cfg)
    if stated is None:
        return
    built = (sum(task.observation_dims.values()), task.num_actions)
    if (stated.observations, stated.actions) != built:
        report.fail(
            "footprint",
            f"it states {stated.observations} observation and {stated.actions} action values per env, but the task "
            f"has {built[0]} and {built[1]}",
        )


def _actions(task: VecTask, device: torch.device, steps: int) -> list[torch.Tensor]:
    generator = torch.Generator(device=device).manual_seed(ACTION_SEED)
    shape = (task.num_envs, task.num_actions)
    return [torch.rand(shape, generator=generator, device=device) * 2 - 1 for _ in range(steps)]


def _check_host_sync(report: Report, task: VecTask, actions: list[torch.Tensor]) -> None:
    reads = HostReads()
    with reads.watch():
        for action in actions[:SYNC_CHECK_STEPS]:
            task.step(action)
    for read in reads.found():
        report.fail("host sync", f"step calls {read}, which waits for the device")
    if task.device.type != "cuda":
        return
    torch.cuda.synchronize(task.device)
    torch.cuda.set_sync_debug_mode("error")
    try:
        for action in actions[:SYNC_CHECK_STEPS]:
            task.step(action)
    except RuntimeError as error:
        report.fail("host sync", f"step synchronises with the host on CUDA ({one_line(error)})")
    finally:
        torch.cuda.set_sync_debug_mode("default")


def _same(
    report: Report, check: str, what: str, task: VecTask, actions, record: Record, expect_same: bool = True
) -> bool:
    """Whether ``task`` steps like the recorded build; if not and ``expect_same``, where ``what`` first differs.

    Returns:
        False also when stepping raised (reported as a violation of ``check``).
    """
    try:
        trajectory: Record = [(_clone(task.reset()[0]),)]
        for action in actions[: len(record) - 1]:
            observations, reward, terminated, truncated, _ = task.step(action)
            trajectory.append((_clone(observations), _step_record(reward, terminated, truncated)))
    except Exception as error:
        report.fail(check, f"stepping {what} raised {one_line(error)}")
        return False
    for step, (mine, recorded) in enumerate(zip(trajectory, record, strict=True)):
        for part, theirs in zip(mine, recorded, strict=True):
            for name, value in part.items():
                if not torch.allclose(value.double(), theirs[name].double(), rtol=1e-5, atol=1e-6):
                    if expect_same:
                        report.fail(check, f"{what} differs in {name} at step {step}")
                    return False
    return True


def _measure(report: Report, task: VecTask, actions: list[torch.Tensor]) -> None:
    """Env steps per second over :data:`THROUGHPUT_STEPS` steps, after a warm-up."""
    synchronize: Callable[[], None] = (
        (lambda: torch.cuda.synchronize(task.device)) if task.device.type == "cuda" else (lambda: None)
    )
    for action in actions[:3]:
        task.step(action)
    synchronize()
    started = time.perf_counter()
    for step in range(THROUGHPUT_STEPS):
        task.step(actions[step % len(actions)])
    synchronize()
    report.throughput = task.num_envs * THROUGHPUT_STEPS / (time.perf_counter() - started)
    report.stepping = "cuda_graph" if isinstance(task, GraphedTask) and task.captured else "eager"


def _guarded(report: Report, check: str, action: Callable):
    """``action()``, or None after reporting what it raised as a violation of ``check``."""
    try:
        return action()
    except Exception as error:
        report.fail(check, f"raised {one_line(error)}")
        return None


def _step_record(reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> dict[str, torch.Tensor]:
    return _clone({"reward": reward, "terminated": terminated, "truncated": truncated})


def _clone(tensors: dict) -> dict[str, torch.Tensor]:
    return {name: value.clone() for name, value in tensors.items()}
