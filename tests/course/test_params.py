"""fmlab.course.params: a notebook reads another module's parameters from that notebook's `parameters` cell."""

import json

import pytest

from fmlab.course import figures
from fmlab.course.params import notebook_parameters


def test_module_7_owns_the_run_that_module_8_and_the_deck_figures_price():
    run = notebook_parameters("07_gpt30b_sharded_training.ipynb")
    assert (run["model"], run["instance"], run["instances"], run["tokens"], run["mfu"]) == (
        figures.MODEL, figures.INSTANCE, figures.INSTANCES, figures.TOKENS, figures.MFU)


def test_only_the_cell_tagged_parameters_counts(tmp_path):
    cells = [{"cell_type": "code", "metadata": {}, "source": ["tokens = 1\n"]},
             {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": ["tokens = 2e9  # a comment\n",
                                                                                   "name = 'x'\n"]}]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    assert notebook_parameters(path) == {"tokens": 2e9, "name": "x"}
    path.write_text(json.dumps({"cells": cells[:1]}))
    with pytest.raises(ValueError, match="no cell tagged 'parameters'"):
        notebook_parameters(path)
