"""Launcher of the ``parity_aggregate`` rule (a Snakemake ``script:``): parity.csv, parity_runs.csv and the plots."""

import sys

from rlscale.study.summary import write_parity_outputs

job = snakemake  # noqa: F821 (injected by Snakemake's script: directive)
sys.stderr = open(job.log[0], "w")  # noqa: SIM115 (stays open until the process ends, like the real stderr)
write_parity_outputs(
    records=list(job.input.records),
    cells=job.params.cells,
    tolerance=job.params.tolerance,
    checkpoints=job.params.checkpoints,
    parity_csv=job.output.csv,
    runs_csv=job.output.runs,
    plots={"env_steps": job.output.env_steps, "wall_time": job.output.wall_time},
)
