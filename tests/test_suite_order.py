"""The suite's schedule under `make test`: the longest-first list names real files, and xdist keeps its order.

    .venv/bin/pytest tests/test_suite_order.py -q
"""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tests_conftest():
    """tests/conftest.py itself (`import conftest` may find another folder's conftest.py first)."""
    spec = importlib.util.spec_from_file_location("fmlab_tests_conftest", ROOT / "tests" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LONGEST_FIRST = _tests_conftest().LONGEST_FIRST


def test_every_longest_first_file_exists():
    missing = [name for name in LONGEST_FIRST if not (ROOT / "tests" / name).is_file()]
    assert not missing, f"tests/conftest.py LONGEST_FIRST names files that are gone: {missing}"
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_make_test_keeps_the_longest_first_order():
    args = re.search(r"^TEST_ARGS \?= (.*)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()
    assert "--dist" in args and args[args.index("--dist") + 1] == "loadfile"
    # without it xdist sorts the files by their number of tests, and the one-test notebook files go last
    assert "--no-loadscope-reorder" in args
