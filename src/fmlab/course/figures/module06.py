"""Module 6's deck figure: a GPipe schedule and its bubble against the number of micro-batches.

Registered in fmlab.course.figures.FIGURES; the package's docstring says how figures are drawn and added.
"""

from __future__ import annotations

from fmlab.course.figures.canvas import new_figure

# Module 6: the notebook's pipeline (notebooks/06_tensor_parallel.ipynb parameters)
PIPELINE_STAGES, PIPELINE_MICROBATCHES = 6, 4
BUBBLE_MICROBATCHES = (1, 2, 4, 8, 16, 32, 64)


def pipeline_schedule():
    """The GPipe schedule of 6 stages and 4 microbatches, and the pipeline bubble against the microbatches.

    Top: every forward (F) and backward (B, twice a forward's time) slot of fmlab.plan.scaling.gpipe_schedule,
    one row per stage; the empty triangles are the bubble. Bottom: the bubble as a share of the compute time,
    fmlab.plan.scaling.bubble_fraction = (p - 1) / (v m), for 1 to 64 microbatches, plain (v = 1) and
    interleaved with 2 chunks per GPU (v = 2) (Narayanan et al. 2021). Notebook 06's parameters.
    """
    from fmlab.plan.scaling import bubble_fraction, gpipe_schedule

    p, m = PIPELINE_STAGES, PIPELINE_MICROBATCHES
    fig = new_figure(10, 5.6)
    top, bottom = fig.subplots(2, 1, height_ratios=(1.3, 1))
    for slot in gpipe_schedule(p, m):
        colour = "#4c72b0" if slot["kind"] == "F" else "#dd8452"
        top.barh(slot["stage"], slot["length"], left=slot["start"], color=colour, edgecolor="white")
        top.text(slot["start"] + slot["length"] / 2, slot["stage"], f"{slot['kind']}{slot['microbatch']}",
                 ha="center", va="center", fontsize=7, color="white")
    top.invert_yaxis()
    top.set_yticks(range(p), [f"stage {s}" for s in range(p)], fontsize=8)
    top.set_xlabel("time (one microbatch's forward on one stage = 1)")
    top.set_title(f"GPipe schedule, {p} stages x {m} microbatches (F forward, B backward): bubble "
                  f"{bubble_fraction(p, m):.0%} of the compute time", fontsize=10)
    for v, style in ((1, "o-"), (2, "s--")):
        values = [100 * bubble_fraction(p, k, v) for k in BUBBLE_MICROBATCHES]
        bottom.plot(BUBBLE_MICROBATCHES, values, style, label="GPipe / 1F1B" if v == 1 else "interleaved, 2 chunks per GPU")
        if v == 1:
            for k, value in zip(BUBBLE_MICROBATCHES, values, strict=True):
                bottom.annotate(f"{value:.0f}%", (k, value), ha="left", va="bottom", fontsize=8, xytext=(3, 2),
                                textcoords="offset points")
    bottom.set_xscale("log", base=2)
    bottom.set_yscale("log")
    bottom.set_xticks(BUBBLE_MICROBATCHES, [str(k) for k in BUBBLE_MICROBATCHES])
    bottom.minorticks_off()
    bottom.set_xlabel("microbatches per step (m)")
    bottom.set_ylabel("bubble, % of compute (log)")
    bottom.set_title(f"bubble with {p} stages: (p - 1) / (v m)", fontsize=10)
    bottom.legend(fontsize=8)
    return fig
