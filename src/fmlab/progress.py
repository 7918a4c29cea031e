"""Progress bars that end at 100% wherever the notebook runs: the browser, papermill, a terminal.

A ground floor (it imports nothing of fmlab), so data preparation, launches and jobs can show progress without
importing the course package that sits above them.

    from fmlab.progress import progress
    for n in progress([1, 2, 4], desc="worlds"): ...
    with progress(total=len(units), desc="tokenize + pack", unit="shard") as bar:
        ...
        bar.update(1)

`tqdm.auto` draws an ipywidgets bar in a notebook. Its state lives in the browser: a notebook executed headless
(papermill, `make course`, CI) keeps only the widget's first rendering, a bar frozen at 0%. A text bar is
ordinary output: it is redrawn in place with carriage returns in JupyterLab and in a terminal, and the saved
notebook shows its last state, 100% and the elapsed time.
"""

from __future__ import annotations

import sys


def progress(iterable=None, total: int | None = None, desc: str = "", unit: str = "it", disable: bool = False,
             **kwargs):
    """A text tqdm bar on stdout, over `iterable` or counting to `total` (the module docstring says why)."""
    from tqdm.std import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=disable, file=sys.stdout, dynamic_ncols=False,
                ncols=100, mininterval=0.5, **kwargs)
