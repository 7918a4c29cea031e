#!/usr/bin/env bash
# The course's one set-up: a virtual environment with every package at its locked version.
#
#   bash requirements/install.sh [VENV]        # VENV defaults to .venv, beside this folder
#
# Called by `make setup` (and so by `make course`/`make test`) and by the SageMaker Studio lifecycle script
# (studio/on-start.sh). Environment:
#   PYTHON       the interpreter that creates the venv; default: the newest of python3.13, 3.12, 3.11 that runs
#   TORCH_INDEX  where torch's wheel comes from first; default the CPU build
#                (https://download.pytorch.org/whl/cpu); a CUDA index on a GPU machine, or empty for PyPI's default
#
# It does nothing when VENV/.installed holds the hash of the lock and pyproject.toml it was built from, so a second
# start (Studio keeps the home folder) takes a second. Steps: torch alone, at the lock's version, from TORCH_INDEX
# (resolved later or unpinned it would pull several GB of CUDA wheels on Linux); every locked package without
# resolving again (--no-deps); the course's own package, whose resolution only adds what a CUDA torch needs beyond
# the lock; pip check.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv}"
LOCK="$ROOT/requirements/lock.txt"
STAMP="$VENV/.installed"
TORCH_INDEX="${TORCH_INDEX-https://download.pytorch.org/whl/cpu}"

want="$(cat "$LOCK" "$ROOT/pyproject.toml" | sha256sum | cut -c1-16) torch-index=$TORCH_INDEX"
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  echo "set-up: $VENV is already installed from this lock"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  if [ -z "${PYTHON:-}" ]; then
    for candidate in python3.13 python3.12 python3.11; do
      if "$candidate" -c 'import sys' >/dev/null 2>&1; then PYTHON="$candidate"; break; fi
    done
  fi
  if [ -z "${PYTHON:-}" ]; then
    echo "set-up: need python3.13, python3.12 or python3.11 on PATH; or set PYTHON=/path/to/python3.X" >&2
    exit 1
  fi
  if ! "$PYTHON" -c 'import sys' >/dev/null 2>&1; then
    echo "set-up: PYTHON=$PYTHON does not run; set PYTHON=/path/to/python3.11 or newer" >&2
    exit 1
  fi
  if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "set-up: $PYTHON is older than 3.11; set PYTHON=/path/to/python3.11 or newer" >&2
    exit 1
  fi
  echo "set-up: creating $VENV with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv "$VENV"
fi

PIP=("$VENV/bin/python" -m pip)
cd "$ROOT"
"${PIP[@]}" install -q -c "$LOCK" pip
"${PIP[@]}" install -q -c "$LOCK" --no-deps torch ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"}
"${PIP[@]}" install -q --no-deps -r "$LOCK"
"${PIP[@]}" install -q -c "$LOCK" --no-build-isolation -e ".[course,dev]"
"${PIP[@]}" check
echo "$want" > "$STAMP"
echo "set-up: $VENV installed from $LOCK"
