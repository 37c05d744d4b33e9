# `make demo` and `make test` work on a fresh clone: each creates .venv when missing
# and installs what it needs (stamp files remember what is installed).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
export RAY_AUTH_MODE ?= disabled
export RAY_USAGE_STATS_ENABLED ?= 0

.PHONY: demo test bench lint typecheck clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.base: pyproject.toml | $(PY)
	$(PIP) install -q -e ".[demo]"
	touch $@

$(VENV)/.test: pyproject.toml | $(PY)
	$(PIP) install -q -e ".[s3,gcs,optuna,test]"
	touch $@

$(VENV)/.bench: pyproject.toml | $(PY)
	$(PIP) install -q -e ".[s3,gcs,optuna,test,bench]"
	touch $@

demo: $(VENV)/.base
	$(PY) -m orchestrator demo

test: $(VENV)/.test
	$(PY) tools/check_layers.py
	$(PY) -m pytest -q

bench: $(VENV)/.bench
	$(PY) -m benchmarks

lint: $(VENV)/.test
	$(PY) tools/check_layers.py
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.test
	$(VENV)/bin/mypy orchestrator storage transfer

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
