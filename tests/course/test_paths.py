"""The workshop paths (fmlab.course.paths), their minutes (fmlab.course.times) and the instructor's guide
(fmlab.course.guide): every section a path names exists, each path keeps the spine and each of its days fits
9:00-17:00, every generated part is up to date, and every figure the guide quotes is checked by its notebook's test.

    .venv/bin/pytest tests/course/test_paths.py -v
"""

import json
import re

import pytest

from fmlab.course import generate, guide, paths, room, times
from fmlab.environment import ROOT

SPINE = ("03_", "04_", "05_", "07_", "09_", "12_")


def test_the_paths_name_only_sections_that_exist_and_fit_their_days():
    assert paths.problems() == [] and room.problems() == []
    data = times.load()
    for path, days in room.DAYS.items():
        assert paths.total_minutes(path, data) <= days * (room.DAY_END - room.DAY_START), path
        assert all(b.start + b.minutes <= room.DAY_END + 1 for b in room.agenda(path, data)), path
        modules = [r.module for r in paths.rows(path, data)]
        assert all(any(m.startswith(s) for m in modules) for s in SPINE), (path, modules)
    assert paths.labs("one day", data) and "lab_12_capstone_plan" in paths.labs("one day", data)
    one, two, full = (paths.total_minutes(p, data) for p in paths.PATH_NAMES)
    assert one < two < full


def test_a_misnamed_section_or_a_path_off_target_is_reported(monkeypatch):
    monkeypatch.setitem(paths.CORE, "04_data_parallel", ("opening", "99"))
    monkeypatch.setitem(paths.ONE_DAY, "04_data_parallel", ("opening", "7"))
    found = paths.problems()
    assert any("names section '99'" in p for p in found)
    assert any("takes '7', which is not in its CORE" in p for p in found)
    monkeypatch.setitem(paths.LABS, "one day", ("lab_04_data_parallel", "lab_12_capstone_plan"))
    assert any("the one day path's day 1 holds" in p and "cut a section or a lab" in p for p in room.problems())


def test_the_generated_headers_tables_guide_and_deck_timings_are_up_to_date():
    stale = [p.relative_to(ROOT).as_posix() for p, text in generate.generated().items() if p.read_text() != text]
    assert stale == [], f"run python -m fmlab.course.generate: {stale}"
    assert times.stale() == [], "a notebook's sections changed: run make course, then python -m fmlab.course.times"


def test_every_notebook_opens_with_its_minutes_and_its_deep_dives():
    for source in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cell = json.loads(source.read_text())["cells"][1]
        text = "".join(cell["source"])
        assert cell["cell_type"] == "markdown" and paths.HEADER_MARK in text, source.name
        assert re.search(r"\*\*Time:\*\* one day: .+ · two days: .+ · full course: \d", text), text
    for deck in sorted((ROOT / "slides").glob("[0-9][0-9]_*.md")):
        first = deck.read_text().split("\n---\n")[0]
        assert re.search(r"^Timing: about \d+ min for these \d+ slides", first, re.M), deck.name


def test_the_minutes_follow_the_stated_method():
    section = {"title": "1. x", "words": 260, "code_cells": 3, "run_seconds": 90.0}
    assert times.minutes(section) == pytest.approx(260 / times.READING_WPM + 3 + 1.5)
    lab = {"cells": [{"cell_type": "code", "source": "def f():\n    ### BEGIN SOLUTION\n    a = 1\n\n    # why\n"
                                                       "    return a\n    ### END SOLUTION\n", "metadata": {}}]}
    assert times.answer_lines(lab) == 2
    assert times.lab_minutes(lab, exercises=1)["minutes"] == pytest.approx(
        round(times._words(lab["cells"][0]["source"]) / times.READING_WPM + 2 * times.LAB_MINUTES_PER_LINE, 1))


def test_every_figure_the_guide_quotes_is_checked_by_its_notebooks_test():
    quoted = guide.quoted_figures()
    tags = {tag for tag, _, _ in quoted}
    assert len(quoted) >= 30 and len(tags) >= 13
    calls = set()
    for test in (ROOT / "tests").rglob("test_*.py"):
        calls |= set(re.findall(r"assert_quoted\(\w+\.records, \"(nb\w+)\"\)", test.read_text()))
    assert tags <= calls, f"quoted with no test checking them: {sorted(tags - calls)}"


def test_a_changed_output_fails_the_guides_check():
    text = "[nb12 | nb12.sized/sized_days = 13] and [nb12 | nb12.checks/llama3 = 90.5%] and [nb12 | flag = True]"
    records = {"nb12.sized": {"sized_days": 13}, "nb12.checks": {"llama3": 0.9054}, "flag": True}
    assert guide.assert_quoted(records, "nb12", text) == 3
    with pytest.raises(AssertionError, match="the guide says 13, the notebook recorded 14"):
        guide.assert_quoted({**records, "nb12.sized": {"sized_days": 14}}, "nb12", text)
    with pytest.raises(AssertionError, match="recorded no 'flag'"):
        guide.assert_quoted({k: v for k, v in records.items() if k != "flag"}, "nb12", text)


def test_the_guide_lists_each_labs_hints_and_the_studio_instance():
    text = guide.GUIDE.read_text()
    for number in ("04", "05", "08", "12"):
        hints = guide.lab_hints(number)
        assert hints and all(h in text for h in hints), number
    memory = json.loads(guide.MEMORY_FILE.read_text())
    assert f"**{memory['peak_together_gib']:.2f} GiB** (benchmarks/course_memory.py" in text
    sessions = {p: json.loads(f.read_text()) for p, f in guide.SESSION_FILES.items()}
    assert all(s["kernels_open"] >= 8 and s["jupyterlab_alone_gib"] > 0 for s in sessions.values())
    need = max(s["peak_gib"] for s in sessions.values()) + guide.OS_GIB
    fits = [n for n, (gib, _) in guide.STUDIO_INSTANCES.items() if gib >= need]
    cheapest = min(fits, key=lambda n: guide.STUDIO_INSTANCES[n][1])
    assert f"Recommended: **{cheapest}**" in text
