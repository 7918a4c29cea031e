"""Module 11's deck figure: goodput against nodes for three ways back from a failure.

Registered in fmlab.course.figures.FIGURES; the package's docstring says how figures are drawn and added.
"""

from __future__ import annotations

from fmlab.course.figures.canvas import new_figure
from fmlab.course.figures.module07 import MODEL
from fmlab.plan import catalog, compute, reliability
from fmlab.plan.layout import checkpoint_gb

RECOVERY_NODES = (16, 64, 256, 1024, 2048)


def recovery_goodput(model: str = MODEL, step_seconds: float | None = None, assumptions=None):
    """Module 11: goodput of gpt-30b against the number of nodes, for three ways back from a failure.

    fmlab.plan.recovery.sweep: checkpoints to S3, managed tiered checkpointing (memory first) and checkpointless
    recovery, each with its Daly interval, under Llama 3's failure rate per node (fmlab.plan.reliability); the
    rates and restart minutes are recovery.Assumptions; `step_seconds` the optimizer step of the run (default: the
    planner's predicted step of the run on 16 x ml.p5.48xlarge, module 11's choice).
    """
    from fmlab.plan import recovery
    from fmlab.plan.planned import planned_run

    if step_seconds is None:
        step_seconds = planned_run(model, 300e9, "ml.p5.48xlarge", 16).step_seconds

    state_gb = checkpoint_gb(compute.param_count(catalog.model(model)))["training"]
    results = recovery.sweep(state_gb, list(RECOVERY_NODES), step_seconds, assumptions or recovery.Assumptions())
    fig = new_figure(10, 4.4)
    ax = fig.subplots()
    names = [r.name for r in results[RECOVERY_NODES[0]]]
    for i, name in enumerate(names):
        ax.plot(RECOVERY_NODES, [100 * results[n][i].goodput for n in RECOVERY_NODES], "o-", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(RECOVERY_NODES, [f"{n:,}" for n in RECOVERY_NODES])
    ax.minorticks_off()
    ax.set_xlabel("nodes of 8 GPUs (log scale); one interruption per node every "
                  f"{reliability.LLAMA3_405B.node_mtbf_hours / 24:.0f} days (Llama 3)")
    ax.set_ylabel("goodput (% of wall clock)")
    ax.set_title(f"{model}: {state_gb:.0f} GB of training state; goodput by recovery option", fontsize=11)
    ax.legend(fontsize=9, loc="lower left")
    return fig
