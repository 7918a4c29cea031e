"""Guard rails for workshop accounts: worst-case cost, quota pre-check, credential redaction.

    worst_case_cost(spec)                 # instance price x count x (max run time + warm-pool keep-alive)
    check_budget(spec, budget_usd=10)     # raises OverBudget above the budget, with what to change
    worst_case_chain_cost(specs)          # a run longer than one job may last: every job of the chain, summed
    check_quotas(spec, quotas_client, sagemaker_client)   # raises QuotaTooLow naming the quota to request
    redact("... AKIA... ...")             # access keys, secrets and session tokens replaced by ****

Prices come from `fmlab.plan.catalog` (and two small course instances below), each with its source. Quotas are
read with the Service Quotas API (`list_service_quotas(ServiceCode="sagemaker")`) and usage from the jobs in
progress; the tests drive both with botocore's Stubber, never real AWS.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from fmlab.jobs.spec import JobSpec
from fmlab.plan import catalog

DEFAULT_BUDGET_USD = 10.0  # per launch; FMLAB_BUDGET_USD or launch(budget_usd=...) raises it
BUDGET_VARIABLE = "FMLAB_BUDGET_USD"
# Single-accelerator and CPU instances for small course jobs (the catalog holds the 4-16 accelerator ones).
SMALL_INSTANCE_PRICES = {
    "ml.g5.xlarge": 1.408,  # 1x A10G 24 GB
    "ml.m5.xlarge": 0.23,  # 4 vCPU, no accelerator
}
SMALL_INSTANCE_SOURCE = "Amazon SageMaker AI pricing page, on-demand Training, us-east-1 (read for this course)"

# Default SageMaker quotas that stop large runs, as the post names them (claims of the source, not checked here).
QUOTA_SOURCE = "AWS Machine Learning Blog, 'Training large language models on Amazon SageMaker: best practices' (2023)"
DEFAULT_QUOTAS = [
    {"quota": "Longest run time for a training job", "default": "432,000 seconds (5 days)",
     "why": "a pretraining run lasts weeks: raise it, and checkpoint so a stopped job resumes"},
    {"quota": "Number of instances across all training jobs", "default": "4",
     "why": "a sweep of many jobs, or one large job, needs more instances at once"},
    {"quota": "Maximum number of instances per training job", "default": "20",
     "why": "one data/model-parallel job spanning dozens of nodes"},
    {"quota": "ml.p4d.24xlarge for training job usage", "default": "0",
     "why": "every instance type starts at 0 in many accounts: request the type you plan to use"},
    {"quota": "ml.p4d.24xlarge for training warm pool usage", "default": "0",
     "why": "warm pools are only kept when this quota allows (SageMaker developer guide, warm pools)"},
]


class OverBudget(RuntimeError):
    """The worst-case cost of a launch is above the learner's budget."""


class QuotaTooLow(RuntimeError):
    """The account's SageMaker quotas would make this launch fail."""


def price_per_hour(instance_type: str) -> tuple[float, str]:
    """On-demand SageMaker training price of one instance-hour, and where it comes from."""
    if instance_type in catalog.INSTANCES:
        inst = catalog.INSTANCES[instance_type]
        if not inst.price_known:  # NaN would slip past every budget comparison
            raise OverBudget(f"the course catalog has no published price for {instance_type!r} "
                             f"({inst.price_basis}), so its cost cannot be bounded: pass price_per_hour=... to launch()")
        basis = "" if inst.price_basis.startswith("SageMaker") else f"; {inst.price_basis}"
        return inst.price_per_hour, f"{inst.price_region}, read {inst.price_date}{basis} (fmlab.plan.catalog)"
    if instance_type in SMALL_INSTANCE_PRICES:
        return SMALL_INSTANCE_PRICES[instance_type], SMALL_INSTANCE_SOURCE
    known = sorted([*catalog.INSTANCES, *SMALL_INSTANCE_PRICES])
    raise OverBudget(f"no price for {instance_type!r} in the course catalog, so its cost cannot be bounded: "
                     f"choose one of {', '.join(known)}, or pass price_per_hour=... to launch()")


