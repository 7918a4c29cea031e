# fmlab: one command runs the course, one passes the tests (see README.md).
#   make course   set up .venv, execute every notebook and lab solution headless, print a table
#   make test     set up .venv, lint, run the whole test suite
#   make lab      open JupyterLab on the course
#   make slides   build the slide decks to reveal.js HTML under build/slides/

PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TORCH  := torch==2.13.0

.PHONY: setup course test lint lab slides clean

setup: $(STAMP)

# torch first, pinned: an unpinned torch (or a range resolved before it) pulls several GB of CUDA wheels.
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (Python 3.11+); set PYTHON=..."; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e ".[course,dev]"
	touch $(STAMP)

course: $(STAMP)
	$(BIN)/python -m fmlab course

lint: $(STAMP)
	$(BIN)/ruff check $(wildcard src tests benchmarks notebooks labs)

test: $(STAMP) lint
	$(BIN)/python -m pytest

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

clean:
	rm -rf build .pytest_cache
