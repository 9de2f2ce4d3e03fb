# Stage 3: `rlscale nccl_probe` (gloo on CPU ranks) at every world size > 1, before any long job at that size.


rule probe:
    output:
        paths.PROBE_REPORT,
    log:
        paths.job_log(JobKind.PROBE),
    wildcard_constraints:
        ws=one_of(size for size in SINGLE_NODE if size > 1),
    threads: rank_threads
    resources:
        gpu=gpus_of(JobKind.PROBE),
    params:
        job=job_of(JobKind.PROBE),
        launcher="",
        grant=grant,
    shell:
        "{params.launcher}{PYTHON} -m rlscale.study run {params.job:q} {params.grant} > {log} 2>&1"


# Multi-node (every twin below is built the same way): one srun task (launcher) per node, c10d rendezvous on the
# allocation's first node; no grant to check, since the allocation is the job's.
use rule probe as probe_multinode with:
    wildcard_constraints:
        ws=one_of(MULTI_NODE),
    threads: STUDY["gpus_per_node"]
    resources:
        **MULTI_NODE_RESOURCES,
    params:
        job=job_of(JobKind.PROBE),
        launcher=srun,
        grant="",
