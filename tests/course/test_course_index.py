"""The course index (notebooks/index.ipynb) is current, links every module's notebook, lab and deck, and is tidy.

    .venv/bin/pytest tests/course/test_course_index.py -v
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from fmlab.course.index import ROOT, find_modules, heading, index_notebook, modules_markdown

INDEX = ROOT / "notebooks" / "index.ipynb"


def _links(nb: dict) -> list[str]:
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_index_is_up_to_date():
    assert INDEX.read_text(encoding="utf-8") == index_notebook(), (
        "notebooks/index.ipynb does not match the course on disk: run `python -m fmlab.course.index`")


def test_index_links_every_module_in_order_and_every_link_resolves():
    nb = json.loads(INDEX.read_text(encoding="utf-8"))
    links = _links(nb)
    on_disk = (sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted((ROOT / "labs").glob("lab_*.ipynb"))
               + sorted((ROOT / "labs" / "solutions").glob("lab_*.ipynb")) + sorted((ROOT / "slides").glob("[0-9][0-9]_*.md")))
    for path in on_disk:
        relative = Path("..", path.relative_to(ROOT)).as_posix() if path.parent.name != "notebooks" else path.name
        assert relative in links, f"the index does not link {path.relative_to(ROOT)}"
    for link in links:
        target = (INDEX.parent / link).resolve()
        if target.is_relative_to(ROOT / "build" / "slides"):  # built by `make slides` from slides/NN_x.md
            target = ROOT / "slides" / target.with_suffix(".md").name
        assert target.is_file(), f"the index links {link}, which does not exist"
    numbers = [m.group(1) for m in re.finditer(r"^\| (\d\d) \|", "".join(nb["cells"][-1]["source"]), re.M)]
    assert numbers == sorted(numbers) and len(numbers) == len(set(numbers)) >= 10


def test_every_module_has_a_one_line_summary_and_titles_come_from_the_files():
    modules = find_modules()
    rows = modules_markdown(modules).splitlines()[4:]
    assert len(rows) == len(modules)
    for module, row in zip(modules, rows, strict=True):
        assert re.match(rf"\| {module.number} \| .+: \w", row), f"module {module.number} has no summary: {row}"
        if module.notebook:
            title = heading(module.notebook)
            assert f"[{title}]({module.notebook.name})" in row
            assert not re.match(r"\d\d", title), f"{title!r} kept its 'NN ·' prefix"


def test_index_is_a_clean_course_notebook():
    nb = json.loads(INDEX.read_text(encoding="utf-8"))
    assert nb["metadata"]["kernelspec"] == {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                            "language": "python"}
    tagged = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1 and tagged[0]["cell_type"] == "code" and not "".join(tagged[0]["source"]).strip()
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb["cells"] if c["cell_type"] == "code")
    assert "fmlab (Python 3.11)" in "".join(nb["cells"][0]["source"])  # the kernel `make lab` registers


def test_a_lab_link_never_says_solution_except_the_solution_link():
    text = modules_markdown(find_modules())
    labs = re.findall(r"\[([^\]]+)\]\(\.\./labs/lab_", text)
    assert labs and not [t for t in labs if "solution" in t.lower()]  # issue 40: "Predicting a step (solution)"
