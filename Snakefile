# rlscale scaling study: validate -> plan -> probe -> train / benchmark / parity -> aggregate.
# Configure it in config/config.yaml; run it with `make study` (local, default profile) or with
# `snakemake --profile config/profiles/slurm` on a cluster (docs/cluster.md).
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/parity_common.smk"
include: "workflow/rules/validate.smk"
include: "workflow/rules/plan.smk"
include: "workflow/rules/probe.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/benchmark.smk"
include: "workflow/rules/parity.smk"
include: "workflow/rules/aggregate.smk"


rule all:
    default_target: True
    input:
        get_final_output(),
