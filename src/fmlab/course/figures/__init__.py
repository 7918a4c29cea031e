"""Figures the slide decks embed, drawn at build time from the planner: write `![caption](figure:NAME)` in a deck.

    from fmlab.course.figures import FIGURES, render_svg
    fig = FIGURES["gpt30b_memory"]()                  # a matplotlib Figure (no pyplot: safe anywhere)
    render_svg("gpt30b_memory", "build/slides/figures/gpt30b_memory.svg")

`FIGURES` maps a name to a function that takes no argument and returns a `matplotlib.figure.Figure`; each
function's docstring says what it shows. Every figure is computed from the package's own functions, never from
numbers typed here: `fmlab.plan` (memory per layout, the phased plan, reliability), the arithmetic of
`fmlab.plan.scaling` and `fmlab.plan.traffic` (hybrid traffic, pipeline bubbles, parameter server against
ring all-reduce and Herring), and, for `lr_sweep` only, a few seconds of real training of the tiny model with
`fmlab.train` (the notebook 03 sweep, deterministic on a CPU). No network. Module 8's two figures,
`job_mtbf` and `checkpoint_interval`, come from `fmlab.plan.reliability` (the latter drawn by
`fmlab.course.plots.wasted_time_vs_interval`, the notebook's plot, on the figure's axes). Module 10's two,
`eval_curve` and `serving_latency`, are measurements: they draw the figures recorded in fmlab/serve/measured.json
by benchmarks/bench_serving.py (still no training or serving at build time).

One file per module (module01.py ... module12.py; module07.py also holds the module 7 run the others refer to),
drawn on canvas.py's Figure. To add a figure, write its function in its module's file and register it in FIGURES
below; `python -m fmlab slides` draws the figures the decks reference.

In a notebook, `display(FIGURES[name]())` draws the figure whether or not pyplot was imported: each Figure carries
its own PNG (`_repr_png_`), where a bare matplotlib Figure shows only as the text `<Figure size ...>` without
pyplot's inline backend (notebooks 04 and 11 printed that until 2026-11-26; fmlab.course.run.bare_figures checks).

`render_svg` keeps text as paths (the SVG needs no font) and writes no date, with a fixed id salt, so the
same figure gives the same bytes on every build.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fmlab.course.figures.module01 import LAYOUT_MEMORY, layout_memory
from fmlab.course.figures.module02 import DATA_MODELS, data_volume
from fmlab.course.figures.module03 import (
    SWEEP_CONFIG,
    SWEEP_LRS,
    SWEEP_SEEDS,
    SWEEP_STEPS,
    lr_sweep,
    sweep_losses,
)
from fmlab.course.figures.module04 import (
    DP_BYTES_PER_VALUE,
    DP_INSTANCE_COUNTS,
    DP_MODEL,
    data_parallel_traffic,
)
from fmlab.course.figures.module06 import (
    BUBBLE_MICROBATCHES,
    PIPELINE_MICROBATCHES,
    PIPELINE_STAGES,
    pipeline_schedule,
)
from fmlab.course.figures.module07 import (
    ATTENTION,
    GPT30B_LAYOUTS,
    HYBRID_DEGREES,
    INSTANCE,
    INSTANCES,
    MFU,
    MODEL,
    TOKENS,
    gpt30b_ladder,
    gpt30b_memory,
    gpt30b_plans,
    hybrid_traffic,
)
from fmlab.course.figures.module08 import (
    KEEP_CHECKPOINTS,
    MTBF_NODES,
    S3_GB_PER_S_PER_NODE,
    WRITE_GB_PER_S_PER_NODE,
    checkpoint_costs,
    checkpoint_interval,
    job_mtbf,
)
from fmlab.course.figures.module09 import TRAINIUM_CHOICES, trainium_choice
from fmlab.course.figures.module10 import eval_curve, serving_latency
from fmlab.course.figures.module11 import RECOVERY_NODES, recovery_goodput
from fmlab.course.figures.module12 import capstone_outcomes

FIGURES: dict[str, Callable] = {
    "layout_memory": layout_memory,
    "data_volume": data_volume,
    "lr_sweep": lr_sweep,
    "data_parallel_traffic": data_parallel_traffic,
    "pipeline_schedule": pipeline_schedule,
    "gpt30b_memory": gpt30b_memory,
    "gpt30b_ladder": gpt30b_ladder,
    "hybrid_traffic": hybrid_traffic,
    "job_mtbf": job_mtbf,
    "checkpoint_interval": checkpoint_interval,
    "trainium_choice": trainium_choice,
    "eval_curve": eval_curve,
    "serving_latency": serving_latency,
    "recovery_goodput": recovery_goodput,
    "capstone_outcomes": capstone_outcomes,
}


class UnknownFigure(KeyError):
    """A figure name that is not in FIGURES; the message lists the known names."""

    def __str__(self) -> str:
        return str(self.args[0])


def known() -> list[str]:
    """The registered figure names, sorted."""
    return sorted(FIGURES)


def figure(name: str):
    """The Figure registered as `name`; raises UnknownFigure naming the known figures."""
    if name not in FIGURES:
        raise UnknownFigure(f"unknown figure {name!r}; known figures: {', '.join(known())} "
                            "(register new ones in fmlab.course.figures.FIGURES)")
    return FIGURES[name]()


def render_svg(name: str, path: str | Path) -> Path:
    """Draw figure `name` to an SVG file at `path` (folders created); the same figure gives the same bytes."""
    import matplotlib

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "fmlab"}):
        figure(name).savefig(path, format="svg", metadata={"Date": None})
    return path


__all__ = [
    "ATTENTION",
    "BUBBLE_MICROBATCHES",
    "DATA_MODELS",
    "DP_BYTES_PER_VALUE",
    "DP_INSTANCE_COUNTS",
    "DP_MODEL",
    "FIGURES",
    "GPT30B_LAYOUTS",
    "HYBRID_DEGREES",
    "INSTANCE",
    "INSTANCES",
    "KEEP_CHECKPOINTS",
    "LAYOUT_MEMORY",
    "MFU",
    "MODEL",
    "MTBF_NODES",
    "PIPELINE_MICROBATCHES",
    "PIPELINE_STAGES",
    "RECOVERY_NODES",
    "S3_GB_PER_S_PER_NODE",
    "SWEEP_CONFIG",
    "SWEEP_LRS",
    "SWEEP_SEEDS",
    "SWEEP_STEPS",
    "TOKENS",
    "TRAINIUM_CHOICES",
    "UnknownFigure",
    "WRITE_GB_PER_S_PER_NODE",
    "capstone_outcomes",
    "checkpoint_costs",
    "checkpoint_interval",
    "data_parallel_traffic",
    "data_volume",
    "eval_curve",
    "figure",
    "gpt30b_ladder",
    "gpt30b_memory",
    "gpt30b_plans",
    "hybrid_traffic",
    "job_mtbf",
    "known",
    "layout_memory",
    "lr_sweep",
    "pipeline_schedule",
    "recovery_goodput",
    "render_svg",
    "serving_latency",
    "sweep_losses",
    "trainium_choice",
]
