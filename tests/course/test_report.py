"""The course report: status, seconds and recorded figures per notebook and lab, with links to rendered outputs.

    .venv/bin/pytest tests/course/test_report.py -v

A tiny course (one notebook that records figures, one lab solution that raises) is executed with papermill in
a temporary folder, and `fmlab course --only 01_when_to_pretrain` runs the real module 1 end to end.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from fmlab.cli import main
from fmlab.course.records import read_records
from fmlab.course.report import (
    ASSETS_FOLDER,
    format_value,
    render_notebook,
    results_from_folder,
    write_report,
)
from fmlab.course.run import run_course

pytestmark = pytest.mark.notebook

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def _notebook(path: Path, *sources: str) -> None:
    nb = new_notebook(metadata={"kernelspec": KERNELSPEC})
    params = new_code_cell("scale = 1.0")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [new_markdown_cell("# fixture with math: $e^{i\\pi} + 1 = 0$"), params] + [new_code_cell(s) for s in sources]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


class _Report(HTMLParser):
    """Rows of the report: {notebook: {"cells": [text per <td>], "links": [href]}}."""

    def __init__(self):
        super().__init__()
        self.rows: dict[str, dict] = {}
        self._row = None
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-notebook" in attrs:
            self._row = self.rows.setdefault(attrs["data-notebook"], {"cells": [], "links": []})
        elif self._row is not None and tag == "td":
            self._depth += 1
            if self._depth == 1:
                self._row["cells"].append("")
        elif self._row is not None and tag == "a":
            self._row["links"].append(attrs["href"])

    def handle_endtag(self, tag):
        if self._row is not None and tag == "td":
            self._depth -= 1
        elif tag == "table" and self._depth == 0:
            self._row = None

    def handle_data(self, data):
        if self._row is not None and self._depth >= 1:
            self._row["cells"][-1] += data + " "


def _parse(report: Path) -> dict[str, dict]:
    parser = _Report()
    parser.feed(report.read_text())
    return parser.rows


@pytest.fixture(scope="module")
def tiny_course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    _notebook(root / "notebooks" / "01_tiny.ipynb",
              "import os\nfrom fmlab.course.records import record\nprint('hello from the tiny course')\n"
              "print('torch threads:', os.environ.get('OMP_NUM_THREADS'))",
              "record('days', 12.34 * scale)\nrecord('cost_usd', 1234567.0)\nrecord('speedup', {'2': 1.93, '4': 3.71})\n"
              "record('fits', True)")
    _notebook(root / "labs" / "solutions" / "lab_01_tiny.ipynb",
              "from fmlab.course.records import record\nrecord('lab.ex1', True)", "raise ValueError('boom in the lab')")
    results = run_course(output=root / "build" / "executed", root=root)
    report = write_report(results, root / "build" / "course-report.html")
    return root, results, report


def test_report_has_status_seconds_figures_and_links(tiny_course):
    root, results, report = tiny_course
    rows = _parse(report)
    assert list(rows) == ["01_tiny.ipynb", "lab_01_tiny.ipynb"]
    for result in results:
        name, kind, status, seconds, minutes, figures, _ = rows[result.source.name]["cells"]
        assert minutes.strip() == "- / - / -"  # the fixture's notebooks are on no path
        assert status.strip() == ("ok" if result.ok else "FAILED")
        assert seconds.strip() == f"{result.seconds:.1f}"
        for key, value in result.records.items():
            assert key in figures and format_value(value) in figures
        assert kind.strip() == ("lab" if result.source.name.startswith("lab_") else "notebook")
        (link,) = rows[result.source.name]["links"]
        page = (report.parent / link).resolve()
        assert page == result.output.with_suffix(".html").resolve() and page.is_file()
    notebook_row = rows["01_tiny.ipynb"]["cells"]
    assert "12.34" in notebook_row[5] and "1,234,567" in notebook_row[5] and "{2: 1.93, 4: 3.71}" in notebook_row[5]
    assert "ValueError: boom in the lab" in rows["lab_01_tiny.ipynb"]["cells"][0]
    assert "hello from the tiny course" in (root / "build" / "executed" / "notebooks" / "01_tiny.html").read_text()
    assert "1/2 ok" in report.read_text()


class _Loads(HTMLParser):
    """What a page loads: the src of <script>, <img>, <iframe> and the href of <link>."""

    def __init__(self):
        super().__init__()
        self.loads: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "img", "iframe") and attrs.get("src"):
            self.loads.append(attrs["src"])
        elif tag == "link" and attrs.get("href"):
            self.loads.append(attrs["href"])


def _loads(page: Path) -> list[str]:
    parser = _Loads()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.loads


REMOTE = re.compile(r"^(https?:)?//")


def test_the_report_and_its_notebook_pages_load_nothing_from_the_network(tiny_course):
    root, results, report = tiny_course
    pages = [report] + [r.output.with_suffix(".html") for r in results]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"<script[^>]+src=[\"']?(https?:)?//", text), f"{page.name} loads a remote script"
        assert not re.search(r"<link[^>]+href=[\"']?(https?:)?//", text), f"{page.name} loads a remote stylesheet"
        assert not re.search(r"import[^;]+from\s+[\"']https?://", text), f"{page.name} imports a remote module"
        for url in _loads(page):
            assert not REMOTE.match(url), f"{page.name} loads {url}"
            assert (page.parent / url).is_file(), f"{page.name} loads {url}, which is not there"
    notebook_page = results[0].output.with_suffix(".html").read_text(encoding="utf-8")
    assert "cdnjs" not in notebook_page and "MathJax" not in notebook_page and "require.min.js" not in notebook_page
    assert "$e^{i\\pi} + 1 = 0$" in notebook_page  # the TeX is there for KaTeX to typeset
    katex = report.parent / ASSETS_FOLDER / "katex" / "dist" / "katex.min.js"
    if katex.is_file():  # vendored (the pinned tarball could be had): the page loads it, relative to itself
        page = results[0].output.with_suffix(".html")
        assert os.path.relpath(katex, page.parent).replace(os.sep, "/") in _loads(page)
    elif os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail("KaTeX could not be vendored for the report under CI (npm pack katex, or build/vendor/)")


def test_without_katex_the_page_is_still_offline(tiny_course, tmp_path):
    _, results, _ = tiny_course
    copy = tmp_path / "copy.ipynb"
    copy.write_bytes(results[0].output.read_bytes())
    page = render_notebook(copy, katex=None)
    assert [u for u in _loads(page) if REMOTE.match(u)] == []
    assert "katex" not in page.read_text(encoding="utf-8")


def test_report_can_be_rebuilt_from_the_executed_notebooks(tiny_course):
    root, results, _ = tiny_course
    again = results_from_folder(root / "build" / "executed")
    assert [r.output.name for r in again] == [r.output.name for r in results]
    for before, after in zip(results, again, strict=True):
        assert (after.ok, after.records) == (before.ok, before.records)
        assert 0 < after.seconds <= before.seconds  # papermill's own duration sits inside our wall time
    assert again[1].error == "ValueError: boom in the lab"
    with pytest.raises(FileNotFoundError, match="run `python -m fmlab course` first"):
        results_from_folder(root / "nowhere")


@pytest.mark.parametrize("value, shown", [
    (True, "yes"), (False, "no"), (29_974_432_768, "29,974,432,768"), (592065.4, "592,065"), (40.912, "40.91"),
    (0.41853, "0.4185"), (5.65e22, "5.650e+22"), (2e-5, "2.000e-05"), ({"8": 81.8, "16": 40.9}, "{8: 81.8, 16: 40.9}"),
    ([1, 2.5], "[1, 2.5]"), ("continue pretraining", "continue pretraining"),
])
def test_format_value(value, shown):
    assert format_value(value) == shown


def test_fmlab_course_writes_the_report_with_module_1_figures(tmp_path, capfd):
    report = tmp_path / "report.html"
    code = main(["course", "--only", "01_when_to_pretrain", "--no-labs", "--output", str(tmp_path / "executed"),
                 "--report", str(report)])
    out, err = capfd.readouterr()
    assert code == 0, out
    assert f"report: {report}" in out
    executed = tmp_path / "executed" / "notebooks" / "01_when_to_pretrain.ipynb"
    records = read_records(executed)
    (row,) = _parse(report).values()
    assert row["cells"][2].strip() == "ok"
    for key in ("target_days", "target_cost_usd"):  # days and cost of module 1, as the notebook computed them
        assert key in row["cells"][5] and format_value(records[key]) in row["cells"][5]
    one_day, two_days, full = row["cells"][4].strip().split(" / ")  # its minutes on each path ('-': not on it)
    assert one_day == "-" and 0 < float(two_days) < float(full)  # the one-day path leaves module 1 to the capstone
    assert (tmp_path / "executed" / "notebooks" / "01_when_to_pretrain.html").is_file()
    # quiet: the output is the log's path (once), the progress line, the table and the report; the kernel's
    # stderr (ipykernel warns that it runs over TCP without encryption) is in the log, not on the terminal
    log = tmp_path / "course.log"
    assert out.count(str(log)) == 1 and "[1/1] notebooks/01_when_to_pretrain.ipynb ... ok" in out
    assert "without encryption" not in out + err and err == ""
    assert "without encryption" in log.read_text()


def test_two_at_a_time_gives_the_same_results_in_course_order(tiny_course, monkeypatch):
    import os

    root, serial, _ = tiny_course
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # as from a plain shell (make test's workers set it)
    parallel = run_course(output=root / "build" / "executed-2", root=root, jobs=2)
    assert [r.source for r in parallel] == [r.source for r in serial]
    assert [(r.ok, r.records, r.error) for r in parallel] == [(r.ok, r.records, r.error) for r in serial]
    # each kernel got half the cores as torch threads, and this process's environment was left alone
    assert f"torch threads: {max(1, (os.cpu_count() or 1) // 2)}" in parallel[0].output.read_text()
    assert "OMP_NUM_THREADS" not in os.environ
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        run_course(output=root / "build" / "none", root=root, jobs=0)