@dataclass(frozen=True)
class CostEstimate:
    instance_type: str
    instances: int
    price_per_hour: float
    run_hours: float
    keep_alive_hours: float
    source: str

    @property
    def run_usd(self) -> float:
        return self.price_per_hour * self.instances * self.run_hours

    @property
    def keep_alive_usd(self) -> float:
        return self.price_per_hour * self.instances * self.keep_alive_hours

    @property
    def worst_case_usd(self) -> float:
        return self.run_usd + self.keep_alive_usd

    def __str__(self) -> str:
        return (f"worst case ${self.worst_case_usd:,.2f}: {self.instances} x {self.instance_type} at "
                f"${self.price_per_hour:,.3f}/h x ({self.run_hours:.2f} h max run + {self.keep_alive_hours:.2f} h "
                f"warm-pool keep-alive) [{self.source}]")


def worst_case_cost(spec: JobSpec, price: float | None = None) -> CostEstimate:
    """What the job costs if it runs to its max run time and its warm pool then idles to the end. A job on a training
    plan adds no instance-hours: the plan was paid up front (its UpfrontFee), so the job's own bound is $0."""
    if price is None and spec.training_plan_arn:
        price, source = 0.0, "on a training plan: its instances were paid up front (the plan's UpfrontFee)"
    elif price is None:
        price, source = price_per_hour(spec.instance_type)
    else:
        source = "price given by you"
    # Spot bills the run time only, at a discount; the on-demand price is the bound.
    return CostEstimate(spec.instance_type, spec.instance_count, price, spec.max_run_seconds / 3600,
                        spec.keep_alive_seconds / 3600, source)


@dataclass(frozen=True)
class ChainCost:
    """The worst case of a chain of jobs (fmlab.jobs.sharded.job_chain): each job to its max run time, summed."""

    jobs: tuple[CostEstimate, ...]

    @property
    def worst_case_usd(self) -> float:
        return sum(j.worst_case_usd for j in self.jobs)

    @property
    def run_days(self) -> float:
        return sum(j.run_hours for j in self.jobs) / 24

    def __str__(self) -> str:
        first = self.jobs[0]
        return (f"worst case ${self.worst_case_usd:,.2f} for {len(self.jobs)} chained jobs, {self.run_days:.1f} days in "
                f"all: {first.instances} x {first.instance_type} at ${first.price_per_hour:,.3f}/h [{first.source}]")


def worst_case_chain_cost(specs: list[JobSpec], price: float | None = None) -> ChainCost:
    """The worst case of every job of a chain together: a run planned past one job's limit costs all of them."""
    if not specs:
        raise ValueError("a chain needs at least one job: pass the list from fmlab.jobs.sharded.job_chain")
    return ChainCost(tuple(worst_case_cost(s, price) for s in specs))


def budget(explicit: float | None = None) -> float:
    if explicit is not None:
        return float(explicit)
    return float(os.environ.get(BUDGET_VARIABLE) or DEFAULT_BUDGET_USD)


def check_budget(spec: JobSpec, budget_usd: float | None = None, price: float | None = None,
                 estimate: CostEstimate | None = None) -> CostEstimate:
    """Return the estimate (worst_case_cost's, or the one given: it is computed once per launch) when it is within
    budget; raise OverBudget (saying what to change) otherwise."""
    estimate = estimate or worst_case_cost(spec, price)
    limit = budget(budget_usd)
    if estimate.worst_case_usd > limit:
        raise OverBudget(f"{spec.base_job_name}: {estimate}, above your budget of ${limit:,.2f}. Lower "
                         "max_run_seconds, instance_count or keep_alive_seconds, or raise the budget explicitly: "
                         f"launch(..., budget_usd={estimate.worst_case_usd:.0f}) or {BUDGET_VARIABLE}.")
    return estimate


# ---------------------------------------------------------------- quotas


def _quota_values(quotas_client) -> dict[str, float]:
    values: dict[str, float] = {}
    for page in quotas_client.get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker"):
        for q in page.get("Quotas", []):
            values[q["QuotaName"]] = float(q["Value"])
    return values


