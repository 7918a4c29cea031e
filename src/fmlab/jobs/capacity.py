"""Reserved capacity as requests: a SageMaker training plan (search offerings, create the plan) and the job on it.

    from fmlab.jobs import capacity
    search = capacity.search_request("ml.p5.48xlarge", 16, days=13)      # SearchTrainingPlanOfferings
    capacity.check(search, "SearchTrainingPlanOfferings")                   # [] or the problems, each named
    create = capacity.create_request("fmlab-gpt30b-p5", offering_id="tpo-...")   # CreateTrainingPlan
    spec = capacity.current_stack_spec(planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16), plan_arn=..., data_uri=...,
                                       checkpoint_uri=...)                     # the planned 30B run on p5

Each request is checked like the course's CreateTrainingJob requests: against botocore's SageMaker API model
(`fmlab.service.api_model.api_problems`: types, ranges, enums, patterns) and then against the prose limits of
the developer guide, which the model does not hold (`plan_problems`, each with its source). With AWS
credentials `boto3.client("sagemaker").search_training_plan_offerings(**search)` sends the first; the answer's
first offering is the best match, and CreateTrainingPlan buys it (payment up front; it cannot be changed).
The job then names the plan in ResourceConfig.TrainingPlanArn (SDK v3: Compute(training_plan_arn=...)), and
`fmlab preflight` checks it as every job (fmlab.service.rules: "training-plan", "instance-preferences").
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from fmlab.jobs.sharded import ShardedRun, planned_job, script_settings
from fmlab.jobs.spec import JobSpec
from fmlab.plan.capacity import PLAN_COUNTS, PLAN_DAYS, PLAN_LIMITS_SOURCE
from fmlab.plan.parallelism import ParallelConfig
from fmlab.plan.planned import PlannedRun
from fmlab.service.api_model import Problem, api_problems

# What a plan can serve, one kind per plan (PLAN_LIMITS_SOURCE): the SageMakerResourceName enum of botocore's model,
# which lists endpoint and studio-apps beside training-job and hyperpod-cluster (botocore 1.44.5, read 2026-11-26).
TARGETS = ("training-job", "hyperpod-cluster", "endpoint", "studio-apps")


def plan_instance_types() -> list[str]:
    """The instance types a training plan can reserve: the ReservedCapacityInstanceType enum of botocore's SageMaker
    model (botocore 1.44.8, read 2026-11-28: p4d/p4de, p5/p5e/p5en, p5.4xlarge, p6-b200, p6-b300, the p6e-gb200
    UltraServer, trn1, trn2). The model also lets a search ask for UltraServers (UltraServerType, UltraServerCount)
    instead of instances. Where each type is sold, no model says: a search in the Region answers."""
    from fmlab.service.api_model import service_model

    return list(service_model().shape_for("ReservedCapacityInstanceType").enum)


def search_request(instance_type: str, count: int, days: int, target: str = "training-job",
                   start_after: dt.datetime | None = None, end_before: dt.datetime | None = None) -> dict:
    """SearchTrainingPlanOfferings' input for `count` instances for `days` whole days."""
    request = {"InstanceType": instance_type, "InstanceCount": count, "DurationHours": 24 * days,
               "TargetResources": [target]}
    if start_after:
        request["StartTimeAfter"] = start_after
    if end_before:
        request["EndTimeBefore"] = end_before
    return request


def create_request(name: str, offering_id: str) -> dict:
    """CreateTrainingPlan's input: buy the offering `offering_id` (from the search's answer) as plan `name`."""
    return {"TrainingPlanName": name, "TrainingPlanOfferingId": offering_id}


def plan_problems(request: dict) -> list[Problem]:
    """The developer guide's limits on a search that botocore's model does not hold."""
    out = []
    hours = request.get("DurationHours")
    if isinstance(hours, int) and (hours % 24 or not PLAN_DAYS[0] <= hours // 24 <= PLAN_DAYS[1]):
        out.append(Problem("DurationHours", f"{hours} h: plans are sold in whole days, {PLAN_DAYS[0]} to "
                           f"{PLAN_DAYS[1]} (24 to {24 * PLAN_DAYS[1]} h in steps of 24) ({PLAN_LIMITS_SOURCE})"))
    count = request.get("InstanceCount")
    if isinstance(count, int) and count not in PLAN_COUNTS:
        bigger = [c for c in PLAN_COUNTS if c >= count]
        out.append(Problem("InstanceCount", f"{count}: plans hold {', '.join(map(str, PLAN_COUNTS))} instances; "
                           f"ask for {bigger[0] if bigger else 'several plans of 64'} ({PLAN_LIMITS_SOURCE})"))
    targets = request.get("TargetResources") or []
    if len(targets) > 1:
        out.append(Problem("TargetResources", f"{targets}: a plan serves one kind of resource; search once per "
                           f"kind ({PLAN_LIMITS_SOURCE})"))
    start, end = request.get("StartTimeAfter"), request.get("EndTimeBefore")
    if isinstance(start, dt.datetime) and isinstance(end, dt.datetime) and isinstance(hours, int):
        if end - start < dt.timedelta(hours=hours):
            out.append(Problem("EndTimeBefore", f"the window {start:%Y-%m-%d} to {end:%Y-%m-%d} is shorter than the "
                               f"{hours} h asked for: widen it"))
    return out


def check(request: dict, operation: str) -> list[Problem]:
    """Every problem of a training-plan request: API model first, then the guide's limits."""
    problems = api_problems(request, operation)
    if operation == "SearchTrainingPlanOfferings":
        problems += plan_problems(request)
    return problems


def current_stack_run(run: PlannedRun, name: str = "gpt30b-p5") -> ShardedRun:
    """The planned run on today's stack: module 7's script and settings rendered from `run` (its layout over NCCL, its
    micro-batch, global batch and checkpoint interval), with a time limit of its days x JOB_MARGIN, at most
    SageMaker's 28 days (a longer run is a chain of jobs: fmlab.jobs.sharded.job_chain)."""
    return planned_job(run, name, script_settings(parallel=ParallelConfig(backend="nccl")))


def current_stack_spec(run: PlannedRun, plan_arn: str | None, data_uri: str, checkpoint_uri: str,
                       role: str | None = None, region: str | None = None,
                       max_pending_seconds: int | None = None) -> JobSpec:
    """The JobSpec of `current_stack_run(run)`: the same script, data, checkpoints and EFA environment as module 7,
    launched with torchrun (no SMP) in the current PyTorch DLC on p5/p5en, and on a training plan's capacity when
    `plan_arn` is given. `max_pending_seconds`: how long the job may wait for capacity (on a plan, only while the plan
    is Active; queued before its start, the wait is free)."""
    spec = current_stack_run(run).job_spec(data_uri, checkpoint_uri, role=role, region=region, distribution="torchrun",
                                           smp={}, image="pytorch", training_plan_arn=plan_arn)
    return dataclasses.replace(spec, max_pending_seconds=max_pending_seconds)
