# `make demo` and `make test` work on a fresh clone: each creates .venv when missing
# and installs what it needs (stamp files remember what is installed).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
export RAY_AUTH_MODE ?= disabled
export RAY_USAGE_STATS_ENABLED ?= 0

# Two pytest workers (pytest-xdist), one test file at a time each, one Ray each: most of
# the suite waits on Ray, subprocesses and storage, which two workers overlap on 2 cores.
# The Ray Train files run on one worker, one after another (tests/conftest.py groups
# them): two multi-node Train runs at once starve each other. PYTEST_WORKERS= runs serially.
PYTEST_WORKERS ?= -n 2 --dist loadgroup

.PHONY: demo test bench lint typecheck docs clean chromium

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.base: pyproject.toml | $(PY)
	$(PIP) install -q -e ".[demo]"
	touch $@

$(VENV)/.test: pyproject.toml | $(PY)
	$(PIP) install -q -e ".[s3,gcs,optuna,test,dashboard,train,trackers,frameworks]"
	touch $@

# The dashboard's browser test drives Debian's chromium: installed when missing and
# apt-get can (as root, as CI runs); otherwise that test skips and says why.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } ; } || \
	  echo "chromium is missing and cannot be installed here: the dashboard's browser test will skip"

$(VENV)/.docs: pyproject.toml | $(PY)
	$(PIP) install -q -e ".[docs]"
	touch $@

$(VENV)/.bench: pyproject.toml | $(PY)
	$(PIP) install -q -e ".[s3,gcs,optuna,test,bench]"
	touch $@

demo: $(VENV)/.base
	$(PY) -m orchestrator demo

test: $(VENV)/.test chromium
	$(PY) tools/check_layers.py
	$(PY) -m pytest -q $(PYTEST_WORKERS)

bench: $(VENV)/.bench
	$(PY) -m benchmarks

lint: $(VENV)/.test
	$(PY) tools/check_layers.py
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The site from docs/ and the docstrings (mkdocs.yml), into site/. --strict: a broken link
# or anchor, a page outside the nav, or an API name the code lacks fails the build.
docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

typecheck: $(VENV)/.test
	$(VENV)/bin/mypy orchestrator storage transfer

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
