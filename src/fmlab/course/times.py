"""Minutes per section of every notebook, and per lab, by a stated method (the workshop paths read them).

    python -m fmlab.course.times build/executed     # measure from executed notebooks; write TIMES_FILE
    python -m fmlab.course.times --check            # exit 1 when a notebook's sections differ from TIMES_FILE's

A notebook's sections are its level-2 headings (`## ...`); what comes before the first is its "opening" (title,
parameters, imports). For each section:
- reading: its markdown's and its code's words at READING_WPM words a minute;
- working: WORK_MINUTES_PER_CODE_CELL per code cell (run it, read its output, look at its figure);
- waiting: the cell run times papermill recorded in the executed notebook (`make course` on the 2-core machine).
A lab: reading and waiting as above, plus LAB_MINUTES_PER_LINE per line of the solution's answer blocks
(`fmlab.course.labgen`'s count); a lab written by hand (07, 08: no answer blocks) counts LAB_MINUTES_PER_EXERCISE
per exercise. What the estimate leaves out: discussion, breaks, a learner who types slowly or debugs beyond the
checks' hints, and the environment's set-up. METHOD says so wherever the minutes are shown.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from fmlab.course.labgen import BEGIN, END
from fmlab.environment import ROOT

TIMES_FILE = ROOT / "docs" / "measurements" / "course-times.json"
READING_WPM = 130
WORK_MINUTES_PER_CODE_CELL = 1.0
LAB_MINUTES_PER_LINE = 1.0
LAB_MINUTES_PER_EXERCISE = 20.0  # the two labs written by hand (no answer blocks to count)
OPENING = "opening"
METHOD = (f"reading at {READING_WPM} words a minute, {WORK_MINUTES_PER_CODE_CELL:g} minute per code cell, and the "
          f"cells' run times on a 2-core machine; labs add {LAB_MINUTES_PER_LINE:g} minute per line of the answer "
          f"({LAB_MINUTES_PER_EXERCISE:g} per exercise where the lab has no answer blocks). Leaves out discussion, "
          "breaks, slow typing, debugging beyond the checks' hints, and the set-up")
HEADING = re.compile(r"^##\s+(.+?)\s*$", re.MULTILINE)


def cell_text(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _words(text: str) -> int:
    return len(re.findall(r"[A-Za-z0-9][\w'.,-]*", text))


def _run_seconds(cell) -> float:
    return float(cell.get("metadata", {}).get("papermill", {}).get("duration") or 0.0)


def sections(notebook: dict, ran: dict | None = None) -> list[dict]:
    """The notebook's sections in order: title, words, code cells, run seconds (read from the executed notebook
    `ran`, cell by cell id; 0 where it was not executed)."""
    seconds = {c.get("id"): _run_seconds(c) for c in (ran or notebook)["cells"]}
    out = [{"title": OPENING, "words": 0, "code_cells": 0, "run_seconds": 0.0}]
    for cell in notebook["cells"]:
        text = cell_text(cell)
        heading = HEADING.search(text) if cell["cell_type"] == "markdown" else None
        if heading:
            out.append({"title": heading.group(1), "words": 0, "code_cells": 0, "run_seconds": 0.0})
        if "parameters" in cell.get("metadata", {}).get("tags", []) or \
                "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            continue
        out[-1]["words"] += _words(text)
        if cell["cell_type"] == "code":
            out[-1]["code_cells"] += 1
            out[-1]["run_seconds"] += seconds.get(cell.get("id"), 0.0)
    return out


def minutes(section: dict) -> float:
    return (section["words"] / READING_WPM + WORK_MINUTES_PER_CODE_CELL * section["code_cells"]
            + section["run_seconds"] / 60)


def answer_lines(notebook: dict) -> int:
    """Lines the learner writes: the non-blank, non-comment lines between the solution's markers."""
    lines, inside = 0, False
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        for line in cell_text(cell).split("\n"):
            if BEGIN.match(line):
                inside = True
            elif END.match(line):
                inside = False
            elif inside and line.strip() and not line.strip().startswith("#"):
                lines += 1
    return lines


