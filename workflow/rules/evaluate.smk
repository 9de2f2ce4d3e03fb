# The evaluation stage: for a task that defines an evaluation (the robots; rlscale.study.evaluation), `rlscale
# evaluate` of each train run's final checkpoint and of each parity run's checkpoints, one process per run on one GPU
# (one CPU core on CPU). The aggregate rule tables tracking error and falls per world size in summary.md.
from rlscale.study.evaluation import evaluation_cells

EVALUATION_CELLS = evaluation_cells(STUDY, train_cells(), list(PARITY_CELLS.values()))
EVALUATION_ARGS = (
    f"--num_envs {STUDY['evaluation']['num_envs']} --seed {STUDY['evaluation']['seed']}"
)


rule evaluate_train:
    input:
        record="results/{study}/train/{task}/{library}/ws{ws}/manifest.json",
    output:
        "results/{study}/evaluate/train/{task}/{library}/ws{ws}.json",
    log:
        "logs/{study}/evaluate/train/{task}/{library}/ws{ws}.log",
    wildcard_constraints:
        task=one_of(STUDY["evaluated_tasks"]),
    threads: 1
    resources:
        gpu=stage_gpus(Stage.EVALUATE),
    params:
        args=EVALUATION_ARGS,
        device=DEVICE,
    shell:
        "{PYTHON} {SCRIPTS}/evaluate.py --device {params.device} --granted_gpus {resources.gpu} "
        "--record {input.record} --output {output} -- {params.args} > {log} 2>&1"


rule evaluate_parity:
    input:
        record="results/{study}/parity/{task}/{library}/ws{ws}/{variant}/seed{seed}.json",
    output:
        "results/{study}/evaluate/parity/{task}/{library}/ws{ws}/{variant}/seed{seed}.json",
    log:
        "logs/{study}/evaluate/parity/{task}/{library}/ws{ws}/{variant}/seed{seed}.log",
    wildcard_constraints:
        task=one_of(STUDY["evaluated_tasks"]),
        variant=r"lr-[a-z]+_norm-[a-z]+",
    threads: 1
    resources:
        gpu=stage_gpus(Stage.EVALUATE),
    params:
        args=EVALUATION_ARGS,
        device=DEVICE,
    shell:
        "{PYTHON} {SCRIPTS}/evaluate.py --device {params.device} --granted_gpus {resources.gpu} "
        "--record {input.record} --every_checkpoint --output {output} -- {params.args} > {log} 2>&1"
