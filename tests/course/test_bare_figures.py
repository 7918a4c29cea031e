"""A course figure draws itself in a notebook, pyplot or not, and fmlab.course.run.bare_figures finds one that
does not (notebooks 04 and 11 printed `<Figure size ...>` until 2026-11-26; issue 40)."""

import nbformat
import pytest
from IPython.core.formatters import DisplayFormatter
from matplotlib.figure import Figure

from fmlab.course.figures import FIGURES
from fmlab.course.run import bare_figures


def test_a_course_figure_carries_its_png_so_ipython_draws_it_without_pyplot():
    fig = FIGURES["pipeline_schedule"]()
    data, _ = DisplayFormatter().format(fig)
    assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
    assert data["text/plain"].startswith("<NotebookFigure size")  # the text stays, beside the image


def _notebook(tmp_path, *outputs):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=list(outputs))])
    path = tmp_path / "executed.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_bare_figures_finds_a_figure_shown_only_as_text(tmp_path):
    data, _ = DisplayFormatter().format(Figure(figsize=(2, 1)))  # a plain Figure, no pyplot: text only
    assert set(data) == {"text/plain"}
    bare = nbformat.v4.new_output("display_data", data=data)
    printed = nbformat.v4.new_output("stream", name="stdout", text="<Figure size 200x100 with 0 Axes>\n")
    assert bare_figures(_notebook(tmp_path, bare, printed)) == ["cell 0: <Figure size 200x100 with 0 Axes>"] * 2


def test_bare_figures_accepts_a_drawn_figure(tmp_path):
    text = "<Figure size 640x480 with 1 Axes>"  # what pyplot's inline backend leaves beside its PNG
    drawn = nbformat.v4.new_output("display_data", data={"text/plain": text, "image/png": "iVBORw0KGgo="})
    assert bare_figures(_notebook(tmp_path, drawn)) == []


@pytest.mark.parametrize("name", ["eval_curve", "serving_latency", "job_mtbf"])
def test_figures_drawn_below_the_course_floor_draw_themselves_too(name):
    data, _ = DisplayFormatter().format(FIGURES[name]())
    assert "image/png" in data
