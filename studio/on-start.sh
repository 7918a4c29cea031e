#!/bin/bash
# fmlab's lifecycle configuration for a SageMaker Studio JupyterLab space: paste this file as the space's (or the
# domain's default) JupyterLab lifecycle configuration. How to attach it: studio/README.md.
#
# On every start of the space it clones the course into the learner's home (once; a learner's edits are never
# touched), then sets up the course's kernel from the lock in the background and logs to ~/.fmlab-setup/setup.log.
# Studio stops a lifecycle script after 5 minutes ("Lifecycle configuration timeout", SageMaker developer guide,
# read 2026-11-24) and the first set-up takes longer, so the set-up runs under nohup, as AWS's own samples do; a
# later start finds the environment installed and finishes in seconds. ~/.fmlab-setup/status says where it stands.
set -euo pipefail

# Instructors: the course's git URL and branch (or tag) for the room.
FMLAB_REPO="${FMLAB_REPO:-https://github.com/your-org/fmlab.git}"
FMLAB_REF="${FMLAB_REF:-main}"
# Instructors: where the room's jobs run. "local" (the default: no AWS account needed, nothing is billed) or
# "sagemaker" (real training jobs on the space's execution role: set quotas and a budget first, docs/instructor.md).
FMLAB_BACKEND="${FMLAB_BACKEND:-local}"
FMLAB_DIR="${FMLAB_DIR:-$HOME/fmlab}"            # in the space's home volume, which Studio keeps between starts
FMLAB_LOG_DIR="${FMLAB_LOG_DIR:-$HOME/.fmlab-setup}"
export FMLAB_DIR FMLAB_LOG_DIR FMLAB_BACKEND

mkdir -p "$FMLAB_LOG_DIR"
if [ ! -d "$FMLAB_DIR/.git" ]; then
  echo "fmlab: cloning $FMLAB_REPO ($FMLAB_REF) into $FMLAB_DIR"
  git clone --quiet --depth 1 --branch "$FMLAB_REF" "$FMLAB_REPO" "$FMLAB_DIR"
fi
echo "starting" > "$FMLAB_LOG_DIR/status"
nohup bash "$FMLAB_DIR/studio/setup-space.sh" >> "$FMLAB_LOG_DIR/setup.log" 2>&1 &
echo "fmlab: set-up running in the background (pid $!); progress in $FMLAB_LOG_DIR/setup.log"
