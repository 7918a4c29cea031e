"""The package's layout, held: src/fmlab/README.md's map names every file, and the import rules it states hold.

    .venv/bin/python -m pytest tests/test_package_layout.py -q      # under a second

The rules (src/fmlab/README.md says why): at most 8 top-level modules (the rest live in a subpackage per concept);
no cycle between files (of any length) or between subpackages, counting imports inside functions too; no
private name (`_x`) imported from another file. A failure names the files to move, rename or add to the map.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "fmlab"
MAX_TOP_LEVEL_MODULES = 8


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> tuple[set[str], list[str]]:
    """The fmlab modules `name` imports (anywhere in the file) and the private names it imports from them."""
    found, private = set(), []
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("fmlab"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else node.module)
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    private.append(f"{name} imports {full}")
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in MODULES}
    return {m for m in found if m in MODULES and m != name}, private


GRAPH = {name: imports_of(name)[0] for name in MODULES}


def subpackage(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else None


def test_a_handful_of_top_level_modules():
    flat = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(flat) <= MAX_TOP_LEVEL_MODULES, f"{len(flat)} top-level modules, move some into a subpackage: {flat}"


def test_no_two_files_import_each_other():
    def related(a, b):  # a package's __init__ re-exporting its own files is not a cycle
        return a.startswith(b + ".") or b.startswith(a + ".")

    cycles = sorted({tuple(sorted((a, b))) for a in GRAPH for b in GRAPH[a] if a in GRAPH[b] and not related(a, b)})
    assert not cycles, f"files that import each other: {cycles}"


MAX_LINES = 450  # a file longer than this is split by idea; labs/ and course/ hold notebook-sized checks and tables


def test_no_file_over_the_line():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if p.relative_to(PACKAGE).parts[0] not in ("labs", "course")
            and (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines, split each by idea: {long}"


def test_no_import_cycle_between_files():
    """Longer cycles too (a -> b -> c -> a), an import inside a function counted: hiding one there only defers it."""
    def related(a, b):  # a package's __init__ importing its own files is not a cycle
        return a.startswith(b + ".") or b.startswith(a + ".")

    edges = {a: {b for b in targets if not related(a, b)} for a, targets in GRAPH.items()}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(edges):
        if name not in index:
            visit(name)
    assert not cycles, f"files that reach each other through imports: {cycles}"


def test_no_cycle_between_subpackages():
    edges: dict[str, dict[str, str]] = {}
    for a, targets in GRAPH.items():
        for b in targets:
            pa, pb = subpackage(a), subpackage(b)
            if pa and pb and pa != pb:
                edges.setdefault(pa, {}).setdefault(pb, f"{a} -> {b}")

    def reachable(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges.get(todo.pop(), {}):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    cycles = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in reachable(b)})
    assert not cycles, "subpackages that reach each other: " + "; ".join(
        f"{a} <-> {b} (e.g. {edges[a].get(b) or edges[b].get(a)})" for a, b in cycles[:5])


def test_no_private_name_imported_from_another_file():
    private = [line for name in MODULES for line in imports_of(name)[1]]
    assert not private, private


def map_sections() -> dict[str, str]:
    """The map's code block, cut by subpackage: {"": the top-level lines, "plan": plan/'s lines, ...}."""
    block = (PACKAGE / "README.md").read_text().split("```")[1]
    sections, current = {"": ""}, ""
    for line in block.splitlines():
        heading = re.match(r"^  (\w+)/(\s|$)", line)
        if heading:
            current = heading.group(1)
        sections[current] = sections.get(current, "") + line + "\n"
    return sections


def test_the_map_names_every_file_in_its_own_folder():
    sections = map_sections()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        folder = rel.parts[0] if len(rel.parts) > 1 else ""
        if folder and path.name in ("__init__.py", "__main__.py"):
            continue
        if not re.search(rf"(?<![\w/.]){re.escape(path.name)}\b", sections.get(folder, "")):
            missing.append(str(rel))
    assert not missing, f"src/fmlab/README.md's map does not name: {missing}"


def test_the_map_names_no_file_that_is_gone():
    sections = map_sections()
    gone = [f"{folder or '.'}/{name}" for folder, text in sections.items()
            for name in re.findall(r"(?<![\w/.])(\w+\.py)\b", text)
            if not list((PACKAGE / folder).rglob(name))]
    assert not gone, f"src/fmlab/README.md's map names files that are not there: {gone}"
