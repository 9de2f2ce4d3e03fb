# Parity (docs/parity.md): do N ranks reach a task's target sooner in wall time, and with how many global env steps?
# Per task with a parity target x library x world size x variant (above one rank) x seed, one `rlscale
# train_multigpu` run for the same budget of global env steps at every world size (rlscale.study.parity has the
# cells). A rerun starts it from scratch, never with --resume: its wall time to the target must be one uninterrupted
# run's. parity_aggregate finds each run's first iteration at the target, after the run.
VARIANT = r"lr-[a-z]+_norm-[a-z]+"


rule parity:
    input:
        validation_of,
        probe=probe_of,
    output:
        record=paths.PARITY_RECORD,
    log:
        paths.job_log(JobKind.PARITY),
    wildcard_constraints:
        ws=one_of(SINGLE_NODE),
        variant=VARIANT,
    threads: rank_threads
    resources:
        gpu=gpus_of(JobKind.PARITY),
    params:
        job=job_of(JobKind.PARITY),
        launcher="",
        grant=grant,
    shell:
        "{params.launcher}{PYTHON} -m rlscale.study run {params.job:q} {params.grant} > {log} 2>&1"


use rule parity as parity_multinode with:
    wildcard_constraints:
        ws=one_of(MULTI_NODE),
        variant=VARIANT,
    threads: STUDY["gpus_per_node"]
    resources:
        **MULTI_NODE_RESOURCES,
    params:
        job=job_of(JobKind.PARITY),
        launcher=srun,
        grant="",


rule parity_aggregate:
    input:
        records=[cell["path"] for cell in PLAN.parity_cells],
    output:
        csv=report(
            "results/{study}/parity.csv",
            caption="../report/parity.rst",
            category="Parity",
        ),
        runs="results/{study}/parity_runs.csv",
        env_steps=report(
            "results/{study}/parity_env_steps.png",
            caption="../report/parity_env_steps.rst",
            category="Parity",
        ),
        wall_time=report(
            "results/{study}/parity_wall_time.png",
            caption="../report/parity_wall_time.rst",
            category="Parity",
        ),
    log:
        "logs/{study}/parity_aggregate.log",
    localrule: True
    params:
        cells=PLAN.parity_cells,
        tolerance=STUDY["parity"]["tolerance"],
        checkpoints=STUDY["parity"]["checkpoints"],
    script:
        "../../scripts/parity_aggregate.py"
