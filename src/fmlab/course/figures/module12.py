"""Module 12's deck figure: the capstone brief's finish dates, simulated.

Registered in fmlab.course.figures.FIGURES; the package's docstring says how figures are drawn and added.
"""

from __future__ import annotations

from fmlab.course.figures.canvas import new_figure, usd


def capstone_outcomes():
    """Module 12: the 30B brief's finish dates, simulated, for module 11's reservation and for the days P(miss)
    would size were the planner exact (capstone.days_for_miss without the planner's error): each run still draws
    its speed from that error."""
    from dataclasses import replace

    from fmlab.plan import capstone, simulate
    from fmlab.plan.planned import planned_run

    brief = capstone.BRIEFS["gpt-30b"]
    ref = capstone.reference_plan(brief)
    fig = new_figure(8, 3.4)
    ax = fig.add_subplot()
    sized = capstone.days_for_miss(ref, replace(brief, speed_sigma=0.0), seeds=(1,), runs=4000)
    days = planned_run(brief.model, brief.tokens, ref.instance, ref.nodes).days
    for run, color in ((ref, "#4c72b0"), (replace(ref, reserved_days=sized), "#dd8452")):
        out = simulate.simulate(capstone.scenario_of(run, brief), runs=4000, seed=1)
        ax.hist(out.finish_days, bins=80, range=(days, brief.deadline_days + 6), alpha=0.75, color=color,
                label=f"{run.reserved_days} days reserved: P(miss) {out.p_miss(brief.deadline_hours):.0%}, "
                      f"P90 {usd(out.cost_percentile(90))}")
    ax.axvline(brief.deadline_days, color="#c44e52", linestyle="--", label=f"deadline {brief.deadline_days:g} days")
    ax.set(xlabel="finish (days from the first reserved day)", ylabel="simulated runs (of 4,000)",
           title="gpt-30b on 16 x p5: the margin against the fallback's wait")
    ax.legend(fontsize=8)
    return fig
