from rlscale.study.job_times import JOB_TIMES_ENV
from rlscale.study.plan_summary import plan_lines

# Stage 6: read every bundle, refuse incompatible ones, and write the scaling table, plots and summary (which shows
# the parity stage's table and plots, and the evaluation stage's tables, too).


rule aggregate:
    input:
        training=[path for path, _ in PLAN.training_cells],
        other=PLAN.other_bundles(),
        train=[path for path, _ in PLAN.train_cells],
        parity=rules.parity_aggregate.output.csv,
        parity_plots=[
            rules.parity_aggregate.output.env_steps,
            rules.parity_aggregate.output.wall_time,
        ],
        evaluations=[cell["path"] for cell in PLAN.evaluation_cells],
    output:
        csv=report(
            "results/{study}/scaling.csv",
            caption="../report/scaling.rst",
            category="Scaling",
        ),
        throughput=report(
            "results/{study}/throughput.png",
            caption="../report/throughput.rst",
            category="Scaling",
        ),
        efficiency=report(
            "results/{study}/efficiency.png",
            caption="../report/efficiency.rst",
            category="Scaling",
        ),
        learning=report(
            "results/{study}/learning_curves.png",
            caption="../report/learning_curves.rst",
            category="Learning",
        ),
        rank_time=report(
            "results/{study}/rank_time.png",
            caption="../report/rank_time.rst",
            category="Scaling",
        ),
        summary=report(
            "results/{study}/summary.md",
            caption="../report/summary.rst",
            category="Summary",
        ),
        job_timing=report(
            "results/{study}/job_timing.csv",
            caption="../report/job_timing.rst",
            category="Summary",
        ),
    log:
        "logs/{study}/aggregate.log",
    localrule: True
    params:
        device=STUDY["device"],
        device_reason=STUDY["device_reason"],
        plan=plan_lines(STUDY),
        training_cells=[cell for _, cell in PLAN.training_cells],
        train_cells=[cell for _, cell in PLAN.train_cells],
        evaluation_cells=PLAN.evaluation_cells,
        evaluation_envs=STUDY["evaluation"]["num_envs"],
        job_times=os.environ[JOB_TIMES_ENV],  # set by job_environment (common.smk)
        # Written by the probe jobs beside their reports, undeclared: a study probed before sweeps keeps its jobs.
        probe_sweeps=PLAN.probe_sweeps(),
    script:
        "../../scripts/aggregate.py"
