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
        bundles=training_bundles(),
    log:
        "logs/{study}/benchmark/training/{task}/{library}/ws{ws}/envs{envs}.log",
    wildcard_constraints:
        ws=one_of(SINGLE_NODE),
    threads: rank_threads
    resources:
        gpu=stage_gpus(Stage.BENCHMARK),
    params:
        args=training_args,
        device=DEVICE,
        log_root=benchmark_log_root,
        output=training_bundle_pattern,
    shell:
        "{PYTHON} {SCRIPTS}/benchmark.py --workflow training --world_size {wildcards.ws} "
        "--device {params.device} --granted_gpus {resources.gpu} "
        "-- {params.args} --log_root {params.log_root} --output_path {params.output:q} > {log} 2>&1"


# Multi-node: one srun task (launcher) per node, c10d rendezvous on the allocation's first node. srun names its node
# and task counts: the SLURM executor's job step drops SLURM_NNODES and SLURM_NTASKS from the job's environment, and a
# bare srun then starts one task on one node.
rule benchmark_multinode:
    input:
        validation_of,
        probe=probe_of,
    output:
        bundles=training_bundles(),
    log:
        "logs/{study}/benchmark/training/{task}/{library}/ws{ws}/envs{envs}.log",
    wildcard_constraints:
        ws=one_of(MULTI_NODE),
    threads: node_threads
    resources:
        nodes=node_count,
        tasks=node_count,
        mpi="srun",
        gres=node_gres,
        tasks_per_gpu=0,
    params:
        args=training_args,
        device=DEVICE,
        nodes=node_count,
        rdzv_port=lookup(dpath="rdzv_port", within=STUDY),
        log_root=benchmark_log_root,
        output=training_bundle_pattern,
    shell:
        "{resources.mpi} --ntasks-per-node=1 --cpus-per-task={threads} --gres={resources.gres} "
        "--nodes={params.nodes} --ntasks={params.nodes} "
        "{PYTHON} {SCRIPTS}/benchmark.py --workflow training "
        "--world_size {wildcards.ws} --device {params.device} --nodes {params.nodes} "
        "--rdzv_port {params.rdzv_port} "
        "-- {params.args} --log_root {params.log_root} --output_path {params.output:q} > {log} 2>&1"


rule benchmark_single_seed:
    input:
        validation_of,
        probe=probe_of,
    output:
        bundle="results/{study}/benchmark/{workflow}/{task}/{library}/ws{ws}/envs{envs}/seed{seed}.json",
    log:
        "logs/{study}/benchmark/{workflow}/{task}/{library}/ws{ws}/envs{envs}/seed{seed}.log",
    wildcard_constraints:
        workflow="startup|runtime",
        library=one_of([*LIBRARIES, ENV_ONLY]),
        ws=one_of(SINGLE_NODE),
    threads: rank_threads
    resources:
        gpu=stage_gpus(Stage.BENCHMARK),
    params:
        args=single_seed_args,
        device=DEVICE,
        log_root=single_seed_log_root,
    shell:
        "{PYTHON} {SCRIPTS}/benchmark.py --workflow {wildcards.workflow} --world_size {wildcards.ws} "
        "--device {params.device} --granted_gpus {resources.gpu} "
        "-- {params.args} --log_root {params.log_root} --output_path {output.bundle} > {log} 2>&1"


rule benchmark_single_seed_multinode:
    input:
        validation_of,
        probe=probe_of,
    output:
        bundle="results/{study}/benchmark/{workflow}/{task}/{library}/ws{ws}/envs{envs}/seed{seed}.json",
    log:
        "logs/{study}/benchmark/{workflow}/{task}/{library}/ws{ws}/envs{envs}/seed{seed}.log",
    wildcard_constraints:
        workflow="startup|runtime",
        library=one_of([*LIBRARIES, ENV_ONLY]),
        ws=one_of(MULTI_NODE),
    threads: node_threads
    resources:
        nodes=node_count,
        tasks=node_count,
        mpi="srun",
        gres=node_gres,
        tasks_per_gpu=0,
    params:
        args=single_seed_args,
        device=DEVICE,
        nodes=node_count,
        rdzv_port=lookup(dpath="rdzv_port", within=STUDY),
        log_root=single_seed_log_root,
    shell:
        "{resources.mpi} --ntasks-per-node=1 --cpus-per-task={threads} --gres={resources.gres} "
        "--nodes={params.nodes} --ntasks={params.nodes} "
        "{PYTHON} {SCRIPTS}/benchmark.py --workflow {wildcards.workflow} "
        "--world_size {wildcards.ws} --device {params.device} --nodes {params.nodes} "
        "--rdzv_port {params.rdzv_port} "
        "-- {params.args} --log_root {params.log_root} --output_path {output.bundle} > {log} 2>&1"
