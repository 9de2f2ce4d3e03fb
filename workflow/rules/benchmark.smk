# Stage 5: `rlscale benchmark <workflow>_multigpu` bundles. training: every task x library x world size x
# per-rank env count, one job per cell that runs every seed in one warm process (`--seeds`: imports, CUDA context
# and process group paid once; each seed is still a whole run with its own bundle). startup (per library) and
# runtime (env only): one seed, at the largest world size.
# A rerun after a crash or a kill starts the benchmark from scratch, never with --resume: a bundle's throughput,
# warm-up and learning curve describe one uninterrupted run of all its iterations, which a resumed one is not.


rule benchmark:
    input:
        validation_of,
        probe=probe_of,
    output:
        bundles=expand(
            paths.TRAINING_BUNDLE, seed=PLAN.config.seeds, allow_missing=True
        ),
    log:
        paths.job_log(JobKind.TRAINING_BENCHMARK),
    wildcard_constraints:
        ws=one_of(SINGLE_NODE),
    threads: rank_threads
    resources:
        gpu=gpus_of(JobKind.TRAINING_BENCHMARK),
    params:
        job=job_of(JobKind.TRAINING_BENCHMARK),
        launcher="",
        grant=grant,
    shell:
        "{params.launcher}{PYTHON} -m rlscale.study run {params.job:q} {params.grant} > {log} 2>&1"


use rule benchmark as benchmark_multinode with:
    wildcard_constraints:
        ws=one_of(MULTI_NODE),
    threads: STUDY["gpus_per_node"]
    resources:
        **MULTI_NODE_RESOURCES,
    params:
        job=job_of(JobKind.TRAINING_BENCHMARK),
        launcher=srun,
        grant="",


rule benchmark_single_seed:
    input:
        validation_of,
        probe=probe_of,
    output:
        bundle=paths.BUNDLE,
    log:
        paths.job_log(JobKind.SINGLE_SEED_BENCHMARK),
    wildcard_constraints:
        workflow="startup|runtime",
        library=one_of([*LIBRARIES, ENV_ONLY]),
        ws=one_of(SINGLE_NODE),
    threads: rank_threads
    resources:
        gpu=gpus_of(JobKind.SINGLE_SEED_BENCHMARK),
    params:
        job=job_of(JobKind.SINGLE_SEED_BENCHMARK),
        launcher="",
        grant=grant,
    shell:
        "{params.launcher}{PYTHON} -m rlscale.study run {params.job:q} {params.grant} > {log} 2>&1"


use rule benchmark_single_seed as benchmark_single_seed_multinode with:
    wildcard_constraints:
        workflow="startup|runtime",
        library=one_of([*LIBRARIES, ENV_ONLY]),
        ws=one_of(MULTI_NODE),
    threads: STUDY["gpus_per_node"]
    resources:
        **MULTI_NODE_RESOURCES,
    params:
        job=job_of(JobKind.SINGLE_SEED_BENCHMARK),
        launcher=srun,
        grant="",
