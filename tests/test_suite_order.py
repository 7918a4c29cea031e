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
