"""ipywidgets calculators for the notebooks: change an input, see days, cost and memory change.

    from fmlab.course.widgets import cost_calculator
    cost_calculator()            # in a notebook cell

Each control carries a CSS class (fmlab-calc-*) and the result spans fmlab-days / fmlab-cost / fmlab-fits,
so a browser test can drive the calculator the way a learner does.
"""

from __future__ import annotations

import html
import math

from fmlab.plan import catalog
from fmlab.plan.compute import PlanError
from fmlab.plan.layout import make_plan
from fmlab.plan.parallelism import CHECKPOINTING, ParallelConfig

LARGE_MODELS = [name for name in catalog.MODELS if not name.startswith("tiny")]


def calculator_result(model: str, tokens_billion: float, instance: str, count: int, mfu: float,
                      sharding: str = "full", activation_checkpointing: str = "full",
                      activation_offloading: bool = False, hybrid_shard_degree: int = 0) -> str:
    """The calculator's output as HTML (also used without widgets, e.g. in tests). The layout arguments are
    ParallelConfig's fields, the flags of `fmlab plan` and `fmlab.train`."""
    try:
        parallel = ParallelConfig(sharding=sharding, hybrid_shard_degree=hybrid_shard_degree,
                                  activation_checkpointing=activation_checkpointing,
                                  activation_offloading=activation_offloading)
        plan = make_plan(model, tokens_billion * 1e9, instance, count, parallel=parallel, mfu=mfu)
    except PlanError as e:
        return f'<div class="fmlab-error"><b>Impossible plan:</b> {html.escape(str(e))}</div>'
    verdict = "yes" if plan.fits else "no"
    colour = "#1a7f37" if plan.fits else "#cf222e"
    fix = "" if plan.fits else f"<br><i>To fit: {html.escape('; '.join(plan.suggestions) or 'a larger instance')}</i>"
    return (
        f"<table>"
        f"<tr><td>Parameters</td><td>{plan.params / 1e9:,.2f} B</td></tr>"
        f"<tr><td>Training compute</td><td>{plan.train_flops:.3g} FLOPs</td></tr>"
        f"<tr><td>Devices</td><td>{plan.devices} ({plan.instances} x {plan.instance})</td></tr>"
        f"<tr><td>Utilisation</td><td>HFU {plan.hfu:.0%}, MFU {plan.mfu:.0%}</td></tr>"
        f"<tr><td>Speed</td><td>{html.escape(plan.speed_basis)}</td></tr>"
        f'<tr><td>Time</td><td><b><span class="fmlab-days">{plan.days:,.1f}</span> days</b></td></tr>'
        + (f'<tr><td>Cost (on-demand)</td><td><b>$<span class="fmlab-cost">{plan.cost_usd:.0f}</span></b></td></tr>'
           if math.isfinite(plan.cost_usd) else
           '<tr><td>Cost (on-demand)</td><td><b><span class="fmlab-cost">unknown</span></b> (no published '
           'price)</td></tr>')
        + f"<tr><td>Memory per device</td><td>{plan.memory_gb_per_device:,.1f} GB of "
        f"{plan.usable_memory_gb:.0f} GB usable</td></tr>"
        f'<tr><td>Fits</td><td style="color:{colour}"><b><span class="fmlab-fits">{verdict}</span></b>{fix}</td></tr>'
        f"</table><small>{html.escape(plan.price_note)}</small>"
    )


def cost_calculator(model: str = "gpt-30b", tokens_billion: float = 300, instance: str = "ml.p4d.24xlarge",
                    count: int = 16, mfu: float = 0.4, sharding: str = "full", activation_checkpointing: str = "full",
                    activation_offloading: bool = False):
    """Model, tokens, instance type, count, MFU -> days, cost, memory per device, fits or not."""
    import ipywidgets as w

    style = {"description_width": "150px"}
    layout = w.Layout(width="420px")
    controls = {
        "model": w.Dropdown(options=LARGE_MODELS, value=model, description="Model", style=style, layout=layout),
        "tokens_billion": w.BoundedFloatText(value=tokens_billion, min=0.001, max=100_000, step=10,
                                             description="Tokens (billions)", style=style, layout=layout),
        "instance": w.Dropdown(options=list(catalog.INSTANCES), value=instance, description="Instance type",
                               style=style, layout=layout),
        "count": w.BoundedIntText(value=count, min=1, max=4096, description="Instances (count)", style=style,
                                  layout=layout),
        "mfu": w.FloatSlider(value=mfu, min=0.05, max=0.7, step=0.01, description="HFU (fraction of peak, a what if)",
                             readout_format=".0%", style=style, layout=layout),
        "sharding": w.Dropdown(options=["none", "zero1", "zero2", "full"], value=sharding,
                               description="Sharding", style=style, layout=layout),
        "activation_checkpointing": w.Dropdown(options=list(CHECKPOINTING), value=activation_checkpointing,
                                               description="Activation checkpointing", style=style, layout=layout),
        "activation_offloading": w.Dropdown(options=[("no", False), ("yes, to host memory", True)],
                                            value=activation_offloading, description="Activation offloading",
                                            style=style, layout=layout),
    }
    css = {"tokens_billion": "tokens", "count": "count"}
    for key, control in controls.items():
        control.add_class(f"fmlab-calc-{css.get(key, key)}")
    result = w.HTML()
    result.add_class("fmlab-calc-result")

    def update(_=None):
        result.value = calculator_result(**{k: c.value for k, c in controls.items()})

    for control in controls.values():
        control.observe(update, names="value")
    update()
    return w.HBox([w.VBox(list(controls.values())), result])


