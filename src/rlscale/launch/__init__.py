"""Multi-GPU launchers: pure command resolution (:mod:`.command`), the job around it (:mod:`.launcher`), process-group
supervision (:mod:`.supervise`), torchrun's quiet wrapper (:mod:`.torchrun`) and the per-rank entry point
(:mod:`.worker`).

Importing this package imports nothing else, so ``--dry_run`` stays free of torch.
"""
