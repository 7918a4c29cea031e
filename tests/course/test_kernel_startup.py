"""fmlab.course.run starts each notebook's kernel with kernel_startup.py: the collector's thresholds raised, nothing
else in the notebook's namespace, the runner's own environment as it was."""

import os

import nbformat
import pytest

from fmlab.course.run import KERNEL_STARTUP, execute, kernel_startup

PROBE = """import gc, os
from fmlab.course import record
record("thresholds", list(gc.get_threshold()))
record("enabled", gc.isenabled())
record("names", sorted(n for n in globals() if not n.startswith("_") and n not in ("In", "Out", "exit", "quit",
       "get_ipython", "open", "gc", "os", "record")))  # open: ipykernel's own
record("startup", os.environ.get("PYTHONSTARTUP"))"""


@pytest.mark.notebook
def test_a_notebook_kernel_collects_less_often_and_sees_nothing_else(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONSTARTUP", raising=False)
    source = tmp_path / "probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)]), str(source))
    r = execute(source, tmp_path / "out.ipynb")
    assert r.ok, r.error
    assert r.records["thresholds"] == [50_000, 20, 10] and r.records["enabled"] is True
    assert r.records["names"] == []  # the start-up file defines no names in the notebook
    assert r.records["startup"] == str(KERNEL_STARTUP)
    assert "PYTHONSTARTUP" not in os.environ  # only while the notebook ran


def test_a_users_own_startup_file_is_kept(monkeypatch):
    monkeypatch.setenv("PYTHONSTARTUP", "/home/me/.pythonrc")
    with kernel_startup():
        assert os.environ["PYTHONSTARTUP"] == "/home/me/.pythonrc"
    assert os.environ["PYTHONSTARTUP"] == "/home/me/.pythonrc"
