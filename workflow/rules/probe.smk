# Stage 3: `rlscale nccl_probe` (gloo on CPU ranks) at every world size > 1, before any long job at that size.


rule probe:
    output:
        "results/{study}/probe/ws{ws}.txt",
    log:
        "logs/{study}/probe/ws{ws}.log",
    wildcard_constraints:
        ws=one_of(size for size in SINGLE_NODE if size > 1),
    threads: rank_threads
    resources:
        gpu=stage_gpus(Stage.PROBE),
    params:
        device=DEVICE,
    shell:
        "{PYTHON} {SCRIPTS}/probe.py --world_size {wildcards.ws} --device {params.device} "
        "--granted_gpus {resources.gpu} --output {output} > {log} 2>&1"


# Multi-node: one srun task (launcher) per node, c10d rendezvous on the allocation's first node. srun names its node
# and task counts: the SLURM executor's job step drops SLURM_NNODES and SLURM_NTASKS from the job's environment, and a
# bare srun then starts one task on one node.
rule probe_multinode:
    output:
        "results/{study}/probe/ws{ws}.txt",
    log:
        "logs/{study}/probe/ws{ws}.log",
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
        device=DEVICE,
        nodes=node_count,
        rdzv_port=lookup(dpath="rdzv_port", within=STUDY),
    shell:
        "{resources.mpi} --ntasks-per-node=1 --cpus-per-task={threads} --gres={resources.gres} "
        "--nodes={params.nodes} --ntasks={params.nodes} "
        "{PYTHON} {SCRIPTS}/probe.py --world_size {wildcards.ws} "
        "--device {params.device} --nodes {params.nodes} --rdzv_port {params.rdzv_port} --output {output} "
        "> {log} 2>&1"
