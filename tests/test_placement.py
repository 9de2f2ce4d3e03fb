"""Rank placement: the launcher's plan of each local rank's CPUs and threads (pure, with fake hosts), its dry-run lines,
the rank applying it (the placement two real CPU ranks record in their manifests: tests/test_multigpu.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rlscale import cli
from rlscale.device import CPU, CUDA, Device
from rlscale.dist import PLACEMENT_ENV, CpuShare, NodePlacement
from rlscale.launch.launcher import job_environment
from rlscale.launch.placement import (
    bind_this_process,
    describe_placement,
    describe_share,
    format_cpu_list,
    parse_cpu_list,
    plan_cpu_shares,
    plan_node,
    read_core_of,
)

H200_PAIR = [set(range(32))] * 2
"""A 2×H200 host: both GPUs report the same 32 CPUs."""
TWO_NUMA_NODES = [set(range(16)), set(range(16)), set(range(16, 32)), set(range(16, 32))]


def cpus_of(shares: tuple[CpuShare, ...]) -> list[list[int]]:
    return [list(share.cpus) for share in shares]


def span(first: int, last: int) -> list[int]:
    return list(range(first, last + 1))


class TestPlanCpuShares:
    @pytest.mark.parametrize(
        ("ranks", "available", "affinities", "expected"),
        [
            (1, range(8), None, [span(0, 7)]),
            (2, range(32), H200_PAIR, [span(0, 15), span(16, 31)]),
            (2, range(6), None, [span(0, 2), span(3, 5)]),  # no NVML: the available CPUs, evenly
            (4, range(32), TWO_NUMA_NODES, [span(0, 7), span(8, 15), span(16, 23), span(24, 31)]),
            (8, range(64), [set(range(16 * (g // 2), 16 * (g // 2) + 16)) for g in range(8)],
             [span(8 * r, 8 * r + 7) for r in range(8)]),
            (3, range(8), None, [span(0, 1), span(2, 4), span(5, 7)]),  # uneven: sizes differ by one at most
            (2, range(8, 16), H200_PAIR, [span(8, 11), span(12, 15)]),  # a cgroup narrower than the GPUs' CPUs
            (2, range(40, 48), H200_PAIR, [span(40, 43), span(44, 47)]),  # none of the GPUs' CPUs is available
            (2, range(32), [set(range(16)), set(range(16, 32))], [span(0, 15), span(16, 31)]),  # disjoint sets
        ],
        ids=["one", "h200-pair", "no-nvml", "two-numa-nodes", "eight", "uneven", "cgroup", "affinity-unavailable",
             "disjoint"],
    )  # fmt: skip
    def test_shares(self, ranks, available, affinities, expected):
        shares = plan_cpu_shares(ranks, available, affinities)
        assert cpus_of(shares) == expected
        assert [share.threads for share in shares] == [len(cpus) for cpus in expected]

    def test_fewer_cpus_than_ranks_share_one_each(self):
        shares = plan_cpu_shares(4, [0, 1])
        assert cpus_of(shares) == [[0], [0], [1], [1]]
        assert {share.threads for share in shares} == {1}

    def test_threads_of_one_core_stay_with_one_rank(self):
        """CPUs 0-3 and their hyperthreads 4-7: a rank gets whole cores, not CPUs 0-3 leaving 4-7 to its neighbour."""
        core_of = {cpu: cpu % 4 for cpu in range(8)}
        assert cpus_of(plan_cpu_shares(2, range(8), None, core_of)) == [[0, 1, 4, 5], [2, 3, 6, 7]]


class TestHostFacts:
    @pytest.mark.parametrize(("text", "cpus"), [("0-3,8,10-11\n", [0, 1, 2, 3, 8, 10, 11]), ("5", [5])])
    def test_cpu_lists_read_and_written(self, text, cpus):
        assert parse_cpu_list(text) == cpus
        assert format_cpu_list(cpus) == text.strip()

    @pytest.mark.parametrize(
        ("share", "shown"),
        [
            (CpuShare((0,), 1), "CPU 0 (1 thread)"),
            (CpuShare((0, 1), 2), "CPUs 0-1 (2 threads)"),
            (CpuShare((0, 2), 2), "CPUs 0,2 (2 threads)"),
            (CpuShare(tuple(range(16)), 16), "CPUs 0-15 (16 threads)"),
        ],
    )
    def test_a_share_reads_as_its_cpus_then_its_threads(self, share, shown):
        assert describe_share(share) == shown
        line = describe_placement(NodePlacement("auto", "nvml", (share,)))
        assert line == [f"[INFO] cpu binding auto: local rank 0: {shown}; GPU affinity: nvml"]

    def test_cores_from_sysfs(self, tmp_path):
        for cpu, siblings in {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"}.items():
            (tmp_path / f"cpu{cpu}" / "topology").mkdir(parents=True)
            (tmp_path / f"cpu{cpu}" / "topology" / "thread_siblings_list").write_text(siblings + "\n")
        assert read_core_of([0, 1, 2, 3, 9], tmp_path) == {0: 0, 1: 1, 2: 0, 3: 1}


def refuse_nvml(gpus):
    raise AssertionError(f"NVML read for {gpus}")


def failing_nvml(gpus):
    raise OSError("libnvidia-ml.so.1: cannot open shared object file")


class TestPlanNode:
    def test_gpu_ranks_split_their_gpus_cpus(self):
        read = []
        placement = plan_node(
            "auto", 2, False, {"CUDA_VISIBLE_DEVICES": "4,6"}, available_cpus=range(32),
            read_affinities=lambda gpus: read.append(gpus) or H200_PAIR, core_of={},
        )  # fmt: skip
        assert read == [["4", "6"]]
        assert placement == NodePlacement(
            "auto", "nvml", (CpuShare(tuple(range(16)), 16), CpuShare(tuple(range(16, 32)), 16))
        )

    def test_without_nvml_the_available_cpus_are_split(self):
        placement = plan_node("auto", 2, False, {}, available_cpus=range(4), read_affinities=failing_nvml, core_of={})
        assert placement.gpu_affinity == "none"
        assert cpus_of(placement.shares) == [[0, 1], [2, 3]]

    def test_cpu_ranks_are_left_unbound(self):
        placement = plan_node("auto", 2, True, {}, available_cpus=range(4), read_affinities=refuse_nvml, core_of={})
        assert placement == NodePlacement("auto", "none")
        assert describe_placement(placement) == ["[INFO] cpu binding auto: ranks left unbound"]

    def test_binding_none_leaves_the_ranks_unbound(self):
        assert plan_node("none", 2, False, {}, read_affinities=refuse_nvml) == NodePlacement("none", "none")


class TestBindThisProcess:
    def test_a_cuda_process_gets_its_gpus_cpus(self):
        environ, read = {"CUDA_VISIBLE_DEVICES": "4,6"}, []
        every_cpu = [set(range(available_cpu_count()))]
        bind_this_process(Device("cuda", 1), environ, lambda gpus: read.append(gpus) or every_cpu)
        assert read == [["6"]]
        placement = NodePlacement.from_json(environ[PLACEMENT_ENV])
        assert (placement.gpu_affinity, len(placement.shares)) == ("nvml", 1)

    @pytest.mark.parametrize(
        ("device", "environ"),
        [(CPU, {}), (CUDA, {PLACEMENT_ENV: "kept"}), (Device("cuda", 3), {"CUDA_VISIBLE_DEVICES": "0"})],
        ids=["cpu", "launched", "unseen-gpu"],
    )
    def test_left_alone(self, device, environ):
        before = dict(environ)
        bind_this_process(device, environ, refuse_nvml)
        assert environ == before

    def test_left_alone_when_nvml_cannot_tell(self):
        environ = {}
        bind_this_process(None, environ, failing_nvml)
        assert environ == {}


def available_cpu_count() -> int:
    return len(os.sched_getaffinity(0))


class TestLauncher:
    def test_dry_run_prints_one_line_per_local_rank_on_stderr(self, capsys, monkeypatch):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # GPU ranks; no NVML here, so the host's CPUs are split
        code = cli.main(["train_multigpu", "--task", "Isaac-Cartpole", "--num_gpus", "2", "--dry_run"])
        out, err = capsys.readouterr()
        assert code == 0
        assert out.count("\n") == 1 and "rlscale.launch.torchrun" in out  # stdout stays the command, for the plan rule
        lines = [line for line in err.splitlines() if "cpu binding" in line]
        assert [line.split(": ")[1] for line in lines] == ["local rank 0", "local rank 1"]

    def test_dry_run_of_cpu_ranks_leaves_them_unbound(self, capsys):
        argv = ["train_multigpu", "--task", "Isaac-Cartpole", "--device", "cpu", "--num_gpus", "2", "--dry_run"]
        assert cli.main(argv) == 0
        assert "[INFO] cpu binding auto: ranks left unbound" in capsys.readouterr().err

    def test_dry_run_of_binding_none(self, capsys):
        argv = ["train_multigpu", "--task", "Isaac-Cartpole", "--device", "cpu", "--cpu_binding", "none", "--dry_run"]
        assert cli.main(argv) == 0
        assert "[INFO] cpu binding none: ranks left unbound" in capsys.readouterr().err

    def test_a_bad_binding_is_one_line_and_exit_2(self, capsys):
        with pytest.raises(SystemExit) as exit_:
            cli.main(["train_multigpu", "--task", "Isaac-Cartpole", "--device", "cpu", "--cpu_binding", "numa"])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and "--cpu_binding: invalid choice: 'numa'" in err

    def test_dry_run_plans_without_torch(self):
        script = (
            "import sys; from rlscale import cli; "
            "cli.main(['train_multigpu', '--task', 'Isaac-Cartpole', '--num_gpus', '2', '--dry_run']); "
            "print('torch' in sys.modules, file=sys.stderr)"
        )
        result = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True, text=True, timeout=60, env={**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"},
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "local rank 1" in result.stderr and result.stderr.splitlines()[-1] == "False"

    def test_ranks_get_the_plan_and_the_nccl_variables_unchanged(self):
        placement = NodePlacement("auto", "nvml", (CpuShare((0,), 1),))
        environ = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
        env = job_environment(environ, 1, False, "status", placement=placement)
        assert NodePlacement.from_json(env[PLACEMENT_ENV]) == placement
        assert {name: env[name] for name in environ} == environ

    def test_ranks_of_a_launcher_that_places_none_are_unbound(self):
        assert PLACEMENT_ENV not in job_environment({PLACEMENT_ENV: "{}"}, 1, False, "status")


APPLY = """
import json, os, sys
from rlscale.device import CPU
from rlscale.dist import rank_info
from rlscale.run.rank import place_rank
from rlscale.manifest import placement_record
place_rank(rank_info(), CPU, int(sys.argv[1]) if len(sys.argv) > 1 else None)
print(json.dumps(placement_record()))
"""


class TestRankApplies:
    def run_rank(self, placement: NodePlacement | None, *args: str) -> dict:
        env = {**os.environ, "WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
        env.pop(PLACEMENT_ENV, None)
        if placement is not None:
            env[PLACEMENT_ENV] = placement.to_json()
        env["NCCL_ALGO"] = "Ring"
        result = subprocess.run(
            [sys.executable, "-c", APPLY, *args], capture_output=True, text=True, env=env, timeout=120
        )
        assert result.returncode == 0, result.stderr[-2000:]
        return json.loads(result.stdout.splitlines()[-1])

    def test_the_rank_binds_its_own_share_and_records_it(self):
        last = max(os.sched_getaffinity(0))
        placement = NodePlacement("auto", "none", (CpuShare((0,), 1), CpuShare((last,), 1)))
        record = self.run_rank(placement)
        assert (record["cpus"], record["threads"]) == ([last], 1)
        assert (record["binding"], record["gpu_affinity"], record["nccl"]) == ("auto", "none", {"NCCL_ALGO": "Ring"})

    def test_cpu_threads_still_win(self):
        placement = NodePlacement("auto", "none", (CpuShare((0,), 1), CpuShare((0,), 1)))
        assert self.run_rank(placement, "3")["threads"] == 3

    def test_an_unplaced_rank_keeps_its_cpus(self):
        record = self.run_rank(None)
        assert (record["binding"], record["cpus"], record["threads"]) == (None, sorted(os.sched_getaffinity(0)), 1)
