"""Module 8's deck figures: the module 7 run's checkpoint costs, job MTBF against nodes, the Daly interval.

Registered in fmlab.course.figures.FIGURES; the package's docstring says how figures are drawn and added.
"""

from __future__ import annotations

from fmlab.course.figures.canvas import new_figure
from fmlab.course.figures.module07 import INSTANCE, INSTANCES, MODEL
from fmlab.course.params import module7_plan
from fmlab.plan import catalog, compute, reliability
from fmlab.plan.layout import checkpoint_gb

# Module 8: checkpointing the module 7 run (the assumptions of notebook 08)
WRITE_GB_PER_S_PER_NODE = 1.0  # each node writes its checkpoint shards to its disk at 1 GB/s
S3_GB_PER_S_PER_NODE = 1.25  # each node reads from S3 at 10 Gbit/s
KEEP_CHECKPOINTS = 3  # keep-last-N: what a restart copies back to every instance
MTBF_NODES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def checkpoint_costs() -> dict[str, float]:
    """The module 7 run's checkpoint arithmetic (fmlab.plan): size, save and restart time, job MTBF, Daly.

    Keys: state_gb (fp32 weights + Adam moments), save_s (each node writes its share at
    WRITE_GB_PER_S_PER_NODE), restart_s (every node copies KEEP_CHECKPOINTS checkpoints back from S3 at
    S3_GB_PER_S_PER_NODE: SageMaker's checkpoint sync deletes in S3 what the script prunes, so the prefix holds the
    kept checkpoints; fmlab.sandbox.host.sync_folder does the same, tests/sandbox/test_sandbox.py), mtbf_h (the 16-node job's mean time between interruptions, Llama 3's record) and
    daly_h (the checkpoint interval that wastes least).
    """
    state_gb = checkpoint_gb(compute.param_count(catalog.model(MODEL)))["training"]
    save_h = reliability.transfer_hours(state_gb / INSTANCES, WRITE_GB_PER_S_PER_NODE)
    restart_h = reliability.transfer_hours(KEEP_CHECKPOINTS * state_gb, S3_GB_PER_S_PER_NODE)
    mtbf_h = reliability.job_mtbf_hours(INSTANCES)
    return {"state_gb": state_gb, "save_s": save_h * 3600, "restart_s": restart_h * 3600, "mtbf_h": mtbf_h,
            "daly_h": reliability.daly_interval_hours(save_h, mtbf_h)}


def _duration(hours: float) -> str:
    return f"{hours:.1f} h" if hours < 48 else f"{hours:,.0f} h = {hours / 24:.0f} days"


def job_mtbf():
    """Mean time between interruptions of a synchronous job against its number of nodes, 1 to 2,048, log-log.

    From the Llama 3 record (fmlab.plan.reliability.LLAMA3_405B: 419 unexpected interruptions in 54 days on 2,048
    nodes of 8 H100s): one node is interrupted every node_mtbf_hours, and a job on N nodes, which stops when any
    one of them does, every node_mtbf_hours / N. Marked: one node, the module 7 run on 16 nodes and Llama 3's
    2,048 nodes; dotted lines at a day, a week and the length of the module 7 run.
    """
    rec = reliability.LLAMA3_405B
    hours = [reliability.job_mtbf_hours(n) for n in MTBF_NODES]
    fig = new_figure(10, 4.6)
    ax = fig.subplots()
    ax.plot(MTBF_NODES, hours, "o-", color="#4c72b0", markersize=4,
            label=f"job MTBF = one node's ({rec.node_mtbf_hours / 24:.0f} days) / number of nodes")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(MTBF_NODES, [f"{n:,}" for n in MTBF_NODES])
    run_h = module7_plan().days * 24
    for h, text in ((24, "1 day"), (24 * 7, "1 week"), (run_h, f"the {run_h / 24:.0f}-day {MODEL} run")):
        ax.axhline(h, color="grey", linestyle=":", linewidth=1)
        ax.text(MTBF_NODES[-1] * 1.15, h, text, va="center", ha="left", fontsize=8, color="dimgrey")
    marks = ((1, "one node", "left", (8, 4)),
             (INSTANCES, f"{INSTANCES} nodes ({MODEL}, module 7)", "left", (8, 6)),
             (rec.gpus // rec.gpus_per_node, f"{rec.gpus // rec.gpus_per_node:,} nodes (Llama 3)", "right", (-8, 10)))
    for n, text, align, offset in marks:
        h = reliability.job_mtbf_hours(n)
        ax.plot([n], [h], "o", color="#c44e52", markersize=8, zorder=3)
        ax.annotate(f"{text}:\none interruption every {_duration(h)}", (n, h), xytext=offset,
                    textcoords="offset points", ha=align, va="bottom", fontsize=9, fontweight="bold",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.85})
    ax.set_xlim(0.8, MTBF_NODES[-1] * 1.1)
    ax.set_ylim(min(hours) / 2, max(hours) * 4)
    ax.set_yticks([1, 10, 100, 1000, 10000], ["1", "10", "100", "1,000", "10,000"])
    ax.minorticks_off()
    ax.set_xlabel("nodes in the job (8 GPUs each; log scale)")
    ax.set_ylabel("mean time between interruptions (hours, log scale)")
    ax.set_title(f"Any node stops the whole job: Llama 3's record, {rec.unexpected_interruptions} unexpected "
                 f"interruptions in {rec.days:.0f} days on {rec.gpus:,} GPUs", fontsize=11)
    ax.legend(fontsize=8, loc="lower left")
    return fig


def checkpoint_interval():
    """Share of wall-clock time lost against the checkpoint interval, gpt-30b on 16 x ml.p4d.24xlarge.

    The save time is the training state (fmlab.plan.layout.checkpoint_gb) split over the 16 nodes, each writing at
    1 GB/s; the job's mean time between interruptions is that of 16 nodes (fmlab.plan.reliability, Llama 3's
    record); each restart first copies the 3 kept checkpoints back to every node at 1.25 GB/s. The curve is
    fmlab.course.plots.wasted_time_vs_interval (saving + redoing lost work + restarting); marked: Daly's optimum
    and AWS's best-practice range, every 1 to 3 hours (shaded), with its ends.
    """
    from fmlab.course.plots import wasted_time_vs_interval

    c = checkpoint_costs()
    lo, hi = reliability.BEST_PRACTICE_INTERVAL_HOURS
    fig = new_figure(10, 4.6)
    ax = fig.subplots()
    ax.axvspan(lo, hi, color="#55a868", alpha=0.12, label=f"best practice: every {lo:g} to {hi:g} hours")
    wasted_time_vs_interval(c["save_s"] / 3600, c["mtbf_h"], restart_hours=c["restart_s"] / 3600,
                            marks={f"best practice, {lo:g} h": lo, f"best practice, {hi:g} h": hi}, ax=ax)
    ax.set_ylim(0, None)
    ticks = {5 / 60: "5 min", 0.25: "15 min", 1.0: "1 h", 3.0: "3 h", 10.0: "10 h", 24.0: "1 day", 48.0: "2 days"}
    ax.set_xticks(list(ticks), list(ticks.values()))
    ax.minorticks_off()
    ax.set_xlabel("checkpoint interval (log scale)")
    ax.set_title(f"{MODEL} on {INSTANCES} x {INSTANCE}: {c['state_gb']:.0f} GB checkpoint saved in "
                 f"{c['save_s']:.0f} s, restart {c['restart_s'] / 60:.0f} min, one interruption every "
                 f"{c['mtbf_h']:.0f} h", fontsize=11)
    ax.legend(fontsize=9, loc="upper center")
    return fig
