"""``rlscale train``: one training run of a task with one library, on one device or as one rank of a job.

A rank of ``train_multigpu`` runs the spec its launcher resolved (:func:`rlscale.run.spec.spec_from_environment`);
any other process resolves its own from its command line.
"""

from __future__ import annotations

from rlscale.paths import one_line_on_full_disk
from rlscale.run.phases import execute
from rlscale.run.rank import isolate_gpu_if_task_asks
from rlscale.run.spec import resolve_spec, spec_from_environment


def main(argv: list[str] | None = None) -> int:
    spec = spec_from_environment()
    if spec is None:
        spec = resolve_spec(argv)
    else:  # resolving would have isolated it; before anything asks CUDA
        isolate_gpu_if_task_asks(spec.task, spec.device, spec.ml_framework)
    with one_line_on_full_disk("rlscale train"):
        outcome = execute(spec)
    if outcome.status == "completed" and outcome.context.rank.is_main:
        digests = outcome.manifest["rank_param_digests"]
        print(
            f"[rlscale] completed {outcome.result.iterations_completed} iterations in {outcome.wall_time_s:.1f}s; "
            f"mean episode length {outcome.manifest['final_mean_episode_length']:.1f}; "
            f"ranks in sync ({len(digests)}); run directory {outcome.context.log_dir}"
        )
    return outcome.exit_code
