"""fmlab.environment.share_cores: concurrent runs (test workers, notebook kernels) split the cores as torch threads.

Run: .venv/bin/pytest tests/test_share_cores.py -q   (milliseconds)
"""

import os

import pytest

from fmlab.environment import share_cores


def test_each_share_gets_its_part_of_the_cores_and_a_setting_already_made_wins(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert share_cores(2) == 4 and os.environ["OMP_NUM_THREADS"] == "4"
    assert share_cores(1) == 4  # set already: kept (a user's OMP_NUM_THREADS is never overridden)
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert share_cores(16) == 1  # never fewer than one thread


def test_no_share_is_a_clear_error():
    with pytest.raises(ValueError, match="ways must be at least 1"):
        share_cores(0)
