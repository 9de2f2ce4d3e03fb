# Stage 1: per task x library, `rlscale check_task` (the VecTask contract, at the run's device and env count), then
# a short single-device `rlscale train`. Every later job of the pair waits for its verdict, so a task that breaks the
# contract or does not train stops the study before any long job (criterion: docs in the verdict and
# rlscale.study.verdict.VALIDATION_CRITERION).


rule validate:
    output:
        verdict="results/{study}/validate/{task}/{library}.json",
    log:
        "logs/{study}/validate/{task}/{library}.log",
    threads: 1
    resources:
        gpu=single_device_gpus,
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
