# Stage 2: the exact torchrun command each train job will run, resolved by `rlscale train_multigpu --dry_run`
# and kept as text: on one node exactly what the job runs (it passes no port; torchrun takes a free one); multi-node
# plans show the rendezvous host, port and id as placeholders, known only inside the allocation.


rule plan:
    input:
        validation_of,
    output:
        "results/{study}/plan/{task}/{library}/ws{ws}.txt",
    log:
        "logs/{study}/plan/{task}/{library}/ws{ws}.log",
    localrule: True
    params:
        launch=plan_launch_args,
        args=train_args,
        visible=plan_visible_gpus,
        device=DEVICE,
    shell:
        "{PYTHON} {SCRIPTS}/plan.py --visible_gpus {params.visible} --device {params.device} --output {output} "
        "-- {params.launch} {params.args} > {log} 2>&1"
