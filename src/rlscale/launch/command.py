"""Pure resolution of a multi-GPU launch: launcher arguments in, distributed-launcher argv out.

A multi-GPU command is a supervisor that builds one ``torchrun`` (run through :mod:`rlscale.launch.torchrun`) or skrl
JAX launcher command and runs a worker script once per rank. :class:`LauncherCfg` describes one such command;
``train_multigpu`` is :data:`TRAIN_MULTIGPU` and each ``benchmark <workflow>_multigpu`` comes from
:func:`benchmark_launcher_cfg`. Nothing here starts a process or imports torch, so ``--dry_run`` stays fast;
:mod:`rlscale.launch.supervise` runs the command.
"""

from __future__ import annotations

import argparse
import sys
from argparse import Namespace
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlscale.argparsing import OneLineParser
from rlscale.launch.checks import LaunchError, check_nccl_environment, check_restarts, check_topology, seconds
from rlscale.launch.gpus import GpuCounter, nvidia_hardware_present, nvml_device_count
from rlscale.launch.placement import CPU_BINDINGS
from rlscale.launch.ranks import GpuEvidence, available_cpus, cpu_ranks_short_of_cores, resolve_ranks
from rlscale.rl import LIBRARIES

TORCHRUN_ARGS = (
    *("nnodes", "node_rank", "master_addr", "master_port", "rdzv_backend", "rdzv_endpoint", "rdzv_id"),
    *("max_restarts", "monitor_interval", "start_method", "role", "tee", "redirects", "local_ranks_filter", "log_dir"),
)
"""Options forwarded to ``torchrun`` as ``--<name> <value>``, in this order, each only when set."""

SKRL_JAX_ARGS = ("nnodes", "node_rank", "coordinator_address")
"""Options forwarded to ``skrl.utils.distributed.jax``, in this order, each only when set."""

TORCHRUN_ONLY_ARGS = tuple(name for name in TORCHRUN_ARGS if name not in SKRL_JAX_ARGS)
"""Options skrl's JAX launcher has no equivalent for, refused with it (``--log_all_ranks`` is only a no-op there)."""

WORKER_SCRIPT = str(Path(__file__).resolve().with_name("worker.py"))
"""Script every rank runs."""

DEFAULT_HANG_TIMEOUT_S = 300.0
"""Default ``--hang_timeout``: longer than any healthy iteration, JIT compilation of the first one included."""


@dataclass(frozen=True)
class LauncherCfg:
    """Static description of one multi-GPU launcher command.

    Args:
        prog: Program name shown in usage and error lines.
        description: One-line description shown by ``--help``.
        worker_script: Absolute path of the script each rank runs.
        worker_prefix_args: Arguments placed before the forwarded ones on every rank (e.g. the benchmark workflow).
        worker_flags: Arguments appended to every rank's command unless already present.
        rl_libraries: Choices of ``--rl_library``; an empty tuple omits the option.
        default_rl_library: Library used when ``--rl_library`` is not given.
        supports_jax: Whether ``--rl_library skrl --ml_framework jax`` may use skrl's JAX launcher.
        places_ranks: Whether it offers ``--cpu_binding`` and places its ranks (:mod:`rlscale.launch.placement`).
        restarts_ranks: Whether ``--max_restarts`` may restart a failed rank group; a benchmark's bundle describes one
            uninterrupted run, so its launchers refuse it.
    """

    prog: str
    description: str
    worker_script: str
    worker_prefix_args: tuple[str, ...] = ()
    worker_flags: tuple[str, ...] = ("--distributed",)
    rl_libraries: tuple[str, ...] = ()
    default_rl_library: str = "rsl_rl"
    supports_jax: bool = True
    places_ranks: bool = True
    restarts_ranks: bool = True


TRAIN_MULTIGPU = LauncherCfg(
    prog="rlscale train_multigpu",
    description="Train one policy on several GPUs (one torchrun rank per GPU) or several CPU processes.",
    worker_script=WORKER_SCRIPT,
    rl_libraries=tuple(LIBRARIES),
)
"""The ``rlscale train_multigpu`` (alias ``train-multigpu``) launcher."""

NCCL_PROBE = LauncherCfg(
    prog="rlscale nccl_probe",
    description="All-reduce a small tensor across the ranks, as a cheap check before a long job.",
    worker_script=str(Path(__file__).resolve().with_name("probe.py")),
    worker_flags=(),
    supports_jax=False,
    places_ranks=False,
)
"""The ``rlscale nccl_probe`` launcher (gloo with ``--device cpu``); it leaves its ranks unbound, as a script written
by hand would."""


