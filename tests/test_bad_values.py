"""Bad values, files and checkpoints: checked by value before launch, on `rlscale train` and on the launchers.

Each case keeps the contract of :mod:`test_bad_inputs` (one error line naming the flag or key, the value and the fix;
exit code 2; nothing written), run by the same :func:`test_bad_inputs.run_case`. Unlike most of those, the launcher
cases here are not dry runs: the values are checked against the task's config and the library's agent config, which
a dry run does not load; the job itself is replaced by a stub that fails the test if it is reached.
"""

from __future__ import annotations

import pytest
from test_bad_inputs import case, run_case, tree

TRAIN = "train --task Isaac-Cartpole --device cpu"
MULTI = "train_multigpu --task Isaac-Cartpole --device cpu --num_gpus 2"
BENCH_MULTI = "benchmark training_multigpu --task Isaac-Cartpole --device cpu --num_gpus 2"

CATALOGUE = [
    # --- agent overrides: the type of the default, the library's range
    case("agent-rate-text", f"{TRAIN} --agent algorithm.learning_rate=fast", "algorithm.learning_rate",
         "'fast'", "must be a number"),
    case("agent-rate-negative", f"{TRAIN} agent.algorithm.learning_rate=-1e-3", "algorithm.learning_rate",
         "-0.001", "must be > 0"),
    case("agent-gamma-above-one", f"{MULTI} agent.algorithm.gamma=1.5", "algorithm.gamma", "1.5", "must be <= 1"),
    case("agent-minibatches-float", f"{MULTI} --agent algorithm.num_mini_batches=2.5",
         "algorithm.num_mini_batches", "2.5", "must be an integer"),
    case("agent-minibatches-zero", f"{TRAIN} agent.algorithm.num_mini_batches=0", "algorithm.num_mini_batches",
         "got 0", "must be >= 1"),
    case("agent-bool-as-int", f"{TRAIN} agent.algorithm.use_mixed_precision=1", "use_mixed_precision", "got 1",
         "true or false"),
    case("agent-list-as-int", f"{TRAIN} agent.actor.hidden_dims=64", "actor.hidden_dims", "got 64", "a list"),
    case("agent-schedule-unknown", f"{TRAIN} agent.algorithm.schedule=cosine", "algorithm.schedule", "'cosine'",
         "one of adaptive, fixed"),
    case("agent-clip-zero", f"{TRAIN} agent.algorithm.clip_param=0", "algorithm.clip_param", "got 0", "> 0"),
    case("agent-rl-games-horizon", f"{TRAIN} --rl_library rl_games agent.params.config.horizon_length=0",
         "params.config.horizon_length", "got 0", ">= 1"),
    case("agent-skrl-discount", f"{TRAIN} --rl_library skrl agent.agent.discount_factor=0",
         "agent.discount_factor", "got 0", "> 0"),
    case("agent-skrl-interval-text", f"{TRAIN} --rl_library skrl agent.agent.experiment.checkpoint_interval=often",
         "checkpoint_interval", "'often'", "an integer or one of auto"),
    case("agent-benchmark-launcher", f"{BENCH_MULTI} agent.algorithm.learning_rate=0", "algorithm.learning_rate",
         "got 0", "> 0"),
    # --- env overrides: ranges declared on the task's config fields
    case("env-episode-negative", f"{TRAIN} env.episode_length_s=-5", "env.episode_length_s=-5",
         "episode_length_s must be > 0"),
    case("env-dt-zero", f"{MULTI} env.sim_dt=0", "env.sim_dt=0", "sim_dt must be > 0"),
    case("env-decimation-zero", f"{TRAIN} env.decimation=0", "env.decimation=0", "must be >= 1"),
    case("env-nested-mass", f"{TRAIN} env.physics.pole_mass=-0.1", "env.physics.pole_mass=-0.1",
         "physics.pole_mass must be > 0"),
    case("env-decimation-float", f"{TRAIN} env.decimation=1.5", "env.decimation=1.5", "expected int"),
    # --- launcher values that contradict each other
    case("multi-num-gpus-and-nproc", f"{MULTI} --nproc_per_node 3 --dry_run", "--num_gpus/--nproc_per_node",
         "2 and 3", "pass one value"),
    # --- RLSCALE_* variables
    case("env-fault-rank-missing", MULTI, "RLSCALE_INJECT_FAULT='crash:rank=2,iteration=1'", "rank 2",
         "job of 2 rank(s)", "0..1", env={"RLSCALE_INJECT_FAULT": "crash:rank=2,iteration=1"}),
    case("env-fault-rank-single", TRAIN, "rank 1 does not exist", "0..0",
         env={"RLSCALE_INJECT_FAULT": "crash:rank=1,iteration=1"}),
    case("env-collective-timeout-text", f"{MULTI} --dry_run", "RLSCALE_COLLECTIVE_TIMEOUT='ten'",
         "number of seconds > 0", env={"RLSCALE_COLLECTIVE_TIMEOUT": "ten"}),
    case("env-collective-timeout-zero", TRAIN, "RLSCALE_COLLECTIVE_TIMEOUT='0'", "> 0",
         env={"RLSCALE_COLLECTIVE_TIMEOUT": "0"}),
]  # fmt: skip


@pytest.mark.parametrize("item", CATALOGUE, ids=[item.id for item in CATALOGUE])
def test_one_line_exit_2_nothing_written(item, tmp_path, monkeypatch, capsys):
    """Refused with one line naming key, value and bound; exit 2; no file appears; no rank or run starts."""
    monkeypatch.chdir(tmp_path)
    for name in item.files:
        (tmp_path / name).mkdir() if name.endswith("/") else (tmp_path / name).write_bytes(b"\x80\x02garbage")
    before = tree(tmp_path)
    code, out, lines = run_case(item, tmp_path, monkeypatch, capsys)
    assert (code, out) == (2, ""), lines
    assert len(lines) == 1, lines
    missing = [text for text in item.needs if text not in lines[0]]
    assert not missing, f"{missing} not in: {lines[0]}"
    assert tree(tmp_path) == before
