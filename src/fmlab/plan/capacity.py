"""Capacity and Region: where a large run can get its instances, and what reserving them costs (module 11).

    from fmlab.plan import capacity
    capacity.reservation(9.0).days    # 11: the days to buy so that the reservation holds the job of a 9.0-day run

For 16 and more GPU nodes, on-demand capacity is rarely there when you want it; AWS sells reserved capacity
for a fixed window: SageMaker training plans (for training jobs or HyperPod clusters) and EC2 Capacity Blocks
(EC2, EKS). Both are bought up front for whole days, at counts of 1, 2, 4, ... 64 instances, in the Regions
and instance types listed below. A plan is paid for every reserved hour, used or not; on-demand only for the
hours the job runs, if the capacity can be had. fmlab.plan.regions puts each (instance type, Region) beside
your quotas, the run's memory fit and time, and both prices.

Facts (each with its source and the day it was read):
- RESERVABLE_REGIONS: where EC2 Capacity Blocks sell each type: the EC2 user guide, "Capacity Blocks for ML"
  (docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html, read 2026-11-24). Training plans keep
  their own list ("Supported instance types and AWS Regions"), which no stored copy had: a
  SearchTrainingPlanOfferings call in the Region is the real test, and an empty answer means no capacity.
- PLAN_DAYS / PLAN_COUNTS: the SageMaker developer guide, "Search training plan offerings": "Reservation
  durations are available in 1-day increments from 1 to 182 days"; "instance quantity options are 1, 2, 4, 8,
  16, 32 or 64" (docs.aws.amazon.com/sagemaker/latest/dg/search-training-plan-offerings-api-cli-sdk.html,
  read 2026-11-24). More than 64: several plans (`plans_for`), which only HyperPod can combine (MULTI_PLAN_SOURCE).
- RESERVED_RATE: the EC2 Capacity Blocks pricing page's effective instance hourly rates, as a stored copy of
  the page shows them (the table the page says it updates regularly; this one before its 2025-01-01 update);
  a training plan's own price is only known from SearchTrainingPlanOfferings' UpfrontFee, in your account.
- PLAN_END_MINUTES, PENDING_DAYS: the SageMaker developer guide, "Training plans utilization for SageMaker training
  jobs": full access "until 30 minutes before the Reserved Capacity end time", then the plan begins terminating
  its instances; a job Pending for capacity for 2 days ends in InsufficientCapacityError; the script learns the end
  from SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP (PLAN_USE_SOURCE).
- Capacity Blocks' durations: "1-day increments up to 14 days, and in 7-day increments up to 182 days", every
  block ending at 11:30 UTC (the EC2 user guide, "Find and purchase Capacity Blocks"; CAPACITY_BLOCK_STEPS_SOURCE).
Prices are compared on ONE basis (PRICE_BASIS): EC2's prices of one date, PRICE_DATE, the date of the only Capacity
Blocks rates read. The Capacity Blocks rate goes against EC2's on-demand price of the same instance at that date
(EC2_ON_DEMAND_AT_PRICE_DATE, us-east-1; other Regions are assumed equal), never against today's on-demand price
(EC2_ON_DEMAND: cut by 44% for p5 in 2025, shown beside, never compared) nor against SageMaker's training price,
which the catalog keeps for the training-job cost of modules 1-10. `Cost` carries its product and date, and
`saving` refuses two products or two dates.

A reservation must hold the job, not only the run: `reservation(run_days)` sizes it from the job's MaxRuntime (the
run plus JOB_MARGIN, module 7's chain margin), the start-up before the first step, and the 30 minutes at the end
when the plan's instances are already being ended, then rounds up to what can be bought.
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
PLAN_USE_SOURCE = ("SageMaker developer guide, 'Training plans utilization for SageMaker training jobs' "
                   "(docs.aws.amazon.com/sagemaker/latest/dg/training-plan-utilization-for-training-jobs.html), read "
                   "2026-11-26")
CAPACITY_BLOCK_STEPS_SOURCE = ("EC2 user guide, 'Find and purchase Capacity Blocks' (docs.aws.amazon.com/AWSEC2/latest/"
                               "UserGuide/capacity-blocks-purchase.html), read 2026-11-26")
PLAN_END_MINUTES = 30  # the plan starts ending its instances this long before the reservation ends
PENDING_DAYS = 2  # a job waiting this long for the plan's capacity ends in InsufficientCapacityError
CAPACITY_BLOCK_DAILY_UP_TO = 14  # Capacity Blocks: 1-day steps up to 14 days, then 7-day steps up to 182
JOB_MARGIN = 1.2  # module 7: a job's MaxRuntime is the planned run time plus 20% (fmlab.jobs.sharded.job_chain)
START_UP_HOURS = 1.0  # the course's allowance: instances, image pull, data and checkpoint download, first step
PLAN_COUNTS = (1, 2, 4, 8, 16, 32, 64)
# More than 64 instances: several plans. A training job names one (CreateTrainingJob ResourceConfig.TrainingPlanArn),
# a HyperPod cluster one per instance group (CreateCluster InstanceGroups[].TrainingPlanArn), and "a training plan for
# HyperPod clusters can be used exclusively to provide compute resources to a cluster's instance group".
MULTI_PLAN_SOURCE = ("SageMaker API reference, ResourceConfig.TrainingPlanArn (one plan for a training job's "
                     "resources) and CreateCluster's InstanceGroups[].TrainingPlanArn (one per instance group); "
                     "DescribeTrainingPlan's TargetResources (a plan serves training jobs or a cluster's instance "
                     "group); read 2026-11-29")
PRICE_DATE = "2024-12"  # the Capacity Blocks table read: the pricing page before its 2025-01-01 update
PRICE_BASIS = (f"EC2 prices of {PRICE_DATE}, us-east-1: Capacity Blocks as the pricing page showed them before its "
               "2025-01-01 update, on-demand at that time's price (p5.48xlarge $98.32, cut to $55.04 in 2025); today's "
               "on-demand prices are shown beside them, never compared with them")
# EC2 on-demand Linux, USD per instance-hour, us-east-1, today (2026-08-26): shown, not compared with the reserved rates.
EC2_ON_DEMAND: dict[str, float] = {"ml.p5.48xlarge": 55.04, "ml.p5en.48xlarge": 63.296, "ml.p6-b200.48xlarge": 113.9328}
EC2_ON_DEMAND_DATE = "2026-08-26"
EC2_ON_DEMAND_SOURCE = ("EC2 on-demand Linux price, us-east-1, instances.vantage.sh's data as republished in "
                        "github.com/tsaol/aws-gpu (generated 2026-08-26, read 2026-11-23; p5.48xlarge $98.32 -> $55.04 "
                        "in 2025); no p4d price was read on this basis")
# The same source's price before the 2025 cut: the on-demand price of the Capacity Blocks rates' date. No other
# type has one read for that date (p5en, p6-b200 and trn1 on-demand at PRICE_DATE: not read).
EC2_ON_DEMAND_AT_PRICE_DATE: dict[str, float] = {"ml.p5.48xlarge": 98.32}
# SageMaker's on-demand price of the same date, for a SageMaker job or HyperPod cluster that goes on demand after its
# training plan: the catalog's SageMaker training price read 2024-06 ($113.07, 15% over EC2's). EC2's p5 price was the
# same $98.32 in 2024-06 and 2024-12, so SageMaker's is taken as unchanged too (assumed: not read at 2024-12).
SAGEMAKER_ON_DEMAND_AT_PRICE_DATE: dict[str, float] = {
    name: catalog.instance(name).price_per_hour for name in EC2_ON_DEMAND_AT_PRICE_DATE}
# USD per instance-hour, by (instance, Region), where the stored pricing page gives one
RESERVED_RATE: dict[tuple[str, str], float] = {
    ("ml.p5.48xlarge", "us-east-1"): 39.33, ("ml.p5.48xlarge", "us-east-2"): 39.33,
    ("ml.p4d.24xlarge", "us-east-2"): 14.75, ("ml.p4d.24xlarge", "us-west-2"): 14.75,
    ("ml.trn1.32xlarge", "ap-southeast-4"): 15.49,
}


def buyable_days(days: float, kind: str = "training plan") -> int:
    """The fewest days that can be bought and hold `days`: training plans in whole days from 1 to 182; EC2 Capacity
    Blocks in whole days up to 14, then in weeks up to 182 (PlanError beyond 182: split the run)."""
    check_positive("days", days)
    if kind not in ("training plan", "capacity block"):
        raise PlanError(f"kind must be 'training plan' or 'capacity block', not {kind!r}")
    whole = max(PLAN_DAYS[0], math.ceil(days - 1e-9))
    if kind == "capacity block" and whole > CAPACITY_BLOCK_DAILY_UP_TO:
        whole = 7 * math.ceil(whole / 7)
    if whole > PLAN_DAYS[1]:
        raise PlanError(f"{days:.1f} days is more than one reservation's {PLAN_DAYS[1]} days: buy two back to back "
                        "(or extend one), or use more instances")
    return whole


def reserved_days(run_days: float) -> int:
    """Whole days to buy for exactly `run_days` of reserved time (no margin: see `reservation`)."""
    return buyable_days(run_days)


@dataclass(frozen=True)
class Reservation:
    """What to reserve for one run: the job's time, what the reservation must hold, and what can be bought."""

    kind: str
    run_days: float  # the planner's run time
    job_days: float  # the job's MaxRuntime: run_days x margin
    needed_days: float  # job_days + start-up + the 30 minutes before the end
    days: int  # what is bought
    margin: float
    start_up_hours: float = START_UP_HOURS

    @property
    def spare_hours(self) -> float:
        """Hours bought beyond what the job needs (what the rounding costs)."""
        return (self.days - self.needed_days) * 24

    def covers(self, max_run_seconds: float) -> bool:
        """Whether a job with this MaxRuntimeInSeconds ends before the plan starts ending its instances."""
        return self.days * 86400 >= max_run_seconds + (self.start_up_hours * 60 + PLAN_END_MINUTES) * 60


