"""Module 9's deck figure: the module 7 run's days and cost on Trainium against GPUs.

Registered in fmlab.course.figures.FIGURES; the package's docstring says how figures are drawn and added.
"""

from __future__ import annotations

import math

from fmlab.course.figures.canvas import new_figure
from fmlab.plan import catalog, compute

TRAINIUM_CHOICES = ("ml.trn1.32xlarge", "ml.trn2.48xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge")


def trainium_choice():
    """Module 9's choice: days and on-demand cost of Llama 2 70B on 100B tokens with 8 instances of each kind at
    40% MFU (fmlab.plan.compute.estimate_run, notebook 09's comparison). An instance with no published price
    (trn2) shows its days and "no price" instead of a cost."""


    runs = {name: compute.estimate_run("llama2-70b", 100e9, name, 8, 0.4) for name in TRAINIUM_CHOICES}
    fig = new_figure(10, 3.8)
    left, right = fig.subplots(1, 2)
    labels = [f"{name.removeprefix('ml.').split('.')[0]}\n{catalog.INSTANCES[name].accelerator}" for name in runs]
    days = [run.days for run in runs.values()]
    left.bar(labels, days, color="#4c72b0")
    for i, d in enumerate(days):
        left.annotate(f"{d:.0f}", (i, d), ha="center", va="bottom", fontsize=8)
    left.set_ylabel("days")
    left.set_title("Llama 2 70B, 100B tokens, 8 instances, MFU 40%", fontsize=10)
    costs = [run.cost_usd / 1e3 for run in runs.values()]
    right.bar(labels, [c if math.isfinite(c) else 0 for c in costs], color="#dd8452")
    for i, c in enumerate(costs):
        right.annotate(f"${c:,.0f}k" if math.isfinite(c) else "no published\nprice", (i, c if math.isfinite(c) else 0),
                       ha="center", va="bottom", fontsize=8)
    right.set_ylabel("on-demand cost, $ thousands")
    right.set_title("cost (prices as read, see fmlab.plan.catalog)", fontsize=10)
    return fig
