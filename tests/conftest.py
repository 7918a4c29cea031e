"""Shared test helpers: paths, and running a notebook with papermill to read back what it recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def run_notebook(tmp_path):
    """run_notebook("notebooks/01_when_to_pretrain.ipynb", param=value) -> NotebookResult (records, ok, error)."""
    from fmlab.course import execute

    def _run(relative: str, **parameters):
        source = ROOT / relative
        assert source.exists(), f"missing notebook {relative}"
        return execute(source, tmp_path / source.name, parameters)

    return _run
