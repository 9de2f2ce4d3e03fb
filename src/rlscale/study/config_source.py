"""Which files make the study config: ``config/config.yaml``, or the user's own files instead of it.

Snakemake loads the Snakefile's ``configfile`` and merges every ``--configfile`` into it key by key, so a copied and
shrunk config silently keeps whatever it left out (the GPU study's parity budgets, its per-task env counts). rlscale
reads ``--configfile`` files as a whole config instead: they replace ``config/config.yaml``. To overlay a few keys on
it, name it first, as the docs do: ``--configfile config/config.yaml overlay.yaml``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path


def study_config(
    loaded: Mapping, configfiles: Sequence[Path], command_line: Mapping, default: Path
) -> tuple[dict, str | None]:
    """The config the study runs, and one line saying where it comes from when that is not the default file.

    Args:
        loaded: The config as Snakemake merged it: ``default``, then ``configfiles``, then ``--config`` values.
        configfiles: The ``--configfile`` files, in order.
        command_line: The ``--configfile`` files merged in order, then ``--config`` values (Snakemake's
            ``config_settings.overwrite_config``): what the user gave.
        default: ``config/config.yaml``.
    """
    given = [Path(path).resolve() for path in configfiles]
    if not given:
        return copy.deepcopy(dict(loaded)), None
    names = " ".join(str(path) for path in configfiles)
    if default.resolve() in given:
        return copy.deepcopy(dict(loaded)), f"study config: {names} (overlaid in this order)"
    return copy.deepcopy(dict(command_line)), (
        f"study config: {names} replaces {default.name} (keys left out take the schema's defaults); to overlay it "
        f"instead, name it first: --configfile config/config.yaml {names}"
    )
