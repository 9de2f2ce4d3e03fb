# Stage 4: one full `rlscale train_multigpu` run per task x library x world size (largest per-rank env count,
# first seed). Its manifest is the output; checkpoints stay in the run directory next to it. A killed or crashed
# job, rerun with `snakemake --rerun-incomplete`, continues from its last checkpoint (train_args: --resume auto).


rule train:
    input:
        validation_of,
        plan="results/{study}/plan/{task}/{library}/ws{ws}.txt",
        probe=probe_of,
    output:
        manifest="results/{study}/train/{task}/{library}/ws{ws}/manifest.json",
    log:
        "logs/{study}/train/{task}/{library}/ws{ws}.log",
    wildcard_constraints:
        ws=one_of(SINGLE_NODE),
    threads: rank_threads
    resources:
        gpu=stage_gpus(Stage.TRAIN),
    params:
        args=train_args,
        device=DEVICE,
    shell:
        "{PYTHON} {SCRIPTS}/train.py --world_size {wildcards.ws} --device {params.device} "
        "--granted_gpus {resources.gpu} --output {output.manifest} "
        "-- {params.args} > {log} 2>&1"


# Multi-node: one srun task (launcher) per node, c10d rendezvous on the allocation's first node. srun names its node
# and task counts: the SLURM executor's job step drops SLURM_NNODES and SLURM_NTASKS from the job's environment, and a
# bare srun then starts one task on one node.
rule train_multinode:
    input:
        validation_of,
        plan="results/{study}/plan/{task}/{library}/ws{ws}.txt",
        probe=probe_of,
    output:
        manifest="results/{study}/train/{task}/{library}/ws{ws}/manifest.json",
    log:
        "logs/{study}/train/{task}/{library}/ws{ws}.log",
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
        args=train_args,
        device=DEVICE,
        nodes=node_count,
        rdzv_port=lookup(dpath="rdzv_port", within=STUDY),
    shell:
        "{resources.mpi} --ntasks-per-node=1 --cpus-per-task={threads} --gres={resources.gres} "
        "--nodes={params.nodes} --ntasks={params.nodes} "
        "{PYTHON} {SCRIPTS}/train.py --world_size {wildcards.ws} "
        "--device {params.device} --nodes {params.nodes} --rdzv_port {params.rdzv_port} "
        "--output {output.manifest} -- {params.args} > {log} 2>&1"
