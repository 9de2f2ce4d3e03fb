"""Checks of a launch's topology flags (nodes, node rank, ports, addresses), its restarts and its NCCL environment:
each refusal is a :class:`LaunchError` naming the flag, the value seen and the fix, raised before any rank starts."""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Mapping


class LaunchError(ValueError):
    """Launcher arguments that cannot work; the message names the flag, the value seen and the fix."""


def int_in(flag: str, raw: str, low: int, high: int | None = None, fix: str = "") -> int:
    """Return ``raw`` as an integer in ``[low, high]``, or raise naming the flag, the value and the fix."""
    if not raw.isdigit() or int(raw) < low or (high is not None and int(raw) > high):
        span = f"an integer in {low}..{high}" if high is not None else f"an integer >= {low}"
        raise LaunchError(f"{flag} must be {span}, got {raw!r}{'; ' + fix if fix else '.'}")
    return int(raw)


def seconds(flag: str, raw: str) -> float:
    """Return ``raw`` as a finite number of seconds >= 0, or raise naming the flag and the value."""
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise LaunchError(f"{flag} must be a number of seconds >= 0 (0 disables it), got {raw!r}.")
    return value


def check_topology(args: Namespace, jax: bool) -> None:
    """Validate ``--nnodes``, ``--node_rank``, the ports and the rendezvous address."""
    max_nodes = 1
    if args.nnodes is not None:
        low, sep, high = args.nnodes.partition(":")
        if sep and not jax and low.isdigit() and high.isdigit() and 1 <= int(low) <= int(high):
            max_nodes = int(high)
        else:
            fix = "use N (skrl JAX takes no range)." if jax else "use N, or MIN:MAX for elastic torchrun."
            max_nodes = int_in("--nnodes", args.nnodes, 1, fix=fix)
    nnodes = args.nnodes or "1"  # torchrun's default is a single node.
    if args.node_rank is not None and nnodes.isdigit():
        int_in("--node_rank", args.node_rank, 0, int(nnodes) - 1, f"node ranks run 0..{int(nnodes) - 1}.")
    elif args.node_rank is not None:
        int_in("--node_rank", args.node_rank, 0)
    if args.master_port is not None:
        int_in("--master_port", args.master_port, 1, 65535)
    if args.coordinator_address is not None:
        host, _, port = args.coordinator_address.rpartition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise LaunchError(
                f"--coordinator_address must be HOST:PORT with a port in 1..65535, got {args.coordinator_address!r}."
            )
    # Without an address each node rendezvouses on its own localhost and waits forever for the others.
    if max_nodes > 1 and jax and args.coordinator_address is None:
        raise LaunchError(f"--nnodes={args.nnodes} with skrl JAX needs --coordinator_address HOST:PORT of node 0.")
    if max_nodes > 1 and not jax and args.master_addr is None and args.rdzv_endpoint is None:
        raise LaunchError(
            f"--nnodes={args.nnodes} needs an address every node can reach: --master_addr HOST --master_port PORT, "
            "or --rdzv_backend c10d --rdzv_endpoint HOST:PORT."
        )


def check_restarts(args: Namespace, jax: bool, measuring: str | None = None) -> None:
    """Validate ``--max_restarts`` (made an integer) where torchrun can restart the workers; ``measuring``: the
    launcher's name when it measures one uninterrupted run (a benchmark), which no restart may join."""
    if args.max_restarts is None:
        return
    if measuring is not None:
        raise LaunchError(
            f"--max_restarts: {measuring} measures one uninterrupted run, and a restarted rank group's timings would "
            "join the failed group's in one bundle; drop --max_restarts and rerun a benchmark that fails."
        )
    if jax:
        raise LaunchError(
            "--max_restarts: skrl's JAX launcher (--rl_library skrl --ml_framework jax) never restarts its ranks, so a "
            "failed rank ends the job; drop --max_restarts, or train skrl with --ml_framework torch under torchrun."
        )
    args.max_restarts = int_in("--max_restarts", str(args.max_restarts), 0)
    # torchrun's static rendezvous hands each attempt the store of the first, where a restarted group can read the
    # failed group's addresses and never connect.
    static = args.rdzv_backend in (None, "static")
    if args.max_restarts and static and (args.master_port or args.rdzv_endpoint or (args.nnodes or "1") != "1"):
        raise LaunchError(
            f"--max_restarts {args.max_restarts} needs torchrun's c10d rendezvous, which gives each restart a store of "
            "its own; the static one (--master_port) keeps the failed group's. Use --rdzv_backend c10d "
            "--rdzv_endpoint HOST:PORT, or on one node leave --master_port out."
        )


def check_nccl_environment(environ: Mapping[str, str]) -> None:
    """Refuse ``NCCL_*`` settings that contradict each other or that NCCL would misread, before any rank starts."""
    disable, level = environ.get("NCCL_P2P_DISABLE"), environ.get("NCCL_P2P_LEVEL")
    # NCCL reads the variable with strtol and disables P2P for exactly 1; any other value, "true" included, is off.
    if disable is not None and disable.strip() not in ("", "0", "1"):
        raise LaunchError(
            f"NCCL_P2P_DISABLE={disable!r} must be 0 or 1: NCCL reads it as an integer and turns P2P off only for 1."
        )
    if disable is not None and disable.strip() == "1" and level:  # NCCL_P2P_DISABLE=1 is NCCL_P2P_LEVEL=LOC
        raise LaunchError(
            f"NCCL_P2P_DISABLE={disable!r} and NCCL_P2P_LEVEL={level!r} are both set, but they are mutually "
            "exclusive (both set where NCCL uses P2P); unset one for this job, e.g. `env -u NCCL_P2P_LEVEL "
            "rlscale ...` (docs/troubleshooting.md)."
        )
