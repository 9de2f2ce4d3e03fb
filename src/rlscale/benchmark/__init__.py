"""``rlscale benchmark``: startup, runtime and training measurements, single-process or one rank per GPU.

:mod:`.cli` parses and dispatches (no torch), :mod:`.worker` is the per-rank entry point, :mod:`.session` runs one
benchmark on one rank, :mod:`.workflows` holds the workflows (one module each; :mod:`.workflow` what they share),
:mod:`.stats` reduces samples, :mod:`.resources` samples the machine, :mod:`.bundle` builds, validates and writes the
result file and :mod:`.summary` prints the console report. :mod:`.peer_ratio` runs ``training --peer``'s baseline
and its ratio; :mod:`.compare` is ``rlscale benchmark compare``.
"""
