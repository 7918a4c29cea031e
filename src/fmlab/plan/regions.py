"""Where a large run can go: each instance type and Region beside your quotas, the run's fit and days, and both prices.

    from fmlab.plan import regions
    rows = regions.options("gpt-30b", 300e9, deadline_days=30, quotas={("us-east-1", "ml.p5.48xlarge"): 16})
    best = regions.choose(rows)      # feasible (quota, memory, deadline, reservable), then cheapest

Each option plans the run on its instance type as the course plans every run (fmlab.plan.planned.planned_run: the
layout, micro-batch and batch the planner chooses), then prices its hours reserved (Capacity Blocks' rates, the days
capacity.reservation sizes) and on demand, on one basis (fmlab.plan.capacity's PRICE_BASIS). Module 11.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fmlab.plan import capacity, catalog
from fmlab.plan.capacity import PRICE_BASIS
from fmlab.plan.compute import PlanError, check_positive
from fmlab.plan.planned import planned_run


@dataclass
class CapacityOption:
    instance: str
    region: str
    instances: int
    days: float  # the run's days: the planner's layout for this cluster (fmlab.plan.planned.planned_run) at its predicted step
    fits: bool  # some layout fits in device memory with the planner's headroom
    quota: int  # instances the account may run there (0: none, ask for an increase)
    on_demand_usd: float  # EC2 on-demand for the run's hours at PRICE_DATE (PRICE_BASIS); NaN where none was read
    reserved_usd: float  # EC2 Capacity Blocks for the days that hold the job; NaN where no rate is published
    reserved_days: int  # Capacity Blocks' days that hold the job (whole days up to 14, then weeks)
    why_not: str  # "" when feasible
    basis: str = PRICE_BASIS  # both prices are of this one kind
    on_demand_today_usd: float = math.nan  # the same hours at today's on-demand price (EC2_ON_DEMAND_DATE): shown only

    @property
    def feasible(self) -> bool:
        return not self.why_not


def options(model: str, tokens: float, *, deadline_days: float, quotas: dict[tuple[str, str], int],
            instances_by_type: dict[str, int] | None = None, mfu: float | None = None,
            reserve_from_instances: int = 16) -> list[CapacityOption]:
    """Every (instance type, Region) where reserved capacity is sold, for one run.

    `instances_by_type`: how many of each type (default: 16 p4d, 16 p5, 8 p5en). `mfu`: None, the planner's predicted
    step (fmlab.plan.speed); a number, a "what if". `reserve_from_instances`:
    from this many instances on, the run needs reserved capacity (the course's rule of thumb, not an AWS
    figure); below it, on-demand is taken to be available."""
    check_positive("deadline_days", deadline_days)
    chosen = instances_by_type or {"ml.p4d.24xlarge": 16, "ml.p5.48xlarge": 16, "ml.p5en.48xlarge": 8}
    rows = []
    for name, count in chosen.items():
        catalog.instance(name)  # an unknown type raises with the list
        plan = planned_run(model, tokens, name, count, mfu=mfu)  # the run as the course plans it on this cluster
        regions = capacity.RESERVABLE_REGIONS.get(name, ())
        for region in regions:
            quota = int(quotas.get((region, name), 0))
            fits_one = plan.days * capacity.JOB_MARGIN < capacity.PLAN_DAYS[1]
            days = capacity.reservation(plan.days, kind="capacity block").days if fits_one else capacity.PLAN_DAYS[1]
            rate = capacity.RESERVED_RATE.get((name, region), math.nan)
            reserved = rate * capacity.plan_count(count) * 24 * days
            on_demand = capacity.EC2_ON_DEMAND_AT_PRICE_DATE.get(name, math.nan) * count * 24 * plan.days
            on_demand_today = capacity.EC2_ON_DEMAND.get(name, math.nan) * count * 24 * plan.days
            why = []
            if not plan.fits:
                why.append(f"does not fit ({plan.memory_gb_per_device:.0f} GB per device)")
            if quota < count:
                why.append(f"quota {quota} < {count} instances")
            if plan.days > deadline_days:
                why.append(f"{plan.days:.1f} days > deadline {deadline_days:g}")
            if count >= reserve_from_instances and math.isnan(rate):
                why.append("needs a reservation; no published rate to plan with")
            if count < reserve_from_instances and math.isnan(on_demand) and math.isnan(on_demand_today):
                why.append("on demand; no EC2 on-demand price to plan with")
            rows.append(CapacityOption(name, region, count, plan.days, plan.fits, quota, on_demand,
                                       reserved, days, "; ".join(why), on_demand_today_usd=on_demand_today))
    return rows



def choose(rows: list[CapacityOption], reserve_from_instances: int = 16) -> CapacityOption:
    """The cheapest feasible option, priced reserved when it needs a reservation, else on demand, all at prices of
    one date: PRICE_DATE when a reservation is among them (an on-demand option without a price of that date cannot
    be weighed against it and drops out), today's on-demand prices when none is."""
    feasible = [r for r in rows if r.feasible]
    if not feasible:
        reasons = "; ".join(f"{r.instance} in {r.region}: {r.why_not}" for r in rows) or "no options"
        raise PlanError(f"no instance type and Region can run this: {reasons}. Ask for a quota increase, "
                        "extend the deadline or add instances")

    reserved = [r for r in feasible if r.instances >= reserve_from_instances]
    if not reserved:  # on demand only: today's prices, all of one date
        return min(feasible, key=lambda r: r.on_demand_today_usd)
    # a reservation in the running: every option at the reserved rates' date (PRICE_BASIS)
    dated = [r for r in feasible if r in reserved or not math.isnan(r.on_demand_usd)]

    def price(r: CapacityOption) -> float:
        return r.reserved_usd if r in reserved else r.on_demand_usd
    return min(dated, key=price)
