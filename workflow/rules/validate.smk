# Stage 1: per task, `rlscale check_task` (the VecTask contract, on the study's device at validate_num_envs), and per
# task x library, beside it, a short single-device `rlscale train` at the task's train env count (a task that compiles
# its step or kernels does so here, and every later job loads them from the study's cache). Every later job of the
# pair waits for both, so a task that breaks the contract or does not train stops the study before any long job
# (criterion: docs in the verdict and rlscale.study.verdict.VALIDATION_CRITERION).


rule check_task:
    output:
        report=paths.CHECK_TASK_REPORT,
    log:
        paths.job_log(JobKind.CHECK_TASK),
    threads: 1
    resources:
        gpu=gpus_of(JobKind.CHECK_TASK),
    params:
        job=job_of(JobKind.CHECK_TASK),
        grant=grant,
    shell:
        "{PYTHON} -m rlscale.study run {params.job:q} {params.grant} > {log} 2>&1"


rule validate:
    output:
        verdict=paths.VERDICT,
    log:
        paths.job_log(JobKind.VALIDATE),
    threads: 1
    resources:
        gpu=gpus_of(JobKind.VALIDATE),
    params:
        job=job_of(JobKind.VALIDATE),
        grant=grant,
    shell:
        "{PYTHON} -m rlscale.study run {params.job:q} {params.grant} > {log} 2>&1"
