"""Matplotlib figures for the notebooks; every figure has a title, labelled axes and units.

    from fmlab.course import plots
    plots.time_and_cost_vs_cluster("gpt-30b", 300e9, "ml.p4d.24xlarge", [4, 8, 16, 32, 64])
"""

from __future__ import annotations

from fmlab.plan import compute
from fmlab.plan.layout import make_plan
from fmlab.plan.parallelism import ParallelConfig
from fmlab.plan.planned import planned_run


def time_and_cost_vs_cluster(model: str, tokens: float, instance: str, counts: list[int], mfu: float | None = None,
                             mfu_at_scale: float | None = None, ax=None, micro_batches=(1, 2, 4, 8)):
    """Days (left axis) and cost (right axis) against the number of instances.

    With `mfu` None, each cluster size is planned as module 7 plans its run: the layout and micro-batch the planner
    chooses (fmlab.plan.layout.choose) and the days of its predicted step, at GPT-3's global batch for the model's
    size; as the cluster grows each GPU gets fewer tokens per step to hide the same gathers behind, and the MFU
    says how well the chosen layouts still hide them (the title gives its range). With a number, a "what if" at that MFU; with `mfu_at_scale` as well, MFU falls
    linearly from `mfu` at the smallest cluster to `mfu_at_scale` at the largest.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    lo, hi = min(counts), max(counts)
    days, costs, mfus = [], [], []
    for n in counts:
        if mfu is None:
            est = planned_run(model, tokens, instance, n, micro_batches=micro_batches)
        else:
            frac = 0 if hi == lo else (n - lo) / (hi - lo)
            m = mfu if mfu_at_scale is None else mfu + frac * (mfu_at_scale - mfu)
            est = compute.estimate_run(model, tokens, instance, n, m)
        days.append(est.days)
        costs.append(est.cost_usd / 1e3)
        mfus.append(est.mfu)
    ax.plot(counts, days, "o-", color="tab:blue", label="time")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(f"cluster size (number of {instance})")
    ax.set_ylabel("time to train (days)", color="tab:blue")
    twin = ax.twinx()
    twin.plot(counts, costs, "s--", color="tab:red", label="cost")
    twin.set_ylabel("on-demand cost (thousand USD)", color="tab:red")
    twin.set_ylim(0, max(costs) * 1.3)
    scale = (f", predicted MFU {mfus[0]:.0%} -> {mfus[-1]:.0%}" if mfu is None
             else f", MFU {mfu:.0%}" + ("" if mfu_at_scale is None else f" -> {mfu_at_scale:.0%}") + " (what if)")
    ax.set_title(f"{model} on {tokens / 1e9:,.0f}B tokens: time and cost vs cluster size{scale}")
    ax.figure.tight_layout()
    return ax.figure, {"counts": counts, "days": days, "cost_kusd": costs, "mfu": mfus}


def published_vs_planned(rows: list[dict], ax=None):
    """Bars of published days beside planned days (the planner at each run's implied or assumed MFU)."""
    import matplotlib.pyplot as plt
    import numpy as np

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["published_days"] for r in rows], 0.4, label="published")
    ax.bar(x + 0.2, [r["planned_days"] for r in rows], 0.4, label="planner at MFU 40%")
    ax.set_xticks(x, [r["run"] for r in rows], rotation=15)
    ax.set_ylabel("training time (days)")
    ax.set_title("Published training times beside the planner's estimate")
    ax.legend()
    ax.figure.tight_layout()
    return ax.figure


