"""The suite's schedule under `make test`: the longest-first list names real files, and xdist keeps its order.

    .venv/bin/pytest tests/test_suite_order.py -q
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _longest_first(pytestconfig) -> tuple[str, ...]:
    """tests/conftest.py's list, from the conftest pytest loaded (`import conftest` may find another folder's)."""
    path = str(ROOT / "tests" / "conftest.py")
    conftest = next(p for p in pytestconfig.pluginmanager.get_plugins() if getattr(p, "__file__", None) == path)
    return conftest.LONGEST_FIRST


def test_every_longest_first_file_exists(pytestconfig):
    longest_first = _longest_first(pytestconfig)
    missing = [name for name in longest_first if not (ROOT / "tests" / name).is_file()]
    assert not missing, f"tests/conftest.py LONGEST_FIRST names files that are gone: {missing}"
    assert len(set(longest_first)) == len(longest_first)


def test_make_test_keeps_the_longest_first_order():
    args = re.search(r"^TEST_ARGS \?= (.*)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()
    assert "--dist" in args and args[args.index("--dist") + 1] == "loadfile"
    # without it xdist sorts the files by their number of tests, and the one-test notebook files go last
    assert "--no-loadscope-reorder" in args


def test_the_cpu_report_counts_a_tests_own_cpu_and_its_childrens(tmp_path):
    """FMLAB_CPU_REPORT (tests/conftest.py) and benchmarks/suite_cpu.py: a test that burns CPU in a child process it
    waits for is charged for it, one that sleeps is not."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "test_two.py").write_text(
        "import subprocess, sys, time\n"
        "def test_child_burns():\n"
        "    subprocess.run([sys.executable, '-c', 't = __import__(\"time\").process_time()\\n"
        "while __import__(\"time\").process_time() - t < 1.0: pass'], check=True)\n"
        "def test_sleeps():\n"
        "    time.sleep(0.5)\n")
    report = tmp_path / "cpu.jsonl"
    env = {**os.environ, "FMLAB_CPU_REPORT": str(report)}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["test"].split("::")[-1]: r for r in map(json.loads, report.read_text().splitlines())}
    assert rows["test_child_burns"]["cpu_children"] >= 0.9 and rows["test_sleeps"]["cpu_children"] == 0
    assert rows["test_sleeps"]["wall"] >= 0.5 > rows["test_sleeps"]["cpu_self"]
    summary = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "suite_cpu.py"), str(report)],
                             capture_output=True, text=True, timeout=60)
    assert summary.returncode == 0 and summary.stdout.startswith("2 tests, "), summary.stdout + summary.stderr
