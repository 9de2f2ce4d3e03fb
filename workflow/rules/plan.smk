# Stage 2: the exact torchrun command each train job will run, resolved by `rlscale train_multigpu --dry_run`
# and kept as text: on one node exactly what the job runs (it passes no port; torchrun takes a free one); multi-node
# plans show the rendezvous host, port and id as placeholders, known only inside the allocation.


rule plan:
    input:
        validation_of,
    output:
        paths.PLAN,
    log:
        "logs/{study}/plan/{task}/{library}/ws{ws}.log",
    localrule: True
    params:
        job=job_of(JobKind.TRAIN),
    shell:
        "{PYTHON} -m rlscale.study plan {params.job:q} --output {output} > {log} 2>&1"