def benchmark_launcher_cfg(workflow: str, worker_script: str = WORKER_SCRIPT, *, uses_library: bool) -> LauncherCfg:
    """Return the launcher of ``rlscale benchmark <workflow>_multigpu``.

    ``workflow`` names one of the benchmark workflows (``rlscale.benchmark.workflows``, which this layer cannot read),
    optionally with a ``_multigpu``/``-multigpu`` suffix; every rank runs ``worker_script --workflow <workflow>``.
    ``uses_library`` (the workflow record's) decides whether it offers ``--rl_library``; none supports skrl JAX.
    """
    base = workflow.removesuffix("_multigpu").removesuffix("-multigpu")
    return LauncherCfg(
        prog=f"rlscale benchmark {base}_multigpu",
        description=f"Run the {base} benchmark with one rank per GPU.",
        worker_script=worker_script,
        worker_prefix_args=("--workflow", base),
        rl_libraries=tuple(LIBRARIES) if uses_library else (),
        supports_jax=False,
        restarts_ranks=False,
    )


def build_parser(cfg: LauncherCfg) -> argparse.ArgumentParser:
    """Build the launcher's parser; every argument it does not know is forwarded to the worker."""
    parser = OneLineParser(prog=cfg.prog, description=cfg.description, epilog="Other arguments go to every rank.")
    add = parser.add_argument
    if cfg.rl_libraries:
        add("--rl_library", choices=cfg.rl_libraries, default=cfg.default_rl_library, help="Training library.")
    add(
        "--num_gpus",
        "--nproc_per_node",
        dest="nproc_per_node",
        default=None,
        action=_GivenOnce,
        help="Ranks per node: N, or torchrun's gpu (every visible GPU; the default), cpu (one CPU process per core, "
        "with --device cpu) or auto (gpu if a GPU is visible, else cpu). With --device cpu, N counts CPU processes "
        "(default 1). A --dry_run that can count no GPU here prints gpu, for torchrun to count on the node.",
    )
    add("--nnodes", help="Number of nodes: N, or MIN:MAX for torchrun elastic training.")
    add("--node_rank", help="Rank of this node, in [0, nnodes).")
    add("--coordinator_address", help="HOST:PORT of the JAX coordinator (skrl with --ml_framework jax only).")
    add("--master_addr", help="Address of node 0 (torchrun static rendezvous).")
    add("--master_port", help="Port on node 0, 1..65535 (torchrun static rendezvous).")
    add("--rdzv_backend", help="torchrun rendezvous backend, e.g. c10d.")
    add("--rdzv_endpoint", help="torchrun rendezvous endpoint, HOST[:PORT].")
    add("--rdzv_id", help="torchrun rendezvous job id.")
    add("--max_restarts", help="torchrun: worker-group restarts before failing.")
    add("--monitor_interval", help="torchrun: worker monitor interval [s].")
    add("--start_method", choices=("spawn", "fork", "forkserver"), help="torchrun: multiprocessing start method.")
    add("--role", help="torchrun: worker role name.")
    add("--tee", help="torchrun: tee worker streams to the console and --log_dir.")
    add("--redirects", help="torchrun: redirect worker streams to --log_dir.")
    add("--local_ranks_filter", help="torchrun: local ranks shown on the console (default 0).")
    add("--log_dir", help="torchrun: directory for per-rank logs.")
    add(
        "--log_all_ranks",
        action="store_true",
        help="Show every rank's console output, not only local rank 0 (skrl's JAX launcher always shows every rank).",
    )
    if cfg.places_ranks:
        add(
            "--cpu_binding",
            choices=CPU_BINDINGS,
            default="auto",
            help="auto (default): bind each GPU rank to an equal share of this node's CPUs, those near its GPU where "
            "NVML tells, with one torch thread per CPU (CPU ranks stay unbound); none: leave the ranks unbound "
            "(threads: the cores shared among GPU ranks, 1 per CPU rank). A rank's --cpu_threads still sets its "
            "threads.",
        )
    add(
        "--dry_run",
        action="store_true",
        help="Print the resolved command and exit without starting it (the CPU binding goes to stderr).",
    )
    add(
        "--hang_timeout",
        default=str(DEFAULT_HANG_TIMEOUT_S),
        help="Stop the job when a rank makes no progress for this many seconds (default %(default)s; 0 disables). "
        "Counted from each rank's first heartbeat after startup.",
    )
    return parser