def instances_in_use(sagemaker_client) -> dict[str, int]:
    """Instances per type held by training jobs in progress (and warm pools still available)."""
    used: dict[str, int] = {}
    names = set()
    for status in ({"StatusEquals": "InProgress"}, {"WarmPoolStatusEquals": "Available"}):
        for page in sagemaker_client.get_paginator("list_training_jobs").paginate(**status):
            names |= {j["TrainingJobName"] for j in page.get("TrainingJobSummaries", [])}
    for name in sorted(names):
        rc = sagemaker_client.describe_training_job(TrainingJobName=name)["ResourceConfig"]
        used[rc["InstanceType"]] = used.get(rc["InstanceType"], 0) + rc["InstanceCount"]
    return used


DEFAULT_QUOTA_VALUES = {"Longest run time for a training job": 432_000.0,
                        "Number of instances across all training jobs": 4.0,
                        "Maximum number of instances per training job": 20.0}  # as QUOTA_SOURCE states them


def quota_requests(spec: JobSpec, quotas: dict[str, float] | None = None, used: dict[str, int] | None = None,
                   jobs: int = 1) -> list[dict]:
    """The quota increases `jobs` parallel copies of `spec` need: [{quota, current, in_use, request, blocks}].

    blocks is False for the warm-pool quota: without it the job still runs, but no warm pool is kept.

    `quotas` are the account's values (quota name -> value); by default the defaults the best-practices post
    states, with every per-instance-type quota at 0. `used` is instances in use per type (none by default)."""
    if quotas is None:
        quotas = {**DEFAULT_QUOTA_VALUES, f"{spec.instance_type} for training job usage": 0.0,
                  f"{spec.instance_type} for training warm pool usage": 0.0}
    used = used or {}
    need = spec.instance_count * jobs
    kind = spec.instance_type
    rows = []

    def check(name: str, required: float, in_use: float, blocks: bool = True) -> None:
        if name in quotas and in_use + required > quotas[name]:
            rows.append({"quota": name, "current": quotas[name], "in_use": in_use, "request": in_use + required,
                         "blocks": blocks})

    check(f"{kind} for training job usage", need, used.get(kind, 0))
    check("Number of instances across all training jobs", need, sum(used.values()))
    check("Maximum number of instances per training job", spec.instance_count, 0)
    if spec.keep_alive_seconds:
        check(f"{kind} for training warm pool usage", need, 0, blocks=False)  # the job runs; no pool is kept
    longest = next((k for k in quotas if "longest run time" in k.lower()), None)
    if longest is not None and spec.max_run_seconds > quotas[longest]:
        rows.append({"quota": longest, "current": quotas[longest], "in_use": 0, "request": spec.max_run_seconds,
                     "blocks": True})
    return rows


def quota_problems(spec: JobSpec, quotas_client, sagemaker_client, jobs: int = 1) -> list[str]:
    """What to request before launching `jobs` copies of `spec`, read from the account (empty when it fits).
    A warm-pool shortfall is printed as a note, not returned: the job runs, only its pool is not kept."""
    rows = quota_requests(spec, _quota_values(quotas_client), instances_in_use(sagemaker_client), jobs)
    lines = []
    for r in rows:
        line = (f"'{r['quota']}' is {r['current']:g} with {r['in_use']:g} in use; this launch needs "
                f"{r['request']:g}: request at least {r['request']:g} in the Service Quotas console "
                f"(Amazon SageMaker, {spec.aws_region})")
        if r["blocks"]:
            lines.append(line)
        else:
            print(f"note: {line}; until then the job runs but no warm pool is kept")
    return lines


def check_quotas(spec: JobSpec, quotas_client, sagemaker_client, jobs: int = 1) -> None:
    problems = quota_problems(spec, quotas_client, sagemaker_client, jobs)
    if problems:
        raise QuotaTooLow("this launch would fail on your account's SageMaker quotas:\n  - " + "\n  - ".join(problems))
