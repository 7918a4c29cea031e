"""Build each unsolved lab from its solved twin, so the two never drift apart.

    python -m fmlab.course.labgen            # rewrite labs/lab_NN_*.ipynb from labs/solutions/
    python -m fmlab.course.labgen --check    # exit 1 if a committed lab differs from what its solution gives
    python -m fmlab.course.labgen --lines    # what the learner writes in each lab: lines per exercise

The solution is the source. In its code cells, what the learner writes sits between markers (nbgrader's
convention, so the solved notebook shows exactly what was asked):

    def all_reduce_mean(tensor, world_size):
        ### BEGIN SOLUTION
        dist.all_reduce(tensor)
        tensor /= world_size
        ### END SOLUTION
        return tensor

In the unsolved lab the block becomes `...  # your code here` and `raise NotImplementedError` at the block's
indentation, which every check reports as "not answered yet". A block can name its own stub instead, for a
top-level answer that must still let the notebook run on: `### BEGIN SOLUTION: answer = None`. Only
solutions that contain markers are built; labs written by hand (07, 08) are left as they are.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from fmlab.environment import ROOT

# A lab's file name: lab_NN_topic.ipynb, or lab_NNx_topic.ipynb for a module's second lab (lab_08b_failure_zoo);
# its checks live in fmlab.labs.labNN / labNNx.
LAB_GLOB = "lab_[0-9][0-9]*_*.ipynb"

BEGIN = re.compile(r"^(?P<indent>\s*)### BEGIN SOLUTION(?::\s*(?P<stub>.*))?\s*$")
END = re.compile(r"^\s*### END SOLUTION\s*$")


class LabSourceError(ValueError):
    """A solution's markers do not pair up."""


def strip_solution(source: str, where: str = "cell") -> tuple[str, int]:
    """The unsolved text of one code cell, and how many lines of solution it removed."""
    out: list[str] = []
    removed = 0
    lines = source.split("\n")
    i = 0
    while i < len(lines):
        begin = BEGIN.match(lines[i])
        if END.match(lines[i]):
            raise LabSourceError(f"{where}: '### END SOLUTION' at line {i + 1} without a BEGIN")
        if not begin:
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not END.match(lines[j]):
            if BEGIN.match(lines[j]):
                raise LabSourceError(f"{where}: a second BEGIN at line {j + 1} before the END of line {i + 1}'s")
            j += 1
        if j == len(lines):
            raise LabSourceError(f"{where}: '### BEGIN SOLUTION' at line {i + 1} has no '### END SOLUTION'")
        indent, stub = begin["indent"], begin["stub"]
        removed += sum(1 for line in lines[i + 1:j] if line.strip() and not line.strip().startswith("#"))
        if stub:
            out.append(f"{indent}{stub}  # your answer here")
        else:
            out += [f"{indent}...  # your code here", f"{indent}raise NotImplementedError"]
        i = j + 1
    return "\n".join(out), removed


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


# The solution's title "# Lab NN · What (solution)": the unsolved lab keeps "# Lab NN · What"
TITLE = re.compile(r"^(# .*?)\s*\(solution\)[ \t]*$", re.MULTILINE)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def unsolved(solution: dict, where: str = "") -> tuple[dict, list[int]]:
    """The unsolved notebook built from a solved one, and the solution lines removed per code cell."""
    nb = json.loads(json.dumps(solution))
    counts = []
    titled = False
    for n, cell in enumerate(nb["cells"]):
        cell.get("metadata", {}).pop("execution", None)
        if cell["cell_type"] == "markdown" and not titled and TITLE.search(_source(cell)):
            cell["source"] = _lines(TITLE.sub(r"\1", _source(cell), count=1))  # the lab is not the solution
            titled = True
        if cell["cell_type"] != "code":
            continue
        text, removed = strip_solution(_source(cell), f"{where} cell {n}")
        cell["source"] = _lines(text)
        cell["outputs"], cell["execution_count"] = [], None
        if removed:
            counts.append(removed)
    return nb, counts


def has_markers(notebook: dict) -> bool:
    return any(c["cell_type"] == "code" and any(BEGIN.match(line) for line in _source(c).split("\n"))
               for c in notebook["cells"])


def solutions(root: Path = ROOT) -> list[Path]:
    """The solved labs that are built from markers."""
    found = sorted((root / "labs" / "solutions").glob(LAB_GLOB))
    return [p for p in found if has_markers(json.loads(p.read_text()))]


def write_json(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def build(root: Path = ROOT, check: bool = False) -> list[str]:
    """Write (or with check=True, compare) every unsolved lab; returns the labs that differed."""
    stale = []
    for solution in solutions(root):
        nb, _ = unsolved(json.loads(solution.read_text()), solution.name)
        target = root / "labs" / solution.name
        text = write_json(nb)
        if not target.exists() or target.read_text() != text:
            stale.append(target.name)
            if not check:
                target.write_text(text)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fmlab.course.labgen", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if a lab is out of date")
    parser.add_argument("--lines", action="store_true", help="print the solution lines each lab asks for")
    args = parser.parse_args(argv)
    if args.lines:
        for solution in solutions():
            _, counts = unsolved(json.loads(solution.read_text()), solution.name)
            print(f"{solution.stem}: {sum(counts)} lines in {len(counts)} cells ({', '.join(map(str, counts))})")
        return 0
    stale = build(check=args.check)
    if args.check and stale:
        print("out of date (run python -m fmlab.course.labgen): " + ", ".join(stale))
        return 1
    print(("rewrote: " + ", ".join(stale)) if stale else "every lab matches its solution")
    return 0


if __name__ == "__main__":
    sys.exit(main())
