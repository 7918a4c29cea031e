"""The figures' canvas: a matplotlib Figure that draws itself in a notebook, and the labels the figures share.

    fig = new_figure(10, 4)        # a Figure (no pyplot) whose _repr_png_ shows it in any notebook
    usd(1.2e6), si(1.35e11)        # "$1.2M", "135B"
"""

from __future__ import annotations

import functools


@functools.cache
def figure_class():
    """A matplotlib Figure that a notebook draws by itself: IPython shows a bare Figure only as the text
    `<Figure size ...>` unless pyplot was imported (its inline backend registers the image formatter); this one
    carries its own `_repr_png_`, so `display(fig)` or a cell's last line draws it either way. No pyplot."""
    from matplotlib.figure import Figure

    class NotebookFigure(Figure):
        def _repr_png_(self) -> bytes:
            import io

            buffer = io.BytesIO()
            self.savefig(buffer, format="png", dpi=100)
            return buffer.getvalue()

    return NotebookFigure


def drawable(fig):
    """A Figure built below this floor (fmlab.serve.serving_figures), made one that draws itself in a notebook too."""
    fig.__class__ = figure_class()  # the subclass adds a method only: same state, same drawing
    return fig


def new_figure(width: float, height: float, layout: str | None = "constrained"):
    return figure_class()(figsize=(width, height), layout=layout)


def log_bars(ax, values: list[float], names: list[str], colour: str, label, ylabel: str, width: float = 0.6,
             headroom: float = 6.0) -> None:
    """Bars on a log scale, each labelled with `label(value)` above it; the axis leaves room for the labels."""
    ax.bar(range(len(values)), values, width, color=colour)
    ax.set_yscale("log")
    ax.set_ylim(min(values) / 3, max(values) * headroom)
    ax.set_xticks(range(len(values)), names, fontsize=8)
    ax.set_ylabel(ylabel)
    for i, v in enumerate(values):
        ax.annotate(label(v), (i, v), ha="center", va="bottom", fontsize=9, xytext=(0, 2), textcoords="offset points")


def usd(x: float) -> str:
    if x >= 1e6:
        return f"${x / 1e6:.2g}M"
    if x >= 1e3:
        return f"${x / 1e3:,.0f}k" if x >= 1e4 else f"${x / 1e3:.1f}k"
    return f"${x:,.0f}"


def si(x: float, unit: str = "") -> str:
    """3.16e6 -> 3.2M, 1.35e11 -> 135B (with unit "B": 135 GB), 2.8e12 -> 2.8T (2.8 TB)."""
    prefixes = ((1e12, "T"), (1e9, "G" if unit else "B"), (1e6, "M"), (1e3, "k"))
    scale, prefix = next(((v, p) for v, p in prefixes if abs(x) >= v), (1.0, ""))
    return f"{x / scale:.3g}{' ' if unit else ''}{prefix}{unit}"
