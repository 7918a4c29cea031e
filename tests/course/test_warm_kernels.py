"""A kernel forked from the zygote (fmlab.course.warm_kernels) shows a notebook what a fresh kernel shows: its own
process, folder, environment and random draws; figures drawn inline; notebook progress bars; widgets' comm target.

    python -m pytest tests/course/test_warm_kernels.py
"""

import os

import nbformat
import pytest

from fmlab.course import warm_kernels
from fmlab.course.kernel_zygote import env_differences
from fmlab.course.run import BARE_FIGURE, bare_figures, execute

PROBE = """import os, random, sys
import numpy as np
import matplotlib.pyplot as plt
import tqdm.auto
import torch
from fmlab.course import record
record("pid", os.getpid())
record("cwd", os.getcwd())
record("path", sys.path)
record("argv0", os.path.basename(sys.argv[0]))
record("probe_variable", os.environ.get("FMLAB_PROBE"))
record("stdin", os.readlink("/proc/self/fd/0").split(":")[0])  # "pipe" from jupyter_client, or /dev/null
record("parent", os.environ.get("JPY_PARENT_PID") is not None)
record("draws", [random.random(), float(np.random.random())])
record("torch_threads", torch.get_num_threads())
record("progress_bar", [c.__module__ for c in tqdm.auto.tqdm.__mro__])
record("widget_target", "jupyter.widget" in get_ipython().kernel.comm_manager.targets if "ipywidgets" in sys.modules
       else "not imported")
record("backend", plt.get_backend())
plt.plot([1, 2, 3])
plt.show()"""
PER_PROCESS = {"pid", "draws", "stdin"}  # differ between two kernels (stdin: jupyter_client's pipe or /dev/null)


def probe(tmp_path, name):
    source = tmp_path / f"{name}.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)]), str(source))
    result = execute(source, tmp_path / f"{name}.out.ipynb")
    assert result.ok, result.error
    return result


@pytest.mark.notebook
def test_a_forked_kernel_shows_a_notebook_what_a_fresh_kernel_shows(tmp_path, monkeypatch):
    monkeypatch.setenv("FMLAB_PROBE", "first")
    before = vars(warm_kernels.counts).copy()
    first = probe(tmp_path, "first")
    monkeypatch.setenv("FMLAB_PROBE", "second")
    second = probe(tmp_path, "second")
    assert warm_kernels.counts.forked == before["forked"] + 2, warm_kernels.counts.exec_reasons  # not started afresh
    monkeypatch.setenv("TZ", "UTC")  # a variable the zygote's imports might have read: this kernel is exec'd
    fresh = probe(tmp_path, "fresh")
    assert warm_kernels.counts.execed == before["execed"] + 1 and "TZ" in warm_kernels.counts.exec_reasons

    assert first.records["probe_variable"] == "first" and second.records["probe_variable"] == "second"
    assert first.records["cwd"] == str(tmp_path) and "" in first.records["path"]
    for result in (first, second, fresh):  # not a file the kernel opened into a closed fd 0 (a daemon it starts
        assert result.records["stdin"] in ("pipe", "/dev/null")  # would then lose its log to /dev/null)
    assert first.records["pid"] != second.records["pid"] != fresh.records["pid"]
    assert first.records["draws"][0] != second.records["draws"][0]  # Python's random, reseeded after the fork
    assert first.records["draws"][1] != second.records["draws"][1]  # numpy's, reseeded by the zygote
    same = {k: v for k, v in fresh.records.items() if k not in PER_PROCESS | {"probe_variable"}}
    assert {k: first.records[k] for k in same} == same  # cwd, sys.path, argv, threads, bars, widgets, backend
    assert "tqdm.notebook" in fresh.records["progress_bar"]  # a kernel's bars are widgets
    assert fresh.records["backend"] == "module://matplotlib_inline.backend_inline"
    for result in (first, fresh):
        assert bare_figures(result.output) == []  # the plot is a PNG, not BARE_FIGURE's text
        outputs = nbformat.read(str(result.output), as_version=4).cells[0].outputs
        assert any("image/png" in out.get("data", {}) for out in outputs), BARE_FIGURE
    for result in (first, second, fresh):  # each kernel ended with its notebook
        with pytest.raises(ProcessLookupError):
            os.kill(result.records["pid"], 0)


def test_only_the_variables_a_kernel_owns_may_differ_from_the_zygotes():
    base = {"HOME": "/root", "OMP_NUM_THREADS": "1", "FMLAB_BACKEND": "local", "PATH": "/bin"}
    assert env_differences(base, {**base, "FMLAB_BACKEND": "sagemaker", "JPY_PARENT_PID": "7",
                                  "PYTHONSTARTUP": "/x.py"}) == []
    assert env_differences(base, {**base, "HOME": "/tmp/h", "MPLBACKEND": "agg"}) == ["HOME", "MPLBACKEND"]
    assert env_differences(base, {k: v for k, v in base.items() if k != "OMP_NUM_THREADS"}) == ["OMP_NUM_THREADS"]
    assert env_differences(base, {**base, "AWS_PROFILE": "prod"}) == ["AWS_PROFILE"]


def test_without_the_zygote_a_kernel_is_jupyter_clients_own(tmp_path, monkeypatch):
    monkeypatch.setenv("FMLAB_WARM_KERNELS", "0")
    source = tmp_path / "one.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os\nfrom fmlab.course import record\nrecord('parent', os.getppid())")]), str(source))
    before = (warm_kernels.counts.forked, warm_kernels.counts.execed, warm_kernels.counts.unforked)
    result = execute(source, tmp_path / "one.out.ipynb")
    assert result.ok, result.error
    assert result.records["parent"] == os.getpid()  # jupyter_client's child, not the zygote's
    assert (warm_kernels.counts.forked, warm_kernels.counts.execed, warm_kernels.counts.unforked) == before
