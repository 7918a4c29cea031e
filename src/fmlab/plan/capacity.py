"""Capacity and Region: where a large run can get its instances, and what reserving them costs (module 11).

    from fmlab.plan import capacity
    rows = capacity.options("gpt-30b", 300e9, deadline_days=30, quotas={("us-east-1", "ml.p5.48xlarge"): 16})
    best = capacity.choose(rows)      # feasible (quota, memory, deadline, reservable), then cheapest
    capacity.reserved_days(12.9)      # 13: training plans are sold in whole days, 1 to 182

For 16 and more GPU nodes, on-demand capacity is rarely there when you want it; AWS sells reserved capacity
for a fixed window: SageMaker training plans (for training jobs or HyperPod clusters) and EC2 Capacity Blocks
(EC2, EKS). Both are bought up front for whole days, at counts of 1, 2, 4, ... 64 instances, in the Regions
and instance types listed below. A plan is paid for every reserved hour, used or not; on-demand only for the
hours the job runs, if the capacity can be had. `options` puts each (instance type, Region) beside your
quotas, the run's memory fit and time, and both prices.

Facts (each with its source and the day it was read):
- RESERVABLE_REGIONS: where EC2 Capacity Blocks sell each type: the EC2 user guide, "Capacity Blocks for ML"
  (docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html, read 2026-11-24). Training plans keep
  their own list ("Supported instance types and AWS Regions"), which no stored copy had: a
  SearchTrainingPlanOfferings call in the Region is the real test, and an empty answer means no capacity.
- PLAN_DAYS / PLAN_COUNTS: the SageMaker developer guide, "Search training plan offerings": "Reservation
  durations are available in 1-day increments from 1 to 182 days"; "instance quantity options are 1, 2, 4, 8,
  16, 32 or 64" (docs.aws.amazon.com/sagemaker/latest/dg/search-training-plan-offerings-api-cli-sdk.html,
  read 2026-11-24).
- RESERVED_RATE: the EC2 Capacity Blocks pricing page's effective instance hourly rates, as a stored copy of
  the page shows them (the table the page says it updates regularly; this one before its 2025-01-01 update);
  a training plan's own price is only known from SearchTrainingPlanOfferings' UpfrontFee, in your account.
The on-demand price is the catalog's (fmlab.plan.catalog: us-east-1; other Regions are assumed equal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fmlab.plan import catalog
from fmlab.plan.compute import PlanError, check_positive

READ = "2026-11-24"
CAPACITY_BLOCKS_SOURCE = ("EC2 user guide, 'Capacity Blocks for ML' (docs.aws.amazon.com/AWSEC2/latest/UserGuide/"
                          f"ec2-capacity-blocks.html), supported instance types and Regions, read {READ}")
PLAN_LIMITS_SOURCE = ("SageMaker developer guide, 'Search training plan offerings' (docs.aws.amazon.com/sagemaker/"
                      f"latest/dg/search-training-plan-offerings-api-cli-sdk.html), read {READ}")
RESERVED_RATE_SOURCE = ("EC2 Capacity Blocks pricing page (aws.amazon.com/ec2/capacityblocks/pricing), effective "
                        "instance hourly rate, from a stored copy of the page made before its 2025-01-01 update "
                        f"(read {READ}); the rates change with supply and demand")

RESERVABLE_REGIONS: dict[str, tuple[str, ...]] = {
    "ml.p5.48xlarge": ("us-east-1", "us-east-2", "us-west-2", "ap-northeast-1"),
    "ml.p5e.48xlarge": ("us-east-2",),
    "ml.p5en.48xlarge": ("us-east-2",),
    "ml.p4d.24xlarge": ("us-east-2", "us-west-2"),
    "ml.trn1.32xlarge": ("us-east-1", "ap-southeast-4"),
    "ml.trn2.48xlarge": ("us-east-2",),
}
PLAN_DAYS = (1, 182)
PLAN_COUNTS = (1, 2, 4, 8, 16, 32, 64)
# USD per instance-hour, by (instance, Region), where the stored pricing page gives one
RESERVED_RATE: dict[tuple[str, str], float] = {
    ("ml.p5.48xlarge", "us-east-1"): 39.33, ("ml.p5.48xlarge", "us-east-2"): 39.33,
    ("ml.p4d.24xlarge", "us-east-2"): 14.75, ("ml.p4d.24xlarge", "us-west-2"): 14.75,
    ("ml.trn1.32xlarge", "ap-southeast-4"): 15.49,
}


def reserved_days(run_days: float) -> int:
    """Whole days to reserve for a run of `run_days` (PlanError beyond a plan's 182 days: split the run)."""
    check_positive("run_days", run_days)
    days = max(PLAN_DAYS[0], math.ceil(run_days - 1e-9))
    if days > PLAN_DAYS[1]:
        raise PlanError(f"{run_days:.1f} days is more than one training plan's {PLAN_DAYS[1]} days: buy two plans "
                        "back to back, or use more instances")
    return days


def plan_count(instances: int) -> int:
    """The smallest count a plan sells that holds `instances` (PlanError above 64: several plans)."""
    fitting = [c for c in PLAN_COUNTS if c >= instances]
    if not fitting:
        raise PlanError(f"{instances} instances is more than one plan's {PLAN_COUNTS[-1]}: reserve several plans")
    return fitting[0]


@dataclass
class CapacityOption:
    instance: str
    region: str
    instances: int
    days: float  # the run's days at the planner's MFU
    fits: bool  # the model fits in device memory with full sharding
    quota: int  # instances the account may run there (0: none, ask for an increase)
    on_demand_usd: float
    reserved_usd: float  # NaN where no reserved rate is published
    reserved_days: int
    why_not: str  # "" when feasible

    @property
    def feasible(self) -> bool:
        return not self.why_not


def options(model: str, tokens: float, *, deadline_days: float, quotas: dict[tuple[str, str], int],
            instances_by_type: dict[str, int] | None = None, mfu: float = 0.4,
            reserve_from_instances: int = 16) -> list[CapacityOption]:
    """Every (instance type, Region) where reserved capacity is sold, for one run.

    `instances_by_type`: how many of each type (default: 16 p4d, 16 p5, 8 p5en). `reserve_from_instances`:
    from this many instances on, the run needs reserved capacity (the course's rule of thumb, not an AWS
    figure); below it, on-demand is taken to be available."""
    from fmlab.plan.layout import make_plan  # a sibling module; imported here so this one loads alone
    from fmlab.plan.parallelism import ParallelConfig

    check_positive("deadline_days", deadline_days)
    chosen = instances_by_type or {"ml.p4d.24xlarge": 16, "ml.p5.48xlarge": 16, "ml.p5en.48xlarge": 8}
    rows = []
    for name, count in chosen.items():
        inst = catalog.instance(name)
        plan = make_plan(model, tokens, inst, count, parallel=ParallelConfig(sharding="full"), mfu=mfu, suggest=False)
        regions = RESERVABLE_REGIONS.get(name, ())
        for region in regions:
            quota = int(quotas.get((region, name), 0))
            days = reserved_days(plan.days) if plan.days <= PLAN_DAYS[1] else PLAN_DAYS[1]
            rate = RESERVED_RATE.get((name, region), math.nan)
            reserved = rate * plan_count(count) * 24 * days
            why = []
            if not plan.fits:
                why.append(f"does not fit ({plan.memory_gb_per_device:.0f} GB per device)")
            if quota < count:
                why.append(f"quota {quota} < {count} instances")
            if plan.days > deadline_days:
                why.append(f"{plan.days:.1f} days > deadline {deadline_days:g}")
            if count >= reserve_from_instances and math.isnan(rate):
                why.append("needs a reservation; no published rate to plan with")
            rows.append(CapacityOption(name, region, count, plan.days, plan.fits, quota, plan.cost_usd,
                                       reserved, days, "; ".join(why)))
    return rows


def choose(rows: list[CapacityOption], reserve_from_instances: int = 16) -> CapacityOption:
    """The cheapest feasible option, priced reserved when it needs a reservation, else on demand."""
    feasible = [r for r in rows if r.feasible]
    if not feasible:
        reasons = "; ".join(f"{r.instance} in {r.region}: {r.why_not}" for r in rows) or "no options"
        raise PlanError(f"no instance type and Region can run this: {reasons}. Ask for a quota increase, "
                        "extend the deadline or add instances")

    def price(r: CapacityOption) -> float:
        return r.reserved_usd if r.instances >= reserve_from_instances else r.on_demand_usd
    return min(feasible, key=price)
