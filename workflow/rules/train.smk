# Stage 4: one full `rlscale train_multigpu` run per task x library x world size (largest per-rank env count,
# first seed). Its manifest is the output; checkpoints stay in the run directory next to it. A killed or crashed
# job, rerun with `snakemake --rerun-incomplete`, continues from its last checkpoint (the job's --resume auto).


rule train:
    input:
        validation_of,
        plan=paths.PLAN,
        probe=probe_of,
    output:
        manifest=paths.TRAIN_MANIFEST,
    log:
        paths.job_log(JobKind.TRAIN),
    wildcard_constraints:
        ws=one_of(SINGLE_NODE),
    threads: rank_threads
    resources:
        gpu=gpus_of(JobKind.TRAIN),
    params:
        job=job_of(JobKind.TRAIN),
        launcher="",
        grant=grant,
        time_limit=time_limit_of("train"),
    shell:
        "{params.launcher}{PYTHON} -m rlscale.study run {params.job:q} {params.grant} > {log} 2>&1"


use rule train as train_multinode with:
    wildcard_constraints:
        ws=one_of(MULTI_NODE),
    threads: STUDY["gpus_per_node"]
    resources:
        **MULTI_NODE_RESOURCES,
    params:
        job=job_of(JobKind.TRAIN),
        launcher=srun,
        grant="",
        time_limit=time_limit_of("train_multinode"),
