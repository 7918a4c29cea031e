"""Shared test helpers: paths, and running a notebook with papermill to read back what it recorded.

`make test` runs the suite on three workers (pytest-xdist, one test file per worker at a time): the longest files
go first, then the other files that execute notebooks or start process groups, so no long file ends the run alone.
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

# The longest files, longest first (seconds of test time per file under `make test`, 2026-11-28, a clean clone;
# the two lab files share what test_labs.py and test_labs_unsolved.py took): xdist hands a file to whichever worker
# is free next, in this order (the Makefile's --no-loadscope-reorder keeps xdist from reordering by test count,
# which sent the one-test notebook files last and left a worker running alone for 86 s at the end).
LONGEST_FIRST = (
    "course/test_labs.py",                          # about 220 s
    "course/test_labs_second_half.py",              # about 220
    "train/test_faults.py",                         # 179
    "sandbox/test_sandbox_training.py",             # 149
    "train/test_notebooks_module08.py",             # 124
    "jobs/test_notebooks_module07.py",              # 103
    "course/test_browser.py",                       # 101
    "serve/test_notebooks_module10.py",             # 113 with two server settings, one now
    "parallel/test_notebooks_parallel.py",          # 94
    "train/test_notebooks_module08_retries.py",     # 71
    "jobs/test_jobs_notebooks.py",                  # 59
    "hyperpod/test_notebooks_module11.py",          # 58
    "train/test_gpu_step_benchmark.py",             # 52
    "serve/test_server.py",                         # 52
    "neuron/test_notebooks_module09.py",            # 51
    "plan/test_memory.py",                          # 50
    "sandbox/test_sandbox.py",                      # 49
    "train/test_train.py",                          # 46
    "plan/test_notebooks_module01.py",              # 42
    "parallel/test_notebooks_module04.py",          # 39
    "train/test_checkpoint_async.py",               # 38
    "course/test_lab03.py",                         # 38
    "hyperpod/test_without_slurm.py",               # 29
    "parallel/test_parallel_4proc.py",              # 27
    "train/test_loss.py",                           # 26
)


def pytest_collection_modifyitems(config, items):
    """Under xdist, the longest files first, then the other files with slow tests, then the rest (a stable sort:
    the order inside each file is kept)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker collects; the controller follows the workers' order
        slow_files = {item.path for item in items if any(item.get_closest_marker(m) for m in SLOW_MARKS)}
        rank = {ROOT / "tests" / name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: (rank.get(item.path, len(rank)), item.path not in slow_files))


@pytest.fixture(autouse=True)
def environment_restored():
    """Each test starts from the worker's environment. Library code run in a test sets variables in os.environ for
    the processes it starts (the Flight Recorder's buffer, tokenizers' parallelism, torch.compile's cache folder,
    a rank's RANK and MASTER_PORT); without this they would reach every later test in that worker, and every later
    notebook kernel and training process it starts."""
    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def run_notebook(tmp_path):
    """run_notebook("notebooks/01_when_to_pretrain.ipynb", param=value) -> NotebookResult (records, ok, error)."""
    from reading_rule import LONGEST_WORDS, generated_markdown, too_long

    from fmlab.course.run import execute

    def _run(relative: str, **parameters):
        source = ROOT / relative
        assert source.exists(), f"missing notebook {relative}"
        result = execute(source, tmp_path / source.name, parameters)
        if result.output.exists():  # what the code wrote for the learner to read follows the notebooks' rule
            long = [s for text in generated_markdown(result.output) for s in too_long(text)]
            assert not long, f"{relative}: generated sentences over {LONGEST_WORDS} words: {long}"
        return result

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


@pytest.fixture(scope="session")
def course_requests(tmp_path_factory):
    """Every course job's CreateTrainingJob request, captured once per test run (each capture is ~2 s of moto): under
    xdist the first worker to need them writes them, as JSON, beside the workers' temporary folders, and the others
    read that file (a lock file orders them). Tests read them; none may change them."""
    import fcntl
    import json

    from fmlab.course_jobs import COURSE_JOBS, course_request

    def capture():
        return {name: course_request(name) for name in COURSE_JOBS}

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return capture()
    shared = tmp_path_factory.getbasetemp().parent  # the same folder for every worker of this run
    cache = shared / "course_requests.json"
    with open(shared / "course_requests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cache.is_file():
            cache.write_text(json.dumps(capture()))
        return json.loads(cache.read_text())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """FMLAB_CPU_REPORT=file appends one JSON line per test: its wall seconds and the CPU seconds it spent, in this
    process and in the child processes it waited for (notebook kernels, torchrun and its workers, sandbox jobs)
    (benchmarks/suite_cpu.py sums them; the suite is CPU-bound on 2 cores, so CPU seconds, not wall seconds under
    contention, say what a change saves)."""
    report = os.environ.get("FMLAB_CPU_REPORT")
    if not report:
        yield
        return
    import json
    import resource
    import time

    def cpu(who):
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime

    start = (time.monotonic(), cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN))
    yield
    line = {"test": item.nodeid, "wall": round(time.monotonic() - start[0], 3),
            "cpu_self": round(cpu(resource.RUSAGE_SELF) - start[1], 3),
            "cpu_children": round(cpu(resource.RUSAGE_CHILDREN) - start[2], 3),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
    with open(report, "a") as f:
        f.write(json.dumps(line) + "\n")