class _GivenOnce(argparse.Action):
    """Stores an option's value, refusing a second, different one under either spelling (``--num_gpus 2
    --nproc_per_node 3``), which argparse would silently let win."""

    def __call__(self, parser, namespace, values, option_string=None):
        earlier = getattr(namespace, self.dest)
        if earlier is not None and earlier != values:
            spellings = "/".join(self.option_strings)
            parser.error(f"{spellings} given twice, as {earlier} and {values}; pass one value")
        setattr(namespace, self.dest, values)


def forwarded_value(forwarded: Sequence[str], name: str) -> str | None:
    """Return the last value of option ``name`` in ``forwarded`` (``--x v`` or ``--x=v``), or ``None``."""
    value = None
    for index, arg in enumerate(forwarded):
        if arg == name and index + 1 < len(forwarded):
            value = forwarded[index + 1]
        elif arg.startswith(f"{name}="):
            value = arg[len(name) + 1 :]
    return value


def uses_skrl_jax(args: Namespace, forwarded: Sequence[str]) -> bool:
    """Return whether the launch goes through skrl's JAX launcher instead of torchrun."""
    return getattr(args, "rl_library", None) == "skrl" and forwarded_value(forwarded, "--ml_framework") == "jax"


def _resolve_ranks(
    args: Namespace,
    forwarded: Sequence[str],
    environ: Mapping[str, str],
    nvml_count: GpuCounter = nvml_device_count,
    gpu_evidence: GpuEvidence = nvidia_hardware_present,
) -> tuple[int | str, list[str]]:
    """Return the ranks per node (:func:`rlscale.launch.ranks.resolve_ranks`) and their arguments, ``--device cpu``
    added for CPU ranks that give none; sets ``args.ranks_on_cpu``, the launch's one reading of their ``--device``."""
    device = forwarded_value(forwarded, "--device")
    try:
        nproc, on_cpu = resolve_ranks(
            args.nproc_per_node,
            device,
            jax=uses_skrl_jax(args, forwarded),
            dry_run=args.dry_run,
            environ=environ,
            nvml_count=nvml_count,
            gpu_evidence=gpu_evidence,
        )
    except ValueError as exc:
        raise LaunchError(str(exc)) from None
    args.ranks_on_cpu = on_cpu
    return nproc, [*forwarded, "--device", "cpu"] if on_cpu and device is None else list(forwarded)


def validate_launch(
    args: Namespace,
    forwarded: Sequence[str],
    cfg: LauncherCfg,
    environ: Mapping[str, str],
    nvml_count: GpuCounter = nvml_device_count,
    gpu_evidence: GpuEvidence = nvidia_hardware_present,
) -> list[str]:
    """Raise :class:`LaunchError` on the first argument that cannot work; else resolve ``args.nproc_per_node``.

    Returns the arguments forwarded to the ranks (:func:`_resolve_ranks` may add ``--device cpu``).
    """
    jax = uses_skrl_jax(args, forwarded)
    if jax and not cfg.supports_jax:
        raise LaunchError(f"{cfg.prog} does not support skrl with --ml_framework jax; use --ml_framework torch.")
    # Before the torchrun-only options: it says why skrl's JAX launcher cannot restart.
    check_restarts(args, jax, None if cfg.restarts_ranks else cfg.prog)
    if jax:
        given = [f"--{name}" for name in TORCHRUN_ONLY_ARGS if getattr(args, name) is not None]
        if given:
            raise LaunchError(
                f"{', '.join(given)}: torchrun-only option(s), not accepted by skrl's JAX launcher "
                "(--rl_library skrl --ml_framework jax); drop them and use --coordinator_address HOST:PORT instead."
            )
    elif args.coordinator_address is not None:
        raise LaunchError(
            f"--coordinator_address={args.coordinator_address} is only for --rl_library skrl --ml_framework jax; "
            "torchrun takes --master_addr/--master_port or --rdzv_endpoint."
        )
    check_topology(args, jax)
    check_nccl_environment(environ)
    args.hang_timeout = seconds("--hang_timeout", args.hang_timeout)
    # Last: it may query NVML.
    args.nproc_per_node, forwarded = _resolve_ranks(args, forwarded, environ, nvml_count, gpu_evidence)
    return forwarded


