"""Execute a workshop path as a learner on it runs it: the path's sections of each notebook, in order, nothing else.

    python -m fmlab course --path one-day     # or two-day; executed notebooks under build/paths/one-day/
    python -m fmlab course --path one-day --write-only   # the cut notebooks a room opens, in workshop/one-day/
    pathrun.path_notebook(data, "one day", stem)   # a notebook (its JSON) cut to the sections the path takes
    pathrun.path_problems("one-day")           # names a section reads that only a skipped section binds: []

A path names sections (`fmlab.course.paths`: CORE for two days, ONE_DAY for one); a cell belongs to the section
whose `##` heading comes before it, and cells before the first heading to the "opening". A cell tagged `cleanup` or
`check` is kept on every path: what a section starts (warm pools, endpoints) is released whatever the learner
skipped, and every notebook ends with its two-minute check.
Each section of a path must run given only the path's sections before it: where it needs what an earlier, skipped
section built, it asks `fmlab.course.section.once` for it, which builds it there or hands over what the earlier
section built. `path_problems` finds a section that reads a name only a skipped section binds, without running
anything; `run_path` runs the cut notebooks (in notebooks/, as the course's) and the labs the path names, whole.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from pathlib import Path

from fmlab.course import paths
from fmlab.course.times import HEADING, OPENING, cell_text
from fmlab.environment import ROOT

KEEP_TAGS = ("cleanup", "check")  # clean-up and the two-minute check: on every path
ALIASES = {"one-day": "one day", "two-day": "two days", "two-days": "two days", "one day": "one day",
           "two days": "two days"}  # the command line's names, and the paths' own


def path_name(given: str) -> str:
    """'one-day' or 'one day' -> 'one day'; a clear error for anything else."""
    try:
        return ALIASES[given.strip().lower()]
    except KeyError:
        raise ValueError(f"--path must be one-day or two-day, not {given!r}") from None


def cell_sections(notebook: dict) -> list[str]:
    """The section key (`paths.key`) of every cell, in order."""
    current, out = OPENING, []
    for cell in notebook["cells"]:
        heading = HEADING.search(cell_text(cell)) if cell["cell_type"] == "markdown" else None
        if heading:
            current = paths.key(heading.group(1))
        out.append(current)
    return out


def taken_keys(path: str, stem: str) -> tuple[str, ...]:
    return paths.table(path).get(stem, ())


def path_notebook(notebook: dict, path: str, stem: str, without: set[tuple[str, str]] = frozenset()) -> dict:
    """`notebook` with only the cells of the sections `path` takes (and every `cleanup` and `check` cell); `without`
    names (notebook, section) pairs left out as well (a room's cuts)."""
    keys = [k for k in taken_keys(path, stem) if (stem, k) not in without]
    kept = [cell for cell, section in zip(notebook["cells"], cell_sections(notebook), strict=True)
            if section in keys or set(KEEP_TAGS) & set(cell.get("metadata", {}).get("tags", []))]
    out = copy.deepcopy(notebook)
    out["cells"] = copy.deepcopy(kept)
    return out


def path_notebooks(path: str, root: Path = ROOT) -> list[Path]:
    """The notebooks `path` takes, in course order."""
    return [nb for nb in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")) if nb.stem in paths.table(path)]


def workshop_folder(given: str, root: Path = ROOT) -> Path:
    """Where a path's cut notebooks go for a room: workshop/one-day/ or workshop/two-day/."""
    return root / "workshop" / path_name(given).replace(" days", "-day").replace(" day", "-day")


def write_path(given: str, folder: str | Path | None = None, root: Path = ROOT,
               overwrite: bool = True) -> list[Path]:
    """Write the path's cut notebooks (no outputs) into `folder` (default workshop/<path>/): what a room opens and
    runs top to bottom, deep dives left out. With `overwrite=False` a notebook already there is kept as it is (a
    learner's own work is never replaced); the notebooks written are returned."""
    path = path_name(given)
    folder = Path(folder or workshop_folder(path, root))
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for nb in path_notebooks(path, root):
        target = folder / nb.name
        if target.exists() and not overwrite:
            continue
        target.write_text(json.dumps(path_notebook(json.loads(nb.read_text()), path, nb.stem), indent=1,
                                     ensure_ascii=False) + "\n")
        written.append(target)
    return written


def run_path(given: str, output: str | Path | None = None, root: Path = ROOT, jobs: int = 2):
    """Execute `given` path's sections and labs; returns fmlab.course.run's NotebookResults in course order."""
    from fmlab.course.run import course_notebooks, run_many

    path = path_name(given)
    out = Path(output or root / "build" / "paths" / path.replace(" ", "-"))
    for stale in ("notebooks", "labs"):  # a notebook the path no longer takes must not linger among the results
        shutil.rmtree(out / stale, ignore_errors=True)
    labs = [nb for nb in course_notebooks(root) if nb.parent.name == "solutions" and nb.stem in paths.LABS[path]]
    with tempfile.TemporaryDirectory(prefix=".path-", dir=root / "notebooks") as cut_dir:
        cut = write_path(path, cut_dir, root)
        # the cut notebooks run in notebooks/, as the course's do (relative paths, the kernel's working folder)
        return run_many(cut + labs, out, jobs=jobs, cwd_of=lambda nb: root / "notebooks" if nb in cut else None,
                        root=root, log=out / "course.log")


IPYTHON_NAMES = {"display", "get_ipython", "In", "Out", "exit", "quit"}


def _code(cell) -> str:
    """A code cell's Python, IPython's magics and shell lines left out."""
    return "\n".join(line for line in cell_text(cell).splitlines() if not line.lstrip().startswith(("%", "!")))


def _names(code: str) -> tuple[set[str], set[str]]:
    """(bound, loaded) names anywhere in `code`: what it defines, and what it reads."""
    import ast

    bound, loaded = set(), set()
    tree = ast.parse(code)
    # a function's body reads its names when it is called, not where it is defined: its own names are bound, the
    # rest is not counted as read
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
              for body in ([f.body] if isinstance(f, ast.Lambda) else f.body) for n in ast.walk(body)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and id(node) in inside:
            if not isinstance(node.ctx, ast.Load):
                bound.add(node.id)
        elif isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, loaded


def undefined_names(notebook: dict) -> list[tuple[int, str]]:
    """(cell index, name) for each name a code cell reads that no cell before it (nor itself) binds: what would stop
    the notebook with a NameError when run top to bottom."""
    import builtins

    known = set(dir(builtins)) | IPYTHON_NAMES
    out = []
    for i, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        bound, loaded = _names(_code(cell))
        out += [(i, name) for name in sorted(loaded - bound - known)]
        known |= bound
    return out


def path_problems(given: str, root: Path = ROOT, without: set[tuple[str, str]] = frozenset()) -> list[str]:
    """Each name a path's section reads that only a section the path skips defines: 'stem §key: name'."""
    path = path_name(given)
    out = []
    for nb in path_notebooks(path, root):
        cut = path_notebook(json.loads(nb.read_text()), path, nb.stem, without)
        sections = cell_sections(cut)
        out += [f"{nb.stem} §{sections[i]}: {name}" for i, name in undefined_names(cut)]
    return list(dict.fromkeys(out))


def record_sections(notebook: dict) -> dict[str, str]:
    """{record name: the section key of the cell that records it} (`record("name", ...)` calls)."""
    import re

    out = {}
    for cell, section in zip(notebook["cells"], cell_sections(notebook), strict=True):
        if cell["cell_type"] == "code":
            for name in re.findall(r'record\("([^"]+)"', cell_text(cell)):
                out.setdefault(name, section)
    return out


def narrowest_path(stem: str) -> str | None:
    """The shortest workshop path that takes notebook `stem` (None: only the full course)."""
    return "one day" if stem in paths.ONE_DAY else "two days" if stem in paths.CORE else None
