#!/bin/bash
# The body of fmlab's Studio lifecycle script (studio/on-start.sh starts it under nohup): set up the course's
# virtual environment from the lock, register it as a Jupyter kernel, open the course index on the first start.
#
#   FMLAB_DIR=~/fmlab bash studio/setup-space.sh     # also by hand, in a Studio terminal, to redo the set-up
#
# Environment: FMLAB_DIR (the clone; default: this script's repository), FMLAB_VENV (default FMLAB_DIR/.venv),
# FMLAB_LOG_DIR (status file; default ~/.fmlab-setup), FMLAB_BACKEND (written into the kernels' environment when set),
# FMLAB_KERNEL_AS_PYTHON3 (default 1: the notebooks name the
# kernel "python3", so in a course space that name runs the course's environment; 0 registers only "fmlab"),
# PYTHON and TORCH_INDEX as requirements/install.sh reads them.
set -euo pipefail

FMLAB_DIR="${FMLAB_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
FMLAB_VENV="${FMLAB_VENV:-$FMLAB_DIR/.venv}"
FMLAB_LOG_DIR="${FMLAB_LOG_DIR:-$HOME/.fmlab-setup}"
STATUS="$FMLAB_LOG_DIR/status"
mkdir -p "$FMLAB_LOG_DIR"

failed() { echo "failed: $1 (details in $FMLAB_LOG_DIR/setup.log)" > "$STATUS"; echo "fmlab set-up failed: $1" >&2; }
trap 'failed "line $LINENO: $BASH_COMMAND"' ERR

echo "== fmlab set-up $(date -u +%Y-%m-%dT%H:%M:%SZ) in $FMLAB_DIR as $(id -un)"
echo "installing" > "$STATUS"
# SageMaker Distribution's Python is /opt/conda/bin/python (3.11 or newer in its current releases); install.sh
# takes the newest python3.11+ on PATH unless PYTHON is set.
if [ -z "${PYTHON:-}" ] && [ -x /opt/conda/bin/python3 ]; then export PYTHON=/opt/conda/bin/python3; fi
bash "$FMLAB_DIR/requirements/install.sh" "$FMLAB_VENV"

echo "registering" > "$STATUS"
version="$("$FMLAB_VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
# The room's backend goes into the kernel's environment: every notebook of the space runs with the instructor's choice.
backend=(); if [ -n "${FMLAB_BACKEND:-}" ]; then backend=(--env FMLAB_BACKEND "$FMLAB_BACKEND"); fi
"$FMLAB_VENV/bin/python" -m ipykernel install --user --name fmlab --display-name "fmlab (Python $version)" "${backend[@]}"
if [ "${FMLAB_KERNEL_AS_PYTHON3:-1}" = 1 ]; then
  "$FMLAB_VENV/bin/python" -m ipykernel install --user --name python3 --display-name "fmlab (Python $version)" \
    "${backend[@]}"
fi

# The workshop paths' own notebooks (their sections only), for a room: written once, a learner's edits kept.
for path in one-day two-day; do
  "$FMLAB_VENV/bin/python" -m fmlab course --path "$path" --write-only --output "$FMLAB_DIR/workshop/$path"
done

# The first start opens the course index: a JupyterLab workspace with it open, imported only when the learner has
# no workspace of their own yet. Paths are relative to the server's root, the home folder in Studio.
workspaces="$HOME/.jupyter/lab/workspaces"
if ! ls "$workspaces"/default-*.jupyterlab-workspace >/dev/null 2>&1; then
  index="$(realpath --relative-to="$HOME" "$FMLAB_DIR/notebooks/index.ipynb")"
  "$FMLAB_VENV/bin/python" - "$index" "$FMLAB_LOG_DIR/workspace.json" <<'PY'
import json, sys
index, out = sys.argv[1], sys.argv[2]
widget = f"notebook:{index}"
layout = {"main": {"dock": {"type": "tab-area", "currentIndex": 0, "widgets": [widget]}, "current": widget}}
json.dump({"data": {"layout-restorer:data": layout, widget: {"data": {"path": index, "factory": "Notebook"}}},
           "metadata": {"id": "default"}}, open(out, "w"), indent=1)
PY
  "$FMLAB_VENV/bin/jupyter" lab workspaces import --name default "$FMLAB_LOG_DIR/workspace.json"
fi

echo "ready: kernel fmlab (Python $version), $FMLAB_VENV; open $FMLAB_DIR/notebooks/index.ipynb" > "$STATUS"
echo "== fmlab set-up done $(date -u +%Y-%m-%dT%H:%M:%SZ)"