def plan_panel(run, brief, runs: int = 2_000, seed: int = 1):
    """Module 12: the plan's platform, recovery option, interval, saves kept, detector, margin and nodes as controls;
    each change re-plans (layout by module 6's rule, reservation by module 11's) and re-simulates `runs` runs (well
    under a second). A plan the grader refuses (a recovery its platform cannot run, too few saves kept) says why."""
    import dataclasses

    import ipywidgets as w

    from fmlab.plan import capacity, capstone
    from fmlab.plan.compute import PlanError

    style, layout = {"description_width": "170px"}, w.Layout(width="440px")
    daly = capstone.scenario_of(run, brief).interval_hours
    controls = {
        "platform": w.Dropdown(options=list(brief.platforms), value=run.platform, description="Platform",
                               style=style, layout=layout),
        "recovery": w.Dropdown(options=["checkpoint to S3", "tiered: memory, then S3", "checkpointless"],
                               value=run.recovery, description="Recovery option", style=style, layout=layout),
        "interval": w.FloatLogSlider(value=daly, base=10, min=-2, max=1.3, step=0.05, readout_format=".2f",
                                     description="Checkpoint interval (h)", style=style, layout=layout),
        "keep": w.IntSlider(value=run.keep_checkpoints, min=1, max=40, description="Saves kept", style=style,
                            layout=layout),
        "detector": w.Dropdown(options=list(capstone.DETECTORS), value=run.detector, description="Spike detector",
                               style=style, layout=layout),
        "margin": w.FloatSlider(value=capacity.JOB_MARGIN, min=1.0, max=2.0, step=0.05, description="Margin (x run)",
                                style=style, layout=layout),
        "nodes": w.Dropdown(options=[n for n in capacity.PLAN_COUNTS if 4 <= n <= brief.max_nodes], value=run.nodes,
                            description="Instances", style=style, layout=layout),
    }
    result = w.HTML()

    def update(_=None):
        c = {k: v.value for k, v in controls.items()}
        try:
            planned = capstone.plan_for(brief, run.instance, c["nodes"], run.region, c["margin"], run.reservation_kind,
                                        platform=c["platform"])
        except PlanError as e:
            result.value = f"<b>cannot be planned:</b> {e}"
            return
        parallel, days = planned.parallel, planned.reserved_days
        changed = dataclasses.replace(run, nodes=c["nodes"], parallel=parallel, reserved_days=days,
                                      global_batch=planned.global_batch, micro_batch=planned.micro_batch,
                                      platform=c["platform"],
                                      interval_hours=c["interval"], recovery=c["recovery"],
                                      keep_checkpoints=c["keep"], detector=c["detector"])
        g = capstone.grade(changed, brief, seeds=(seed,), runs=runs)
        verdict = "passes" if g.passed else "fails: " + "; ".join(g.problems + g.failed)
        figures = "" if g.problems else (
            f"P(miss the {brief.deadline_days:g}-day deadline) <b>{g.p_miss:.1%}</b><br>"
            f"P{capstone.P_COST} cost <b>${g.cost_p90:,.0f}</b> (budget ${brief.budget_usd:,.0f})<br>"
            f"goodput {g.goodput:.2%}<br>")
        result.value = (f"<b>{c['nodes']} x {run.instance}</b> on {c['platform']}, {parallel.label}, {days} days "
                        f"reserved<br>{figures}{verdict}")

    for control in controls.values():
        control.observe(update, names="value")
    update()
    return w.HBox([w.VBox(list(controls.values())), result])
