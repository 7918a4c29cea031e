"""The notebooks stay readable (issue 40): no sentence over 40 words (tests/reading_rule.py, which also holds every
executed notebook's generated markdown, in conftest's run_notebook), each "## " section opening with its point in one
bold line, and the three longest notebooks saying where to pause. Milliseconds: reads the notebooks' markdown.
"""

import json
import re
from pathlib import Path

import pytest
from reading_rule import LONGEST_WORDS, too_long

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PAUSES = {"07_gpt30b_sharded_training", "09_trainium_continuous_pretraining", "10_evaluate_export_and_serve"}


def markdown(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2] + p.stem[-8:])
def test_no_sentence_runs_over_forty_words(path):
    long = [s for cell in markdown(path) for s in too_long(cell)]
    assert not long, f"{path.name}: sentences over {LONGEST_WORDS} words: {long}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2] + p.stem[-8:])
def test_each_section_opens_with_its_point_in_bold(path):
    missing = []
    for cell in markdown(path):
        lines = cell.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("## "):
                after = next((x for x in lines[i + 1:] if x.strip()), "")
                if not after.startswith("**"):
                    missing.append(line)
    assert not missing, f"{path.name}: sections without a bold point line: {missing}"


@pytest.mark.parametrize("stem", sorted(PAUSES))
def test_the_longest_notebooks_say_where_to_pause(stem):
    pauses = [cell for cell in markdown(ROOT / "notebooks" / f"{stem}.ipynb") if "**Pause here.**" in cell]
    assert len(pauses) >= 2 and all(not re.search(r"\d", p) for p in pauses)
