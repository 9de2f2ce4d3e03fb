# The evaluation stage: for a task that defines an evaluation (the robots; rlscale.study.evaluation), `rlscale
# evaluate` of each train run's final checkpoint and of each parity run's checkpoints, one process per run on one GPU
# (one CPU core on CPU). The aggregate rule tables tracking error and falls per world size in summary.md.


rule evaluate_train:
    input:
        record=paths.TRAIN_MANIFEST,
    output:
        paths.EVALUATION_OF_TRAIN,
    log:
        paths.job_log(JobKind.EVALUATE_TRAIN),
    wildcard_constraints:
        task=one_of(STUDY["evaluated_tasks"]),
    threads: 1
    resources:
        gpu=gpus_of(JobKind.EVALUATE_TRAIN),
    params:
        job=job_of(JobKind.EVALUATE_TRAIN),
        grant=grant,
    shell:
        "{PYTHON} -m rlscale.study run {params.job:q} {params.grant} > {log} 2>&1"


rule evaluate_parity:
    input:
        record=paths.PARITY_RECORD,
    output:
        paths.EVALUATION_OF_PARITY,
    log:
        paths.job_log(JobKind.EVALUATE_PARITY),
    wildcard_constraints:
        task=one_of(STUDY["evaluated_tasks"]),
        variant=VARIANT,
    threads: 1
    resources:
        gpu=gpus_of(JobKind.EVALUATE_PARITY),
    params:
        job=job_of(JobKind.EVALUATE_PARITY),
        grant=grant,
    shell:
        "{PYTHON} -m rlscale.study run {params.job:q} {params.grant} > {log} 2>&1"
