"""The notebooks stay readable (issue 40): no sentence over 40 words, each "## " section opening with its point in
one bold line, and the three longest notebooks saying where to pause. Milliseconds: reads the notebooks' markdown.

Sentences are counted block by block: headings, table rows and fenced code are skipped; blank lines, list items and
quote lines start new blocks; blocks split after '.', '?' or '!' (or the '**' closing a bold sentence) and a space.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LONGEST_WORDS = 40
PAUSES = {"07_gpt30b_sharded_training", "09_trainium_continuous_pretraining", "10_evaluate_export_and_serve"}


def markdown(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"]


def sentences(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    out = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*] |\d+\. |> ))", text):
        prose = " ".join(line for line in block.splitlines() if not line.lstrip().startswith(("#", "|")))
        out += [s for s in re.split(r"(?<=[.?!])\s+|(?<=[.?!]\*\*)\s+", prose.strip()) if s.split()]
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2] + p.stem[-8:])
def test_no_sentence_runs_over_forty_words(path):
    long = [s[:80] for cell in markdown(path) for s in sentences(cell)
            if len(s.split()) > LONGEST_WORDS and not s.lstrip().startswith("Sources:")]
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