def reservation(run_days: float, margin: float = JOB_MARGIN, kind: str = "training plan",
                start_up_hours: float = START_UP_HOURS) -> Reservation:
    """The reservation that holds the job of a `run_days` run: its MaxRuntime (run x `margin`), the start-up, and
    the 30 minutes at the end when the plan's instances are already being ended, rounded up to what `kind` sells."""
    check_positive("run_days", run_days)
    if not margin >= 1:
        raise PlanError(f"margin must be at least 1 (the run plus headroom for restarts), not {margin!r}")
    job = run_days * margin
    needed = job + (start_up_hours * 60 + PLAN_END_MINUTES) / (24 * 60)
    return Reservation(kind, run_days, job, needed, buyable_days(needed, kind), margin, start_up_hours)


def plan_count(instances: int) -> int:
    """The smallest count a plan sells that holds `instances` (PlanError above 64: several plans, `plans_for`)."""
    fitting = [c for c in PLAN_COUNTS if c >= instances]
    if not fitting:
        raise PlanError(f"{instances} instances is more than one plan's {PLAN_COUNTS[-1]}: reserve several plans")
    return fitting[0]


def plans_for(instances: int) -> tuple[int, ...]:
    """The training plans that hold `instances`: one plan up to 64 (`plan_count`), else plans of 64 and one for the
    rest. Only a platform that takes several plans can use more than one (MULTI_PLAN_SOURCE: a HyperPod cluster, a
    plan per instance group; a training job takes one)."""
    if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
        raise PlanError(f"instances must be a whole number >= 1, not {instances!r}")
    full, rest = divmod(instances, PLAN_COUNTS[-1])
    return (PLAN_COUNTS[-1],) * full + ((plan_count(rest),) if rest else ())


