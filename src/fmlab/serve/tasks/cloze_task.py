"""The data loader of the fmlab_cloze lm-eval task: the JSON lines next to this file, as a test split.

lm-eval calls `load(**metadata)` (the YAML's `custom_dataset: !function cloze_task.load`); nothing is
downloaded. The items are written by fmlab.serve.cloze.write_items.
"""

from __future__ import annotations

import json
from pathlib import Path

ITEMS = Path(__file__).resolve().parent / "fmlab_cloze.jsonl"


def load(**_metadata):
    import datasets

    rows = [json.loads(line) for line in ITEMS.read_text().splitlines() if line.strip()]
    return {"test": datasets.Dataset.from_list(rows)}