def writing_minutes(answer_lines: int, exercises: int) -> float:
    """A reader's minutes writing a lab's answer: a minute a line, or per exercise where it has no answer blocks."""
    return answer_lines * LAB_MINUTES_PER_LINE if answer_lines else exercises * LAB_MINUTES_PER_EXERCISE


def lab_minutes(solution: dict, exercises: int, ran: dict | None = None) -> dict:
    """A lab's minutes: reading, the answer's lines (or its exercises), the checks' run times (from `ran`, the
    executed solution)."""
    words = sum(_words(cell_text(c)) for c in solution["cells"])
    run = sum(_run_seconds(c) for c in (ran or solution)["cells"])
    lines = answer_lines(solution)
    writing = writing_minutes(lines, exercises)
    return {"words": words, "answer_lines": lines, "exercises": exercises, "run_seconds": round(run, 1),
            "minutes": round(words / READING_WPM + writing + run / 60, 1)}


def _exercises(lab_stem: str) -> int:
    import importlib

    number = re.match(r"lab_(\d+[a-z]?)_", lab_stem).group(1)
    return len(importlib.import_module(f"fmlab.labs.lab{number}").LAB.exercises)


def measure(executed: Path, root: Path = ROOT) -> dict:
    """Every notebook's sections and every lab's minutes, run times read from `executed` (make course's output:
    notebooks/ and labs/ inside it; a notebook not found there counts no run time)."""
    notebooks, labs = {}, {}
    for source in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        ran = executed / "notebooks" / source.name
        rows = sections(json.loads(source.read_text()), json.loads(ran.read_text()) if ran.exists() else None)
        notebooks[source.stem] = [{**r, "run_seconds": round(r["run_seconds"], 1), "minutes": round(minutes(r), 1)}
                                  for r in rows]
    for source in sorted((root / "labs" / "solutions").glob("lab_*.ipynb")):
        ran = executed / "labs" / source.name
        labs[source.stem] = lab_minutes(json.loads(source.read_text()),
                                        _exercises(source.stem), json.loads(ran.read_text()) if ran.exists() else None)
    return {"method": METHOD, "measured_from": str(executed), "notebooks": notebooks, "labs": labs}


def load(path: Path = TIMES_FILE) -> dict:
    return json.loads(Path(path).read_text())


def stale(root: Path = ROOT, path: Path = TIMES_FILE) -> list[str]:
    """Notebooks whose section titles differ from the times file's (their minutes must be measured again)."""
    recorded, out = load(path)["notebooks"], []
    for source in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        titles = [s["title"] for s in sections(json.loads(source.read_text()))]
        if [s["title"] for s in recorded.get(source.stem, [])] != titles:
            out.append(source.stem)
    return out + [stem for stem in recorded if not (root / "notebooks" / f"{stem}.ipynb").exists()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fmlab.course.times", description=__doc__.split("\n")[0])
    parser.add_argument("executed", nargs="?", default="build/executed", help="make course's output folder")
    parser.add_argument("--check", action="store_true", help="only compare the sections with the times file")
    args = parser.parse_args(argv)
    if args.check:
        differ = stale()
        if differ:
            print(f"sections changed since {TIMES_FILE.relative_to(ROOT)} was measured: {', '.join(differ)}; "
                  "run make course, then python -m fmlab.course.times build/executed", file=sys.stderr)
            return 1
        print("every notebook's sections match the times file")
        return 0
    data = measure(Path(args.executed))
    TIMES_FILE.parent.mkdir(parents=True, exist_ok=True)
    TIMES_FILE.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    total = sum(s["minutes"] for rows in data["notebooks"].values() for s in rows)
    labs = sum(lab["minutes"] for lab in data["labs"].values())
    print(f"wrote {TIMES_FILE.relative_to(ROOT)}: notebooks {total / 60:.1f} h, labs {labs / 60:.1f} h")
    return 0


if __name__ == "__main__":
    sys.exit(main())
