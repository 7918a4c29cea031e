"""Shared test helpers: paths, and running a notebook with papermill to read back what it recorded.

`make test` runs the suite on three workers (pytest-xdist, one test file per worker at a time): the files that
execute notebooks or start process groups go first, so the longest ones do not end the run alone.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SLOW_MARKS = ("notebook", "distributed", "browser")

if os.environ.get("PYTEST_XDIST_WORKER"):  # under make test's workers, before anything imports torch
    from fmlab.environment import share_cores

    share_cores(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


# The longest files (make test's --durations, 2026-11-24), started first so that none ends the run alone.
LONGEST_FIRST = ("course/test_labs.py", "course/test_labs_unsolved.py", "jobs/test_notebooks_module07.py",
                 "serve/test_notebooks_module10.py", "jobs/test_jobs_notebooks.py", "train/test_notebooks_module08.py",
                 "train/test_notebooks_module08_retries.py", "hyperpod/test_notebooks_module11.py")


def pytest_collection_modifyitems(config, items):
    """Under xdist, the longest files first, then the other files with slow tests, then the rest (a stable sort:
    the order inside each file is kept)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker collects; the controller follows the workers' order
        slow_files = {item.path for item in items if any(item.get_closest_marker(m) for m in SLOW_MARKS)}
        rank = {ROOT / "tests" / name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: (rank.get(item.path, len(rank)), item.path not in slow_files))


@pytest.fixture
def run_notebook(tmp_path):
    """run_notebook("notebooks/01_when_to_pretrain.ipynb", param=value) -> NotebookResult (records, ok, error)."""
    from fmlab.course.run import execute

    def _run(relative: str, **parameters):
        source = ROOT / relative
        assert source.exists(), f"missing notebook {relative}"
        return execute(source, tmp_path / source.name, parameters)

    return _run


@pytest.fixture
def local_env(tmp_path, monkeypatch):
    """A fresh local bucket and sandbox (2 CPU slots) under tmp_path, and the local backend."""
    monkeypatch.setenv("FMLAB_LOCAL_BUCKET", str(tmp_path / "bucket"))
    monkeypatch.setenv("FMLAB_SANDBOX_DIR", str(tmp_path / "sandbox"))
    monkeypatch.setenv("FMLAB_SANDBOX_CPUS", "2")
    monkeypatch.setenv("FMLAB_BACKEND", "local")
    return tmp_path


AWS_IDENTITY_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN",
                          "FMLAB_BACKEND", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                          "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE",
                          "SAGEMAKER_INTERNAL_IMAGE_URI")


@pytest.fixture
def no_aws_credentials(monkeypatch, tmp_path):
    """A new learner's machine: no AWS credentials anywhere (variables, files, home), an empty sandbox and bucket."""
    for var in AWS_IDENTITY_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("FMLAB_SANDBOX_DIR", str(tmp_path / "sandbox"))
    monkeypatch.setenv("FMLAB_LOCAL_BUCKET", str(tmp_path / "bucket"))
    return tmp_path
