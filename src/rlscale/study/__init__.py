"""The Snakemake scaling study's logic: job placement (on GPUs leased through :mod:`rlscale.launch.lease`), the
stages, the validation verdict, config resolution, aggregation and plots.

Submodules are imported by name (``rlscale.study.job_runner``, ``rlscale.study.aggregate``, ...) so that a job launcher
pays only for what it uses; pandas and matplotlib stay out of the GPU jobs.
"""
