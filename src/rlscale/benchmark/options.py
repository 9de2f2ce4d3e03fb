"""The options every benchmark workflow shares beyond ``rlscale train``'s: the Isaac Lab options none supports, and
the ``{seed}`` of ``--output_path``. A workflow's own options are in its module (:mod:`.workflows`).

Torch-free, and free of the workflows, so that they, the parser (:mod:`.arguments`) and the session share these
without importing each other.
"""

from __future__ import annotations

import argparse

UNSUPPORTED = {
    "video": "--video: rlscale has no renderer, so there is no video to record",
    "capture_env_sensors": "--capture_env_sensors: rlscale's tasks have no sensors to capture",
    "check_success": "--check_success: rlscale's tasks define no success term to check",
}
"""Isaac Lab options no workflow supports, with the reason."""


def add_unsupported(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    # Accepted only to be refused by name: Isaac Lab's users pass them, and "unrecognized argument" would not say why.
    parser.add_argument("--video", action="store_true", help="not supported: rlscale has no renderer")
    parser.add_argument(
        "--capture_env_sensors", type=int, nargs="?", const=1, default=0, metavar="N", help="not supported: no sensors"
    )
    parser.add_argument("--check_success", action="store_true", help="not supported: no success term")


SEED_FIELD = "{seed}"
"""Where ``--output_path`` takes each repeat's seed under ``--seeds``."""


def given(argv: list[str], flag: str) -> bool:
    """Whether ``flag`` is on the command line, as ``--flag`` or ``--flag=value``."""
    return any(arg == flag or arg.startswith(f"{flag}=") for arg in argv)


def jax_message(workflow: str) -> str:
    return (
        f"skrl with --ml_framework jax is not supported by `rlscale benchmark {workflow}_multigpu` (its ranks are "
        "timed as torchrun processes); use --ml_framework torch"
    )
