"""The libraries' own speed levers, set as agent overrides, reach each library's objects, and the run records them.

Each override goes through ``rlscale train``'s spec (:func:`rlscale.run.spec.resolve_spec`) to the adapter; the
tests then read the object the library built: rsl_rl's PPO, rl_games' agent, skrl's agent. The runs are one short
CPU iteration each; the compiled rsl_rl models are checked before their first forward, which would compile them for
most of a minute on this CPU.
"""

from __future__ import annotations

import json
import signal

import pytest
import torch
from torch._dynamo.eval_frame import OptimizedModule

from rlscale.dist import RankInfo
from rlscale.rl import rl_games as rl_games_adapter
from rlscale.rl import rsl_rl as rsl_rl_adapter
from rlscale.rl import skrl as skrl_adapter
from rlscale.rl.common import TrainContext
from rlscale.run.phases import execute
from rlscale.run.spec import resolve_spec
from rlscale.tasks import make_task

CARTPOLE = ["--task", "Isaac-Cartpole", "--device", "cpu", "--num_envs", "8"]


@pytest.fixture
def train(tmp_path):
    """Run one iteration of ``rlscale train`` in this process; returns the manifest. The process's torch threads and
    SIGTERM handler, which a run sets, are restored afterwards."""
    threads, handler = torch.get_num_threads(), signal.getsignal(signal.SIGTERM)

    def run(*extra: str) -> dict:
        spec = resolve_spec([*CARTPOLE, "--max_iterations", "1", "--log_root", str(tmp_path), *extra])
        outcome = execute(spec)
        assert outcome.status == "completed"
        return json.loads((outcome.context.log_dir / "manifest.json").read_text())

    yield run
    torch.set_num_threads(threads)
    signal.signal(signal.SIGTERM, handler)


def rsl_rl_algorithm(tmp_path, *overrides: str):
    """rsl_rl's PPO as the adapter builds it for Isaac-Cartpole with these overrides, before any training."""
    spec = resolve_spec([*CARTPOLE, "--log_root", str(tmp_path), *overrides])
    task = make_task(spec.task, num_envs=8, device="cpu")
    task.reset()
    context = TrainContext(device="cpu", max_iterations=1, seed=1, log_dir=tmp_path, rank=RankInfo())
    return rsl_rl_adapter.build_runner(task, spec.agent_cfg, context).alg


class TestRslRl:
    def test_defaults_build_an_eager_adam_ppo(self, tmp_path):
        alg = rsl_rl_algorithm(tmp_path)
        assert not isinstance(alg.actor, OptimizedModule) and type(alg.optimizer) is torch.optim.Adam
        assert (alg.grad_reduce_bucket_mb, alg.use_mixed_precision) == (25, False)

    def test_compile_mode_wraps_actor_and_critic(self, tmp_path):
        alg = rsl_rl_algorithm(tmp_path, "agent.torch_compile_mode=max-autotune-no-cudagraphs")
        assert isinstance(alg.actor, OptimizedModule) and isinstance(alg.critic, OptimizedModule)
        assert alg.actor._orig_mod is alg.get_policy()  # checkpoints and the rank audit read the plain module

    def test_a_cuda_graph_compile_mode_is_refused_by_rsl_rl(self, tmp_path):
        with pytest.raises(ValueError, match="torch_compile_mode='reduce-overhead' uses CUDA graphs"):
            rsl_rl_algorithm(tmp_path, "agent.torch_compile_mode=reduce-overhead")

    def test_algorithm_levers_reach_ppo_and_the_manifest(self, train, monkeypatch):
        built = []
        build_runner = rsl_rl_adapter.build_runner
        monkeypatch.setattr(rsl_rl_adapter, "build_runner", lambda *args: built.append(build_runner(*args)) or built[0])
        manifest = train(
            "agent.algorithm.grad_reduce_bucket_mb=50",
            "agent.algorithm.use_mixed_precision=true",
            "agent.algorithm.optimizer=adamw",
            "agent.check_for_nan=false",
        )
        alg = built[0].alg
        assert (alg.grad_reduce_bucket_mb, alg.use_mixed_precision, type(alg.optimizer)) == (
            50,
            True,
            torch.optim.AdamW,
        )
        assert built[0].cfg["check_for_nan"] is False
        assert manifest["speed_levers"] == {
            "tf32": False,
            "torch_compile_mode": None,
            "check_for_nan": False,
            "optimizer": "adamw",
            "use_mixed_precision": True,
            "grad_reduce_bucket_mb": 50,
        }

    def test_a_config_without_the_keys_records_ppos_defaults(self):
        """A plug-in task's YAML may leave the levers out; the manifest then shows what rsl_rl used."""
        levers = rsl_rl_adapter.speed_levers({"algorithm": {"class_name": "PPO"}})
        assert levers == {
            "torch_compile_mode": None,
            "check_for_nan": True,
            "optimizer": "adam",
            "use_mixed_precision": False,
            "grad_reduce_bucket_mb": 25,
        }


def test_rl_games_mixed_precision_reaches_its_agent(train, monkeypatch):
    agents = []
    after_init = rl_games_adapter._KeepAgent.after_init
    monkeypatch.setattr(
        rl_games_adapter._KeepAgent, "after_init", lambda self, algo: agents.append(algo) or after_init(self, algo)
    )
    manifest = train("--rl_library", "rl_games", "agent.params.config.mixed_precision=true")
    assert agents[0].mixed_precision is True
    assert manifest["speed_levers"] == {"tf32": False, "mixed_precision": True, "torch_compile": False}
    # rl_games compiles its model when its config lacks the key: the record says so rather than assume it off.
    assert rl_games_adapter.speed_levers({"params": {"config": {}}}) == {
        "mixed_precision": False,
        "torch_compile": True,
    }


def test_skrl_mixed_precision_reaches_its_agent(train, monkeypatch):
    import skrl.utils.runner.torch as skrl_runner

    runners = []

    class RecordingRunner(skrl_runner.Runner):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            runners.append(self)

    monkeypatch.setattr(skrl_runner, "Runner", RecordingRunner)
    manifest = train("--rl_library", "skrl", "agent.agent.mixed_precision=true")
    agent = runners[0].agent
    assert agent.cfg.mixed_precision is True and agent.scaler.is_enabled()
    assert manifest["speed_levers"] == {"tf32": False, "mixed_precision": True}


def test_skrl_jax_refuses_mixed_precision(tmp_path):
    """skrl's JAX PPO has no such setting; the adapter says so instead of letting skrl fail on an unknown key."""
    spec = resolve_spec([*CARTPOLE, "--rl_library", "skrl", "agent.agent.mixed_precision=true"])
    task = make_task(spec.task, num_envs=8, device="cpu")
    context = TrainContext(
        device="cpu", max_iterations=1, seed=1, log_dir=tmp_path, rank=RankInfo(), ml_framework="jax"
    )
    with pytest.raises(ValueError, match="^agent.mixed_precision: skrl's JAX PPO has no mixed precision"):
        skrl_adapter.train(task, spec.agent_cfg, context)
