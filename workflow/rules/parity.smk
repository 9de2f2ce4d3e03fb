# Parity (docs/parity.md): do N ranks reach a task's target sooner in wall time, and with how many global env steps?
# Per task with a parity target x library x world size x variant (above one rank) x seed, one `rlscale
# train_multigpu` run for the same budget of global env steps at every world size. A rerun starts it from scratch,
# never with --resume: its wall time to the target must be one uninterrupted run's. parity_aggregate finds each run's
# first iteration at the target, after the run.
rule parity:
    input:
        validation_of,
        probe=probe_of,
    output:
        record="results/{study}/parity/{task}/{library}/ws{ws}/{variant}/seed{seed}.json",
    log:
        "logs/{study}/parity/{task}/{library}/ws{ws}/{variant}/seed{seed}.log",
    wildcard_constraints:
        ws=one_of(SINGLE_NODE),
        variant=r"lr-[a-z]+_norm-[a-z]+",
    threads: rank_threads
    resources:
        gpu=stage_gpus(Stage.PARITY),
    params:
        args=parity_args,
        device=DEVICE,
    shell:
        "{PYTHON} {SCRIPTS}/parity.py --world_size {wildcards.ws} --device {params.device} "
        "--granted_gpus {resources.gpu} --output {output.record} "
        "-- {params.args} > {log} 2>&1"


# Multi-node: one srun task (launcher) per node, c10d rendezvous on the allocation's first node (see train.smk).
rule parity_multinode:
    input:
        validation_of,
        probe=probe_of,
    output:
        record="results/{study}/parity/{task}/{library}/ws{ws}/{variant}/seed{seed}.json",
    log:
        "logs/{study}/parity/{task}/{library}/ws{ws}/{variant}/seed{seed}.log",
    wildcard_constraints:
        ws=one_of(MULTI_NODE),
        variant=r"lr-[a-z]+_norm-[a-z]+",
    threads: node_threads
    resources:
        nodes=node_count,
        tasks=node_count,
        mpi="srun",
        gres=node_gres,
        tasks_per_gpu=0,
    params:
        args=parity_args,
        device=DEVICE,
        nodes=node_count,
        rdzv_port=lookup(dpath="rdzv_port", within=STUDY),
    shell:
        "{resources.mpi} --ntasks-per-node=1 --cpus-per-task={threads} --gres={resources.gres} "
        "--nodes={params.nodes} --ntasks={params.nodes} "
        "{PYTHON} {SCRIPTS}/parity.py --world_size {wildcards.ws} "
        "--device {params.device} --nodes {params.nodes} --rdzv_port {params.rdzv_port} "
        "--output {output.record} -- {params.args} > {log} 2>&1"


rule parity_aggregate:
    input:
        records=list(PARITY_CELLS),
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
        cells=list(PARITY_CELLS.values()),
        tolerance=PARITY["tolerance"],
        checkpoints=PARITY["checkpoints"],
    script:
        "../../scripts/parity_aggregate.py"
