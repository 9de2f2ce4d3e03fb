# Stage 1: per task, `rlscale check_task` (the VecTask contract, on the study's device at validate_num_envs), and per
# task x library, beside it, a short single-device `rlscale train` at the task's train env count (an MJX task then
# compiles its step for that count here, and every later job loads it from the JAX cache). Every later job of the pair
# waits for both, so a task that breaks the contract or does not train stops the study before any long job
# (criterion: docs in the verdict and rlscale.study.verdict.VALIDATION_CRITERION).


rule check_task:
    output:
        report="results/{study}/validate/{task}/check_task.txt",
    log:
        "logs/{study}/validate/{task}/check_task.log",
    threads: 1
    resources:
        gpu=stage_gpus(Stage.CHECK_TASK),
    params:
        device=DEVICE,
        num_envs=lookup(dpath="validate_num_envs", within=STUDY),
        gpus=single_device_gpus,
    shell:
        "{PYTHON} {SCRIPTS}/check_task.py --device {params.device} --num_envs {params.num_envs} --gpus {params.gpus} "
        "--granted_gpus {resources.gpu} --output {output.report} -- --task {wildcards.task} > {log} 2>&1"


rule validate:
    output:
        verdict="results/{study}/validate/{task}/{library}.json",
    log:
        "logs/{study}/validate/{task}/{library}.log",
    threads: 1
    resources:
        gpu=stage_gpus(Stage.VALIDATE),
    params:
        device=DEVICE,
        args=validate_args,
        iterations=lookup(dpath="iterations/validate", within=STUDY),
        gpus=single_device_gpus,
        run_root="results/{study}/validate/{task}/{library}",
    shell:
        "{PYTHON} {SCRIPTS}/validate.py --device {params.device} --iterations {params.iterations} --gpus {params.gpus} "
        "--granted_gpus {resources.gpu} --run_root {params.run_root} --output {output.verdict} "
        "-- {params.args} > {log} 2>&1"
