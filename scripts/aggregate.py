"""Launcher of the ``aggregate`` rule (a Snakemake ``script:``): scaling table, plots and summary of the study."""

import sys

from rlscale.study.summary import write_study_outputs

job = snakemake  # noqa: F821 (injected by Snakemake's script: directive)
sys.stderr = open(job.log[0], "w")  # noqa: SIM115 (stays open until the process ends, like the real stderr)
write_study_outputs(
    study=job.wildcards.study,
    device=job.params.device,
    device_reason=job.params.device_reason,
    training_bundles=list(job.input.training),
    training_cells=job.params.training_cells,
    other_bundles=list(job.input.other),
    train_manifests=list(job.input.train),
    train_cells=job.params.train_cells,
    scaling_csv=job.output.csv,
    throughput_plot=job.output.throughput,
    efficiency_plot=job.output.efficiency,
    learning_plot=job.output.learning,
    rank_time_plot=job.output.rank_time,
    summary=job.output.summary,
    parity_csv=job.input.parity,
    plan=list(job.params.plan),
    evaluations=list(job.input.evaluations),
    evaluation_cells=job.params.evaluation_cells,
    evaluation_envs=job.params.evaluation_envs,
    job_times=job.params.job_times,
    job_timing_csv=job.output.job_timing,
    probe_sweeps=list(job.params.probe_sweeps),
)
