# `make setup` is idempotent: it rebuilds .venv only when pyproject.toml changes.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.rlscale-installed
# torch is installed first and on its own, so a machine that has a suitable build keeps it.
TORCH_SPEC ?= torch==2.13.0
export OMP_NUM_THREADS ?= 1

.PHONY: setup test lint study clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test,jax]"
	touch $@

lint: setup
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/ruff format --check src tests

test: lint
	$(PY) -m pytest -q

# Until the Snakemake study lands, the demo is a short single-process training run.
study: setup
	$(VENV)/bin/rlscale train --task Isaac-Cartpole --num_envs 256 --max_iterations 30 --run_name demo

clean:
	rm -rf $(VENV) logs .pytest_cache .ruff_cache
