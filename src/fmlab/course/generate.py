"""Write every generated part of the course from its sources (issue 56): run after a notebook's sections change.

    python -m fmlab.course.times build/executed   # first, when the sections or run times changed (make course)
    python -m fmlab.course.generate               # then: each notebook's header, README's paths table, the decks'
                                                  # timing notes, docs/instructor.md's generated blocks
    python -m fmlab.course.generate --check       # exit 1 when one of them is out of date (tests/course/test_paths.py)

The sources: the measured minutes (fmlab.course.times), the paths (fmlab.course.paths), the modules' one-line
summaries (fmlab.course.index.SUMMARIES), the guide's blocks (fmlab.course.guide). The course index
(notebooks/index.ipynb) has its own writer, `python -m fmlab.course.index`, which shows the same table.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from fmlab.course import guide, paths, times
from fmlab.course.index import SUMMARIES
from fmlab.environment import ROOT

TIMING = re.compile(r"^Timing: .*$", re.M)


def notebook_with_header(path: Path, data: dict) -> str:
    nb = json.loads(path.read_text())
    cell_id = paths.HEADER_ID.format(stem=path.stem[:40])
    text = paths.header(path.stem, SUMMARIES[path.stem[:2]], data)
    cell = {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": text.splitlines(True)}
    existing = [i for i, c in enumerate(nb["cells"]) if c.get("id") == cell_id]
    if existing:
        nb["cells"][existing[0]] = cell
    else:
        nb["cells"].insert(1, cell)  # after the title cell
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def readme_with_table(text: str, data: dict) -> str:
    block = f"{paths.README_BEGIN}\n{paths.table_markdown(data)}{paths.README_END}"
    if paths.README_BEGIN not in text:
        raise ValueError(f"README.md has no {paths.README_BEGIN} ... {paths.README_END} block for the paths table")
    pattern = re.escape(paths.README_BEGIN) + ".*?" + re.escape(paths.README_END)
    return re.sub(pattern, lambda _: block, text, flags=re.S)


def deck_with_timing(text: str, number: str, data: dict) -> str:
    """A deck with its first slide's speaker notes opening on a timing line: the deck's minutes and its
    notebooks' minutes on each path."""
    slides = text.count("\n---\n") + 1
    per = []
    for stem, sections in paths.notebook_sections(data).items():
        if stem.startswith(number + "_"):
            per += [f"{stem[:2]} {text}" for text in paths.per_path(stem, sections, " ")]
    line = (f"Timing: about {paths.fmt_minutes(slides * paths.SLIDE_MINUTES)} for these {slides} slides; the notebook: "
            f"{'; '.join(per)} (docs/instructor.md).")
    if TIMING.search(text):
        return TIMING.sub(lambda _: line, text, count=1)
    if "\nNote:\n" not in text.split("\n---\n")[0]:
        raise ValueError(f"deck {number}: its first slide has no 'Note:' block for the timing line")
    return text.replace("\nNote:\n", f"\nNote:\n{line}\n", 1)


def generated(root: Path = ROOT) -> dict[Path, str]:
    """Every file this module writes, with the text it should hold."""
    data = times.load()
    out = {p: notebook_with_header(p, data) for p in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
    readme = root / "README.md"
    out[readme] = readme_with_table(readme.read_text(), data)
    out[guide.GUIDE] = guide.render(guide.GUIDE.read_text(), data)
    for deck in sorted((root / "slides").glob("[0-9][0-9]_*.md")):
        out[deck] = deck_with_timing(deck.read_text(), deck.name[:2], data)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fmlab.course.generate", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if a generated part is stale")
    args = parser.parse_args(argv)
    from fmlab.course import room

    found = paths.problems() + room.problems()
    if found:
        print("\n".join(found), file=sys.stderr)
        return 1
    files = generated()
    stale = [p for p, text in files.items() if p.read_text() != text]
    if args.check:
        if stale:
            print(f"out of date: {', '.join(p.name for p in stale)}; run python -m fmlab.course.generate",
                  file=sys.stderr)
            return 1
        return 0
    for p in stale:
        p.write_text(files[p])
    for path in paths.PATH_NAMES:
        print(f"{path}: {paths.total_minutes(path) / 60:.1f} h with breaks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
