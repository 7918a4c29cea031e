"""Checks for labs/lab_12_capstone_plan.ipynb: the learner's plan for a pretraining run, graded like code.

    lab12.check_plan(plan_run, "gpt-30b")       # ex1: module 7's 30B run, today
    lab12.check_plan(plan_run, "llama3.1-8b")   # ex2: an 8B model on 2T tokens
    lab12.summary()                             # raises LabIncomplete while any check fails

The learner writes `plan_run(brief)`, which returns an `fmlab.plan.capstone.RunPlan` (instances, layout, global
batch, reservation, recovery) for a `capstone.Brief`, made with the course's own tools. The check refuses a plan the
planner says cannot work (`capstone.problems`: it must fit by `make_plan`, keep module 6's batch limit, and be
buyable: a count and days that are sold, a Region with a rate), then simulates it under SEEDS, seeds the check
chooses, `capstone.RUNS` runs each: P(miss the deadline) at most `capstone.MAX_MISS` and the 90th-percentile cost
within the budget, under the worst seed. It prints the learner's figures beside the course's reference plan's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from fmlab.labs import Lab
from fmlab.plan import capstone

LAB = Lab("lab 12", ["ex1_plan_30b", "ex2_plan_8b"])
EXERCISES = {"gpt-30b": "ex1_plan_30b", "llama3.1-8b": "ex2_plan_8b"}
SEEDS = (2027, 4242)  # not the notebook's: a plan tuned to one seed's luck does not pass for it


def _line(label: str, run: capstone.RunPlan, g: capstone.Grade) -> str:
    figures = (f"P(miss) {g.p_miss:.1%}, P{capstone.P_COST} ${g.cost_p90:,.0f}, goodput {g.goodput:.2%}"
               if not g.problems else "refused")
    return (f"  {label:10} {run.nodes} x {run.instance} in {run.region}, {run.parallel.label}, {run.reserved_days} "
            f"days, {run.recovery}: {figures}")


def check_plan(plan_run: Callable, brief_key: str) -> bool:
    """The learner's plan for BRIEFS[brief_key]: refused if it cannot work, else graded by simulation."""
    if brief_key not in EXERCISES:
        raise ValueError(f"brief_key must be one of {', '.join(EXERCISES)}, not {brief_key!r}")
    brief = capstone.BRIEFS[brief_key]

    def test(fn):
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = ""
        if "reference_plan" in source:
            print("  make the plan yourself: your function calls capstone.reference_plan, the course's answer")
            return False
        run = fn(brief)
        if not isinstance(run, capstone.RunPlan):
            print(f"  plan_run must return a capstone.RunPlan, not {type(run).__name__}")
            return False
        g = capstone.grade(run, brief, seeds=SEEDS)
        ref = capstone.reference_plan(brief)
        print(f"  {brief.name}: {brief.deadline_days:g} days, ${brief.budget_usd:,.0f}; seeds {SEEDS}")
        print(_line("yours", run, g))
        print(_line("reference", ref, capstone.grade(ref, brief, seeds=SEEDS)))
        for line in g.problems + g.failed:
            print("  " + line)
        return g.passed
    return LAB.check(EXERCISES[brief_key], plan_run, test,
                     f"the plan fits, can be bought, and meets '{brief.name}' in the simulated runs",
                     "choose(candidates(...)) per reservable count, make_plan for its days, capacity.reservation for "
                     "the days to buy, a Region of capacity.RESERVED_RATE, global batch = replicas x micro-batch; "
                     "keep the cheapest that meets the deadline within the budget")


def summary() -> None:
    LAB.summary()
