# AKD: the two commands a new user runs.
#   make demo   create/update .venv, install everything, run the main job on the built-in quadruped
#   make test   create/update .venv, check the import layering (.importlinter), build the docs strictly and run
#               the test suite
#   make docs   the docs site (mkdocs, material theme) -> site/
# torch is installed pinned and first: an unpinned torch pulls a multi-GB CUDA build (see README).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# pip byte-compiles what it installs one file at a time (torch: 25 of its 36 s); installing with --no-compile and
# then byte-compiling the venv on every core is quicker (torch: 11 s + 14 s on 2 cores). compileall exits non-zero
# on the few files some wheels ship that are not Python 3 (templates, test data), which pip skips silently too
PIP_INSTALL := $(PIP) install --quiet --no-compile
COMPILE     := $(PY) -m compileall -q -q -j 0 $(VENV)/lib || true
STAMP  := $(VENV)/.akd-installed
TORCH  ?= torch==2.13.0
DEMO_OUT ?= runs/demo
# the suite on every logical CPU (pytest-xdist; at most 8 workers: the ROS tests' domain blocks), a test file per
# worker at a time (its module fixtures built once); tests/conftest.py gives each worker its share of the threads.
# `make test PYTEST_WORKERS=` runs it in one process
PYTEST_WORKERS ?= -n logical --maxprocesses 8 --dist loadfile

.PHONY: demo test docs venv bench lint clean

venv: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(STAMP): setup.py $(PY)
	$(PIP_INSTALL) "$(TORCH)"
	$(PIP_INSTALL) -e ".[ros,test,ray,policy]"
	@$(COMPILE)
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/akd run --robot quadruped --prompt "a dog trotting forward" --out $(DEMO_OUT)

test: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir $(VENV)/docs-check
	$(VENV)/bin/python -m pytest $(PYTEST_WORKERS)

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: $(STAMP)
	$(PY) bench/run_all.py

lint: $(STAMP)
	$(VENV)/bin/ruff check akd_core akd_ros tests bench launch

clean:
	rm -rf $(VENV) build *.egg-info runs site
