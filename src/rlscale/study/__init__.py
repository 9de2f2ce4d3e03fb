"""The Snakemake scaling study's logic: GPU/port leases, job placement, the stages, the validation verdict,
config resolution, aggregation and plots.

Submodules are imported by name (``rlscale.study.lease``, ``rlscale.study.aggregate``, ...) so that a job launcher
pays only for what it uses; pandas and matplotlib stay out of the GPU jobs.
"""
