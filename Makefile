# fmlab: one command runs the course, one passes the tests (see README.md).
#   make course     set up .venv from the lock, execute every notebook and lab solution headless, print a table
#   make test       set up .venv from the lock, lint, run the whole test suite
#   make paths      execute the one-day and two-day workshop paths as a room runs them (CI runs it after make test)
#   make test-fast  lint and the tests that execute no notebook, run no browser, start no process group, are not slow
#   make lab        open JupyterLab on the course
#   make slides     build the slide decks to reveal.js HTML under build/slides/
#   make slurm      install (root with apt) and start a one-node Slurm for module 11; says why not where it cannot
#   make lock       re-resolve requirements/lock.txt from pyproject.toml's ranges (maintainers; then make course test)

# PYTHON= names the interpreter of the venv; without it requirements/install.sh takes the newest of python3.13,
# python3.12 and python3.11 that runs here.
PYTHON ?=
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LOCK   := requirements/lock.txt
# torch's wheels come from this index first: the CPU build. On a GPU machine, name a CUDA index instead
# (make setup TORCH_INDEX=https://download.pytorch.org/whl/cu130), or TORCH_INDEX= for PyPI's default build.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: setup slurm course paths test test-fast lint lab slides lock clean

setup: $(STAMP)

# Everything comes from the lock, so two set-ups a month apart get the same versions: requirements/install.sh says
# how (torch first, alone, from TORCH_INDEX; then the lock without resolving; then the course's package). The
# SageMaker Studio lifecycle script (studio/on-start.sh) runs the same script.
$(STAMP): pyproject.toml $(LOCK) requirements/install.sh
	PYTHON="$(PYTHON)" TORCH_INDEX="$(TORCH_INDEX)" bash requirements/install.sh $(VENV)
	touch $(STAMP)

# Module 11's Slurm (requirements/slurm.sh): never fails; where it cannot run, module 11 runs everything else.
slurm:
	bash requirements/slurm.sh

course: $(STAMP) slurm
	$(BIN)/python -m fmlab course

# Each workshop path's sections only, in order, and its labs (fmlab.course.pathrun): a section that needs a skipped
# one's work fails here first.
paths: $(STAMP) slurm
	$(BIN)/python -m fmlab course --path one-day
	$(BIN)/python -m fmlab course --path two-day

lint: $(STAMP)
	$(BIN)/ruff check $(wildcard src tests benchmarks notebooks labs)

# Three workers, a test file each at a time (the files share nothing but the machine), the longest files first in
# tests/conftest.py's order (--no-loadscope-reorder); TEST_ARGS= runs it serially.
# Three, not one per core: much of the suite waits (collective timeouts, sandbox jobs polled, servers, a browser)
# rather than computes; on 2 cores the suite took 592 s with three workers against 688 s with two, and 489 s once
# the longest files went first (2026-11-25). Four workers: 798 s against 814 s for three on a clean clone, within a
# day's spread, and a timing check of lab 01 failed under the extra load (2026-11-27).
# Bytecode is written even where the environment asks Python not to (PYTHONDONTWRITEBYTECODE): otherwise each
# worker compiles and assertion-rewrites every test file again (collecting the suite: 17.0 CPU s a worker without
# bytecode, 13.1 with it; 2026-11-26).
TEST_ARGS ?= -n 3 --dist loadfile --no-loadscope-reorder --durations=15
test: $(STAMP) lint slurm
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest $(TEST_ARGS)

# For a change to one module: everything but the notebook runs, the browser, the multi-process tests and the slow
# ones (inductor compiles, model servers, training in a subprocess), on three workers as make test: under 2 minutes.
test-fast: $(STAMP) lint
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n 3 --dist loadfile --durations=8 \
	  -m "not notebook and not browser and not distributed and not slow"

# Registers this venv as the kernel "fmlab (Python 3.X)" for every Jupyter of this user (SageMaker Studio too),
# builds the decks if it can, and opens the course index. More server options: make lab LAB_ARGS="--port 8899".
LAB_ARGS ?=
lab: $(STAMP)
	$(BIN)/python -m ipykernel install --user --name fmlab \
	  --display-name "fmlab (Python $$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])'))"
	-$(BIN)/python -m fmlab slides
	$(BIN)/jupyter lab --ServerApp.root_dir=. $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS) notebooks/index.ipynb

slides: $(STAMP)
	$(BIN)/python -m fmlab slides

# Re-resolves the lock from pyproject.toml's ranges and requirements/pins.in with uv (one file for Python 3.11+ on
# Linux, macOS and Windows). LOCK_ARGS=--upgrade (the default) takes the newest versions in range; LOCK_ARGS= keeps
# the locked ones and only adds what pyproject.toml changed. The next make course / make test installs the new lock.
UV_VERSION ?= 0.13.9
LOCK_TOOL  := build/lock-tool
LOCK_ARGS  ?= --upgrade
lock:
	test -x $(LOCK_TOOL)/bin/uv || { $(or $(PYTHON),python3) -m venv $(LOCK_TOOL) && $(LOCK_TOOL)/bin/python -m pip install -q uv==$(UV_VERSION); }
	$(LOCK_TOOL)/bin/uv pip compile pyproject.toml requirements/pins.in --extra course --extra dev \
	  --universal --python-version 3.11 --excludes requirements/gpu-only.txt \
	  --custom-compile-command "make lock" $(LOCK_ARGS) -o $(LOCK)
	@echo "$(LOCK) written; re-check the course with: make course test"

clean:
	rm -rf build .pytest_cache