def phase_costs(phases, ax=None):
    """Cost and time of each phase of a phased scaling plan, on log axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    names = [f"{p.name}\n{p.estimate.params / 1e9:.2g}B params\n{p.data_fraction:.0%} data, {p.devices} dev"
             for p in phases]
    ax.bar(names, [p.estimate.cost_usd for p in phases], color="tab:purple")
    ax.set_yscale("log")
    ax.set_ylabel("on-demand cost (USD, log scale)")
    for i, p in enumerate(phases):
        ax.annotate(f"{p.estimate.days:.2g} d", (i, p.estimate.cost_usd), ha="center", va="bottom")
    ax.set_title("Phased scaling plan: cost per phase (days above each bar)")
    ax.figure.tight_layout()
    return ax.figure


def memory_breakdown(model: str, instance: str, count: int, layouts: dict[str, ParallelConfig], ax=None):
    """Stacked bars of memory per device (GB) for several layouts of the same run, with the device limit.
    `layouts`: label -> ParallelConfig."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    plans = {label: make_plan(model, 1e9, instance, count, parallel=layout, suggest=False)
             for label, layout in layouts.items()}
    parts = list(next(iter(plans.values())).memory_breakdown_gb)
    bottom = [0.0] * len(plans)
    for part in parts:
        values = [p.memory_breakdown_gb[part] for p in plans.values()]
        ax.bar(list(plans), values, bottom=bottom, label=part.replace("_", " "))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    usable = next(iter(plans.values())).usable_memory_gb
    ax.axhline(usable, color="black", linestyle="--", label=f"usable device memory ({usable:.0f} GB)")
    top = 3 * usable  # a linear axis keeps stacked parts honest; taller bars are cut and labelled
    ax.set_ylim(0, top)
    for i, total in enumerate(bottom):
        ax.annotate(f"{total:,.0f} GB", (i, min(total, top)), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 2), textcoords="offset points", annotation_clip=False)
    ax.set_ylabel("memory per device (GB)")
    ax.set_title(f"{model} on {count} x {instance}: memory per device by layout", pad=14)
    ax.legend(fontsize=7, loc="upper right")
    ax.tick_params(axis="x", labelsize=8)
    ax.figure.tight_layout()
    return ax.figure, plans


def live_loss(job, poll: float = 1.0, title: str | None = None):
    """Redraw the job's training and held-out loss while it runs; returns when the job has ended.

    In Jupyter the figure updates in place; executed headless (papermill) the final figure remains."""
    import time

    import matplotlib.pyplot as plt
    from IPython.display import display

    fig, ax = plt.subplots(figsize=(7, 3.5))
    handle = display(fig, display_id=True)
    final = ("Completed", "Failed", "Stopped")
    drawn = None
    while True:
        status = job.status()
        metrics = job.metrics()
        if (status, len(metrics)) == drawn:  # nothing new: drawing again would take CPU from the job's processes
            time.sleep(poll)
            continue
        drawn = (status, len(metrics))
        ax.clear()
        if not metrics.empty and "loss" in metrics:
            train = metrics.dropna(subset=["loss"])
            ax.plot(train["step"], train["loss"], "o-", label="training loss")
        if not metrics.empty and "val_loss" in metrics:
            val = metrics.dropna(subset=["val_loss"])
            ax.plot(val["step"], val["val_loss"], "s--", label="held-out loss")
        ax.set_xlabel("step")
        ax.set_ylabel("loss (nats per token)")
        ax.set_title(title or f"{job.name}: {status}")
        if ax.lines:
            ax.legend()
        handle.update(fig)
        if status in final:
            break
        time.sleep(poll)
    plt.close(fig)
    return fig


def wasted_time_vs_interval(save_hours: float, mtbf_hours: float, restart_hours: float = 0.0,
                            marks: dict[str, float] | None = None, ax=None):
    """Share of wall-clock time lost (saving + redoing lost work + restarting) against the checkpoint interval,
    log-scaled: the exact expectation (renewal theory, reliability.expected_wasted_fraction) and, dashed, Young and
    Daly's first order (reliability.wasted_fraction), the interval range where the first order is more than 10% off
    shaded; with the Daly optimum and any `marks` (label -> interval in hours) drawn on the exact curve.

    Given an `ax` it draws there without pyplot (the deck figure `checkpoint_interval` does so)."""
    import numpy as np

    from fmlab.plan import reliability

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7, 3.8))
    best = reliability.daly_interval_hours(save_hours, mtbf_hours)
    hours = np.geomspace(best / 30, best * 30, 200)
    exact = np.array([100 * reliability.expected_wasted_fraction(h, save_hours, mtbf_hours, restart_hours)
                      for h in hours])
    first = np.array([100 * reliability.wasted_fraction(h, save_hours, mtbf_hours, restart_hours) for h in hours])
    ax.plot(hours, exact, color="tab:blue", label="exact (renewal theory)")
    ax.plot(hours, first, "--", color="tab:gray", linewidth=1, label="first order (Young/Daly)")
    off = hours[np.abs(first / exact - 1) > 0.1]
    if off.size:
        ax.axvspan(off.min(), off.max(), color="tab:gray", alpha=0.1, label="first order over 10% off")
    ax.set_xscale("log")
    points = {"optimum (Daly)": best, **(marks or {})}
    for (label, h), color in zip(points.items(), ("tab:red", "tab:green", "tab:orange", "tab:purple"), strict=False):
        w = 100 * reliability.expected_wasted_fraction(h, save_hours, mtbf_hours, restart_hours)
        ax.plot([h], [w], "o", color=color, label=f"{label}: every {h:.2g} h, {w:.2f}% lost")
    ax.set_xlabel("checkpoint interval (hours, log scale)")
    ax.set_ylabel("wall-clock time lost (%)")
    ax.set_title(f"save {save_hours * 3600:.0f} s, one interruption every {mtbf_hours:.0f} h")
    ax.legend(fontsize=8)
    return ax


