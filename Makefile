# AKD: the two commands a new user runs.
#   make demo   create/update .venv, install everything, run the main job on the built-in quadruped
#   make test   create/update .venv, check the import layering (.importlinter) and run the test suite
# torch is installed pinned and first: an unpinned torch pulls a multi-GB CUDA build (see README).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# --no-compile: no byte-compiling of every installed module (torch alone: 36 s -> 11 s); Python compiles the modules
# a command imports on first use instead
PIP_INSTALL := $(PIP) install --quiet --no-compile
STAMP  := $(VENV)/.akd-installed
TORCH  ?= torch==2.13.0
DEMO_OUT ?= runs/demo

.PHONY: demo test venv bench lint clean

venv: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip

$(STAMP): setup.py $(PY)
	$(PIP_INSTALL) "$(TORCH)"
	$(PIP_INSTALL) -e ".[ros,test,ray,policy]"
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/akd run --robot quadruped --prompt "a dog trotting forward" --out $(DEMO_OUT)

test: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/python -m pytest

bench: $(STAMP)
	$(PY) bench/run_all.py

lint: $(STAMP)
	$(VENV)/bin/ruff check akd_core akd_ros tests bench launch

clean:
	rm -rf $(VENV) build *.egg-info runs
