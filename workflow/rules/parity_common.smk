# Cells and param functions of the parity rules (workflow/rules/parity.smk); the cells come from
# rlscale.study.parity, which holds the logic and its tests.
from rlscale.study.parity import parity_cells, variant_options

PARITY = STUDY["parity"]
PARITY_CELLS = {cell["path"]: cell for cell in parity_cells(STUDY, list(LIBRARIES))}


def parity_cell(wildcards):
    """The parity cell of a job's record path."""
    return PARITY_CELLS[
        f"results/{wildcards.study}/parity/{wildcards.task}/{wildcards.library}/ws{wildcards.ws}/"
        f"{wildcards.variant}/seed{wildcards.seed}.json"
    ]


def parity_args(wildcards):
    """Per-rank arguments of a parity run: the iterations of its budget, one checkpoint (the last) and its variant."""
    cell = parity_cell(wildcards)
    return " ".join(
        [
            f"--task {cell['task']} {library_args(wildcards.library)} --num_envs {cell['num_envs_per_rank']}",
            f"--max_iterations {cell['iterations']} --checkpoint_interval {cell['iterations']}",
            f"--seed {cell['seed']} --run_name parity --log_root {parity_log_root(wildcards)}",
            *variant_options(wildcards.variant),
            *map(shlex.quote, tracker_args(STUDY, "parity")),
        ]
    )


def parity_log_root(wildcards):
    """Run directories of a parity run: kept with the logs, not the results (its record is the manifest)."""
    return (
        f"logs/{wildcards.study}/parity_runs/{wildcards.task}/{wildcards.library}/ws{wildcards.ws}/"
        f"{wildcards.variant}/seed{wildcards.seed}"
    )
