"""One training run: ``rlscale train``, a rank of ``train_multigpu``, and the run a benchmark times; and what loads a
run's checkpoint: ``rlscale evaluate`` and ``rlscale play``.

:mod:`.args` parses and checks the command line, :mod:`.spec` resolves it once into a :class:`~.spec.RunSpec` (the
launcher hands it to its ranks as a file), :mod:`.rank` sets up the process, and :mod:`.phases` is the run itself.
"""