def parse_launcher_args(
    argv: Sequence[str],
    cfg: LauncherCfg,
    environ: Mapping[str, str],
    *,
    nvml_count: GpuCounter = nvml_device_count,
    gpu_evidence: GpuEvidence = nvidia_hardware_present,
) -> tuple[Namespace, list[str]]:
    """Parse and validate launcher options; return them with the arguments forwarded to every rank.

    Unknown arguments are forwarded unchanged and in order. A ``--`` (``--num_gpus 2 -- --task X``) is dropped and
    hides nothing: launcher options after it are still the launcher's, so that ``-- --rl_library skrl`` cannot reach
    the ranks while the launcher resolved another library. A second ``--`` and all after it are forwarded verbatim
    (splitting here, not in argparse, keeps ``--`` handling identical across Python versions).
    ``--ml_framework`` and ``--device`` are read from the forwarded arguments but stay there.

    Args:
        argv: Launcher command line without the program/subcommand name.
        cfg: Launcher configuration.
        environ: Environment of the launch (``CUDA_VISIBLE_DEVICES``, the ``NCCL_*`` variables).
        nvml_count: GPU counter used when ``CUDA_VISIBLE_DEVICES`` is unset.
        gpu_evidence: Evidence of NVIDIA hardware, named in the error when NVML counts no GPU.

    Returns:
        The options, with ``nproc_per_node`` resolved (see :func:`rlscale.launch.ranks.resolve_ranks`), and the
        forwarded arguments.
        A user error prints one line on stderr and raises ``SystemExit(2)`` via ``parser.error``.
    """
    argv = list(argv)
    if "--" in argv:
        argv.remove("--")
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = build_parser(cfg)
    args, extras = parser.parse_known_args(argv[:cut])
    try:
        forwarded = validate_launch(args, [*extras, *argv[cut:]], cfg, environ, nvml_count, gpu_evidence)
    except LaunchError as exc:
        parser.error(str(exc))
    if args.log_all_ranks and uses_skrl_jax(args, forwarded):
        print("[WARN] --log_all_ranks has no effect with skrl's JAX launcher: every rank prints.", file=sys.stderr)
    # Warned, not refused as the study refuses it: more ranks than cores still train (slowly), as tests of many ranks
    # on a small host do. A dry run's job may run on another host.
    short = args.ranks_on_cpu and not args.dry_run and cpu_ranks_short_of_cores(args.nproc_per_node, available_cpus())
    if short:
        print(
            f"[WARN] --num_gpus/--nproc_per_node {args.nproc_per_node}: {short}; the ranks share cores, so each runs "
            f"slower and their timings mislead (pass at most {available_cpus()})",
            file=sys.stderr,
        )
    return args, forwarded


def build_launch_command(
    args: Namespace,
    forwarded: Sequence[str],
    cfg: LauncherCfg,
    environ: Mapping[str, str],
    *,
    python_executable: str | None = None,
) -> list[str]:
    """Return the distributed-launcher argv; starts nothing.

    Args:
        args: Options from :func:`parse_launcher_args` (an unresolved ``nproc_per_node`` is resolved here, with
            the forwarded arguments).
        forwarded: Arguments forwarded to every rank.
        cfg: Launcher configuration.
        environ: Environment of the launch, used only to resolve an unresolved ``nproc_per_node``.
        python_executable: Interpreter for the launcher; defaults to ``sys.executable``.

    Returns:
        ``[python, -m, rlscale.launch.torchrun | skrl.utils.distributed.jax, ..., worker, ...]``.

    Raises:
        LaunchError: If ``nproc_per_node`` still needs resolving and cannot be resolved.
    """
    nproc = args.nproc_per_node
    if not isinstance(nproc, int) and nproc != "gpu":  # torchrun counts the GPUs itself for gpu
        nproc, forwarded = _resolve_ranks(args, forwarded, environ)
    jax = uses_skrl_jax(args, forwarded)
    module = "skrl.utils.distributed.jax" if jax else "rlscale.launch.torchrun"
    command = [python_executable or sys.executable, "-m", module, "--nproc_per_node", str(nproc)]
    for name in SKRL_JAX_ARGS if jax else TORCHRUN_ARGS:
        if getattr(args, name) is not None:
            command += [f"--{name}", str(getattr(args, name))]
    # Every rank repeats the same startup output; failures still surface through torchrun and ``record``.
    if not jax and not args.log_all_ranks and args.local_ranks_filter is None:
        command += ["--local_ranks_filter", "0"]
    # Every rank's lines through torchrun's tee, which prefixes them (launcher.RANK_PREFIX_TEMPLATE: [rank1]:).
    if not jax and args.log_all_ranks and args.tee is None and args.redirects is None:
        command += ["--tee", "3"]
    library = ["--rl_library", args.rl_library] if cfg.rl_libraries else []
    flags = [flag for flag in cfg.worker_flags if flag not in forwarded]
    return [*command, cfg.worker_script, *cfg.worker_prefix_args, *library, *forwarded, *flags]
