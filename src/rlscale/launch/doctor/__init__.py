"""``rlscale doctor``: the multi-GPU troubleshooting procedure as one command.

Pure parts: the steps, outcomes and workarounds as data (:mod:`.steps`), the procedure that decides the next step from
the results so far (:mod:`.procedure`) and the report (:mod:`.report`). Impure parts: running one step under the
launcher's supervision (:mod:`.execute`) and the command line (:mod:`.main`).
"""
