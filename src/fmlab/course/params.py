"""The parameters of another module's notebook, read from its `parameters` cell (the one papermill overrides).

A number a notebook borrows from another module comes from that module's own parameters, not typed again:

    run = notebook_parameters("07_gpt30b_sharded_training.ipynb")   # {"model": "gpt-30b", "tokens": 3e11, ...}
    plan = module7_plan()        # module 7's run as notebook 07 plans it: the chosen layout, the predicted days

These are the notebook's defaults as committed; values papermill injects into that notebook's own run are not
seen here.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from fmlab.environment import ROOT


def notebook_parameters(notebook: str | Path) -> dict[str, Any]:
    """`name = literal` assignments of the notebook's cell tagged "parameters" (a name under notebooks/, or a path)."""
    path = Path(notebook)
    if not path.is_absolute() and not path.exists():
        path = ROOT / "notebooks" / path
    cells = json.loads(path.read_text())["cells"]
    cell = next((c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        raise ValueError(f"{path.name} has no cell tagged 'parameters'")
    found: dict[str, Any] = {}
    for node in ast.parse("".join(cell["source"])).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


def module7_plan(**overrides):
    """Module 7's run as notebook 07 plans it (fmlab.plan.planned.planned_run, a PlannedRun): its parameters (with
    `overrides`: model, tokens, instance, instances), the layout and micro-batch the planner chooses, the predicted
    step's days and cost (or its "what if" MFU when the notebook sets one), the checkpoint interval and reservation."""
    from fmlab.plan.planned import planned_run

    run = {**notebook_parameters("07_gpt30b_sharded_training.ipynb"), **overrides}
    return planned_run(run["model"], run["tokens"], run["instance"], run["instances"],
                       micro_batches=tuple(run["micro_batches"]), mfu=run["mfu"])
