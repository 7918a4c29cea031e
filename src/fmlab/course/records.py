"""Record a notebook's key figures in its own output, and read them back from an executed notebook.

A notebook calls `record("days", plan.days)`; the value is shown to the learner and stored in the cell's
output under a private MIME type. Tests and the course report read the executed notebook with
`read_records(path)` and assert on the figures the code really produced (scrapbook-style glue).

    record("speedup", 1.8)                    # in a notebook
    read_records("build/executed/02_....ipynb")  # -> {"speedup": 1.8, ...}
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

MIME = "application/vnd.fmlab.record+json"
_RECORDED: dict[str, Any] = {}  # this kernel's records, for the notebook's closing check (fmlab.course.checks)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def record(name: str, value: Any, show: bool = False) -> Any:
    """Store `value` under `name` in this cell's output; returns it. Quiet by default: a cell that ends with
    `record(...)` shows the value once, as its result, not twice (show=True also prints `name = value`)."""
    from IPython.display import display

    value = _jsonable(value)
    json.dumps(value)  # fail here, in the notebook, if it cannot be stored
    _RECORDED[name] = value
    shown = f"{name} = {value!r}" if show else ""
    display({MIME: {name: value}, "text/plain": shown}, raw=True)
    return value


def read_records(notebook: str | Path) -> dict[str, Any]:
    """Every value recorded by an executed notebook, later records of a name winning."""
    return records_in(json.loads(Path(notebook).read_text()).get("cells", []))


def records_in(cells: list[dict]) -> dict[str, Any]:
    """Every value recorded in these cells of an executed notebook (its JSON), later records of a name winning."""
    found: dict[str, Any] = {}
    for cell in cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if MIME in data:
                found.update(data[MIME])
    return found


def recorded() -> dict[str, Any]:
    """What this kernel has recorded so far (a copy)."""
    return dict(_RECORDED)


def lookup(records: dict[str, Any], path: str) -> Any:
    """The value at `path` in `records`: a record's name, then keys or list indexes after '/'
    ("nb12.sized/sized_days", "nb12.sensitivity/0/assumption"); KeyError, IndexError or TypeError when absent."""
    name, *rest = path.split("/")
    if name not in records:
        raise KeyError(f"the notebook recorded no {name!r}")
    value = records[name]
    for part in rest:
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value