def instances_bought(instances: int) -> int:
    """Instances paid for to hold `instances`: the plans' counts together (`plans_for`)."""
    return sum(plans_for(instances))


def reservable(instances: int) -> bool:
    """Whether `instances` is exactly what its plans hold (nothing bought and left idle)."""
    return instances_bought(instances) == instances


@dataclass(frozen=True)
class Cost:
    """A cost and the kind of price it was computed from: the product and purchase option, then the prices' date
    (e.g. "EC2 Capacity Blocks", PRICE_DATE)."""

    usd: float
    kind: str  # e.g. "EC2 Capacity Blocks", "EC2 on-demand", "SageMaker training on-demand"
    date: str = PRICE_DATE  # when the prices were in force

    @property
    def service(self) -> str:
        return self.kind.split()[0]


def saving(reserved: Cost, on_demand: Cost) -> float:
    """What reserving saves over on demand, in USD: only between prices of one service and one date (a Capacity
    Blocks rate against SageMaker's training price compares two products; against today's on-demand price, two
    dates, with a 44% price cut between them). PlanError names the two kinds."""
    if reserved.service != on_demand.service:
        raise PlanError(f"a {reserved.kind} price and a {on_demand.kind} price are not of one kind: compare "
                        f"{reserved.service} with {reserved.service} (PRICE_BASIS)")
    if reserved.date != on_demand.date:
        raise PlanError(f"a {reserved.kind} price of {reserved.date} and a {on_demand.kind} price of {on_demand.date} "
                        "are not of one date: prices change (p5 on-demand fell 44% in 2025); compare prices of one "
                        "date (PRICE_BASIS), or quote both today (SearchTrainingPlanOfferings' UpfrontFee)")
    return on_demand.usd - reserved.usd
