"""The course's reading rule (issue 40), shared by the notebooks' markdown test and every executed notebook's
generated markdown (tests/conftest.py's run_notebook): no sentence over LONGEST_WORDS words.

Sentences are counted block by block: headings, table rows and fenced code are skipped; blank lines, list items and
quote lines start new blocks; blocks split after '.', '?' or '!' (or the '**' closing a bold sentence) and a space.
A "Sources:" line is a list of references, not a sentence to read.
"""

import json
import re
from pathlib import Path

LONGEST_WORDS = 40


def sentences(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    out = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*] |\d+\. |> ))", text):
        prose = " ".join(line for line in block.splitlines() if not line.lstrip().startswith(("#", "|")))
        out += [s for s in re.split(r"(?<=[.?!])\s+|(?<=[.?!]\*\*)\s+", prose.strip()) if s.split()]
    return out


def too_long(text: str) -> list[str]:
    """The sentences of `text` over LONGEST_WORDS words (their first 80 characters)."""
    return [s[:80] for s in sentences(text) if len(s.split()) > LONGEST_WORDS and not s.lstrip().startswith("Sources:")]


def generated_markdown(executed: Path) -> list[str]:
    """The markdown an executed notebook's code displayed (IPython's Markdown outputs)."""
    cells = json.loads(Path(executed).read_text()).get("cells", [])
    return ["".join(out["data"]["text/markdown"]) for cell in cells for out in cell.get("outputs", [])
            if "text/markdown" in out.get("data", {})]
