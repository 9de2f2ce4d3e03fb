"""``rlscale benchmark compare``: run named variants of a benchmark interleaved over repeats, then tabulate their
medians and paired ratios with distribution-free intervals (:func:`rlscale.benchmark.stats.median_interval`).

GPUs vary by about 15 % from run to run, and a host's load drifts over minutes, so two configurations are
compared only when they ran in turns: repeat ``r`` runs every variant once with seed ``base_seed + r`` (the same
seed for all variants of a repeat: a pair), the order rotated by one each repeat so that no variant always goes
first. A ratio is taken within a repeat (variant ÷ baseline of the same repeat), then summarised over repeats.

:mod:`.plan` parses the variants and orders the runs, :mod:`.run` runs them (each a supervised child process), and
:mod:`.summary` tabulates the bundles; :mod:`.cli` is the command line, which holds the host alone while the runs go
(:func:`rlscale.launch.lease.acquire_host`). Files under ``--output_dir``: ``plan.json`` (the variants and each
run's outcome), ``<variant>/repeat<r>.json`` (the bundle) and ``.log``, and the tables, which ``--summarise_only``
rebuilds from those files alone (a directory copied back from a GPU machine).
"""
