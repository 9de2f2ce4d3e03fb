# rlscale scaling study: validate -> plan -> probe -> train / benchmark / parity -> evaluate -> aggregate.
# Configure it in config/config.yaml; run it with `make study` (local, default profile) or with
# `snakemake --profile config/profiles/slurm` on a cluster (docs/cluster.md).
# Importing rlscale.study.snakemake_internals stops a Snakemake outside the supported versions, in one line.
from rlscale.study.snakemake_internals import configfiles_given

# The project's study. A --configfile of the user's own replaces it (name it first to overlay it): loaded only
# without one, so that Snakemake neither merges it under the user's file nor says it does (config/README.md).
if not configfiles_given(workflow):

    configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/validate.smk"
include: "workflow/rules/plan.smk"
include: "workflow/rules/probe.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/benchmark.smk"
include: "workflow/rules/parity.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/aggregate.smk"


rule all:
    default_target: True
    input:
        get_final_output(),