def run_outcomes(outcomes, deadline_days: float, budget_usd: float, title: str = ""):
    """The simulated runs of module 12: the finish date's histogram against the deadline, and the cost's cumulative
    distribution against the budget (P90 marked)."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    left.hist(outcomes.finish_days, bins=60, color="#4c72b0")
    left.axvline(deadline_days, color="#c44e52", linestyle="--", label=f"deadline {deadline_days:g} days")
    left.set(xlabel="finish (days from the first reserved day)", ylabel="simulated runs",
             title=f"P(miss) = {outcomes.p_miss(deadline_days * 24):.1%}")
    left.legend()
    cost = np.sort(outcomes.cost_usd) / 1e3
    right.plot(cost, np.arange(1, len(cost) + 1) / len(cost), color="#4c72b0")
    p90 = outcomes.cost_percentile(90) / 1e3
    right.axvline(budget_usd / 1e3, color="#c44e52", linestyle="--", label=f"budget ${budget_usd / 1e3:,.0f}k")
    right.axvline(p90, color="#55a868", linestyle=":", label=f"P90 ${p90:,.0f}k")
    right.set(xlabel="cost (thousand USD, prices of one date)", ylabel="share of runs at or below", ylim=(0, 1.02),
              title="cost, cumulative")
    right.legend(loc="lower right")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def tornado(rows: list[dict], max_miss: float = 0.10, budget_usd: float | None = None):
    """Module 12: each assumption of the ledger at its low and its high (capstone.sensitivity's rows), as bars of
    P(miss) and of the P90 cost around the plan's own, the widest swing on top."""
    import matplotlib.pyplot as plt

    rows = rows[::-1]  # the widest at the top of the chart
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.38 * len(rows) + 1.4), sharey=True)
    names = [r["assumption"] for r in rows]
    cost_key = next(k for k in rows[0] if k.endswith("cost $") and "at" not in k)
    for ax, key, scale, limit, label in (
            (left, "P(miss)", 100, 100 * max_miss, "P(miss the deadline), %"),
            (right, cost_key, 1e-3, budget_usd / 1e3 if budget_usd else None, "P90 cost, thousand USD")):
        base = rows[0][key] * scale
        low = [r[f"{key} at low" if key == "P(miss)" else key.replace(" $", " at low $")] * scale for r in rows]
        high = [r[f"{key} at high" if key == "P(miss)" else key.replace(" $", " at high $")] * scale for r in rows]
        y = range(len(rows))
        ax.barh(y, [v - base for v in low], left=base, color="#4c72b0", label="at the range's low")
        ax.barh(y, [v - base for v in high], left=base, color="#dd8452", alpha=0.8, label="at the range's high")
        ax.axvline(base, color="black", linewidth=0.8)
        if limit:
            ax.axvline(limit, color="#c44e52", linestyle="--", label="the limit")
        ax.set(xlabel=label)
        ax.legend(fontsize=7, loc="lower right")
    left.set_yticks(range(len(rows)), names)
    fig.suptitle("each assumption from its low to its high, the others as the brief has them")
    fig.tight_layout()
    return fig
