# Two installs, each redone only when pyproject.toml (or the example task's) changes: `make setup-study` installs what
# training and the study run (`make study` runs it); `make setup` adds the test tools, the other extras and the example
# task (`make lint` and the test targets run it).
VENV ?= .venv
PY := $(VENV)/bin/python
STUDY_STAMP := $(VENV)/.rlscale-study
SETUP_STAMP := $(VENV)/.rlscale-setup
# torch is installed first and on its own, so a machine that has a suitable build keeps it.
TORCH_SPEC ?= torch==2.13.0
export OMP_NUM_THREADS ?= 1

.PHONY: setup setup-study test test-robots test-stress test-study test-extras lint study clean slurm-up slurm-down test-slurm

setup: $(SETUP_STAMP)

setup-study: $(STUDY_STAMP)

# The study's tasks run on torch (Cartpole) or MuJoCo Warp (the robots and Ant: the warp extra), with each library's
# torch backend. The times and sizes echoed are those of a 2-core machine with a CPU torch wheel on its disk.
$(STUDY_STAMP): pyproject.toml
	@echo "Installing into $(VENV): $(TORCH_SPEC) unless it has a torch, then rlscale with MuJoCo Warp (about 1 minute and 2 GB with a CPU torch; more with a CUDA one)"
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[warp]"
	touch $@

# The example task package is a distribution of its own, installed as a user installs theirs (docs/tasks.md); the
# tests train it through its `rlscale.tasks` entry point.
EXAMPLE_TASK := examples/pendulum_task

$(SETUP_STAMP): $(STUDY_STAMP) $(EXAMPLE_TASK)/pyproject.toml
	@echo "Installing into $(VENV): the test tools, skrl's JAX backend, MJX, W&B and the example task (about 40 s, 0.8 GB)"
	$(PY) -m pip install -q -e ".[test,jax,warp,mjx,wandb]"
	$(PY) -m pip install -q -e $(EXAMPLE_TASK)
	touch $@

lint: setup
	$(VENV)/bin/ruff check src tests examples
	$(VENV)/bin/ruff format --check src tests examples
	$(VENV)/bin/ruff check scripts tools
	$(VENV)/bin/ruff format --check scripts tools
	$(VENV)/bin/snakefmt --check Snakefile workflow
	$(VENV)/bin/lint-imports --no-cache
	$(PY) tools/checks/module_sizes.py

# Two pytest workers (pytest-xdist), each taking whole test files: the tests that train on two CPU ranks leave a core
# idle for part of their time, which the other worker fills (about 13 minutes on 2 cores, 19 with one worker). The
# targets below use them too, but test-stress, whose one test runs two trials at a time itself, and test-slurm.
TEST_WORKERS ?= 2
test: lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15 -m "not stress and not robots and not study and not extras"

# The robots' CPU checks (tests/test_robots.py: contract, every library on two CPU ranks, evaluate; tests/test_play.py:
# each robot filmed, which needs EGL: docs/robots.md; the torch MDP against the JAX one, and MuJoCo Warp's physics
# against MuJoCo's): about 5 minutes on 2 cores, kept out of `make test`; CI runs them. Their workers take test by test
# (--dist load), as nearly all of them are in one file.
test-robots: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist load -m robots

# Whole tiny studies run by Snakemake (the Cartpole scaling study with every stage, one with the example task, a killed
# train job continued; a Go1 study with the evaluation stage, its jobs sharing one MuJoCo Warp kernel cache): about
# 6.5 minutes on 2 cores, kept out of `make test`; CI runs them.
test-study: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m study

# The extras end to end: W&B runs offline from one rank, grouped and resumed (tests/test_tracker.py), and `rlscale play`
# and `evaluate` of every library's checkpoints (tests/test_play.py, but its robots' films, which test-robots runs), and
# skrl's JAX backend on CPU ranks (trained and resumed, two ranks in sync, a crashed rank, the rank audit:
# tests/library_paths.py), rl_games' and skrl's runs restarted by torchrun and stopped with Ctrl-C, each continued from
# its checkpoint (tests/test_resume.py), rl_games' and skrl's benchmark repeats in one process against fresh ones
# (tests/test_benchmark.py), MJX's compile cache shared by a second process, and `rlscale doctor` finding the variable
# that fixes a hanging probe (tests/test_doctor.py): about 9 minutes on 2 cores, kept out of `make test`; CI runs them.
test-extras: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "extras and not robots"

# Repeated randomised trials (crashes of random ranks at random iterations, torn down and named each time): about
# 2 minutes on 2 cores, kept out of `make test`; CI runs them.
test-stress: setup
	$(PY) -m pytest -q -m stress

# The scaling study (Snakefile + workflow/, config/config.yaml) with the default profile; on a machine without a GPU
# `device: auto` runs it on CPU ranks (about 5 minutes on 2 cores). Results, plots and report.html: results/<study>/.
SNAKEMAKE := $(VENV)/bin/snakemake --workflow-profile workflow/profiles/default
study: setup-study
	$(SNAKEMAKE) --cores all
	$(SNAKEMAKE) --report results/$$($(PY) -c 'import yaml; print(yaml.safe_load(open("config/config.yaml"))["study"])')/report.html

# A two-node SLURM cluster on this host (n1, n2 at 127.0.0.1; needs root, installs Debian's SLURM and munge when
# missing), and the tests that run the study, 2-node jobs, scancel, a time limit, a requeue and GPU requests on it
# (docs/cluster.md). test-slurm stops the cluster whatever the tests do, and exits with pytest's status.
SLURM_CLUSTER := tools/checks/slurm_local_cluster.sh
slurm-up:
	$(SLURM_CLUSTER) up

slurm-down:
	$(SLURM_CLUSTER) down

test-slurm: setup
	trap '$(SLURM_CLUSTER) down' EXIT; trap 'exit 130' INT TERM; \
	$(SLURM_CLUSTER) up && RLSCALE_SLURM_TESTS=1 $(PY) -m pytest -q -m slurm tests/test_slurm.py

clean:
	rm -rf $(VENV) logs .pytest_cache .ruff_cache
