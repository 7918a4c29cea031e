"""Each workshop path runs as its learners run it (fmlab.course.pathrun): only its sections, in order, each needing
only the path's sections before it; clean-up and the two-minute check on every path, and every check answered from
a section the path takes. The executed run is `make paths` (CI runs it after the suite); these checks run nothing.

    .venv/bin/pytest tests/course/test_pathrun.py -v
"""

import json
import re

import pytest

from fmlab.course import checks, pathrun, paths, room
from fmlab.course.section import forget, once
from fmlab.environment import ROOT


@pytest.mark.parametrize("path", ["one-day", "two-day"])
def test_no_section_of_a_path_reads_a_name_only_a_skipped_section_binds(path):
    assert pathrun.path_problems(path) == []


def test_a_name_bound_only_in_a_skipped_section_is_found():
    cell = lambda text: {"cell_type": "code", "source": text, "metadata": {}}  # noqa: E731
    heading = lambda text: {"cell_type": "markdown", "source": text, "metadata": {}}  # noqa: E731
    notebook = {"cells": [cell("import os"), heading("## 1. Build"), cell("runs = {1: os.sep}"),
                          heading("## 2. Use"), cell("def later():\n    return undefined_until_called\n"),
                          cell("print(runs[1], [x for x in range(2)])")]}
    assert pathrun.undefined_names(notebook) == []
    cut = pathrun.path_notebook(notebook, "one day", "x")  # the stem is not on the path: only kept tags survive
    assert cut["cells"] == []
    notebook["cells"].insert(5, {**cell("print(1)"), "metadata": {"tags": ["check"]}})
    assert len(pathrun.path_notebook(notebook, "one day", "x")["cells"]) == 1
    skipped = {"cells": [notebook["cells"][0], *notebook["cells"][3:]]}
    assert pathrun.undefined_names(skipped) == [(4, "runs")]


def test_every_notebook_keeps_its_check_and_clean_up_cells_on_every_path():
    for path in ("one day", "two days"):
        for nb in pathrun.path_notebooks(path):
            cut = pathrun.path_notebook(json.loads(nb.read_text()), path, nb.stem)
            text = ["".join(c["source"]) for c in cut["cells"]]
            assert any(f'two_minute_check("{nb.stem}")' in t for t in text), (path, nb.stem)
            if nb.stem.startswith("03_"):
                assert any("jobs.cleanup(backend)" in t for t in text), path


def test_every_check_reads_records_a_path_section_writes():
    for path in ("one day", "two days"):
        for nb in pathrun.path_notebooks(path):
            cut = pathrun.path_notebook(json.loads(nb.read_text()), path, nb.stem)
            written = set(re.findall(r'record\("([^"]+)"', "".join("".join(c["source"]) for c in cut["cells"])))
            read = checks.records_read(nb.stem)
            assert read <= written, f"{path}, {nb.stem}: its check reads {sorted(read - written)}, which it skips"


def test_the_rooms_cuts_leave_every_later_section_runnable():
    assert room.cut_problems() == []


def test_once_builds_a_value_once_per_kernel():
    forget("test value")
    built = []
    assert once("test value", lambda: built.append(1) or 41) == 41
    assert once("test value", lambda: built.append(2) or 42) == 41 and built == [1]
    forget("test value")
    assert once("test value", lambda: 43) == 43


def test_a_bad_path_name_says_which_exist(tmp_path):
    with pytest.raises(ValueError, match="--path must be one-day or two-day, not 'half-day'"):
        pathrun.path_name("half-day")
    written = pathrun.write_path("one-day", tmp_path)
    assert [p.stem for p in written] == [p.stem for p in pathrun.path_notebooks("one day")]
    written[0].write_text("{}")  # the learner's own copy
    assert pathrun.write_path("one-day", tmp_path, overwrite=False) == [] and written[0].read_text() == "{}"
    assert all(p.stem in paths.ONE_DAY for p in written)
    assert not (ROOT / "workshop" / "one-day" / "x").exists()


def test_the_guide_marks_every_figure_a_path_does_not_print():
    from fmlab.course import guide

    text = guide.GUIDE.read_text()
    off = guide.off_path_figures()
    assert off, "no quoted figure comes from a deep dive: the check below would test nothing"
    for tag, record_path, section in off:
        at = text.index(f"[{tag} | {record_path} =")
        sentence = text[max(text.rfind(". ", 0, at), text.rfind(".\n", 0, at)) + 1:at]
        assert "deep dive" in sentence, f"{tag} {record_path} (section {section}) is not marked as a deep dive"


def test_every_section_heading_starts_its_own_cell():
    """A `##` heading inside a markdown cell would hand the prose before it to the next section on a path."""
    from fmlab.course.times import HEADING

    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
            text = "".join(cell["source"])
            if cell["cell_type"] == "markdown" and HEADING.search(text):
                assert len(HEADING.findall(text)) == 1 and text.lstrip().startswith("## "), f"{nb.name} cell {i}"
