"""Checks for labs/lab_03_parallel_jobs.ipynb: a sweep with warm pools, a broken request, cost, quotas.

The sandbox's request validation (fmlab.sandbox.validate) is the feedback of exercise 2: a wrong fix is
answered with the fields SageMaker would still reject.
"""

from __future__ import annotations

import copy

from fmlab.jobs.guards import quota_requests, worst_case_cost
from fmlab.jobs.spec import JobSpec
from fmlab.labs import Lab, close
from fmlab.sandbox.validate import problems_in

LAB = Lab("lab 03", ["ex1_sweep", "ex2_fix_request", "ex3_sweep_cost", "ex4_quotas"])

# The questions' inputs live here so that the notebook and its checks cannot drift apart.
EX1 = dict(learning_rates=[1e-3, 3e-3, 1e-2, 3e-2], instance_type="ml.g5.xlarge", max_run_seconds=1800)
# A request as boto3 would send it, with three errors SageMaker would reject.
BROKEN_REQUEST = {
    "TrainingJobName": "fmlab_lr_sweep_3e-4",
    "RoleArn": "arn:aws:iam::111122223333:role/fmlab-course",
    "AlgorithmSpecification": {
        "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:"
                         "2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker",
        "TrainingInputMode": "File"},
    "HyperParameters": {"lr": "0.0003", "max_steps": "200"},
    "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://fmlab-course/fmlab/data/tiny"}}}],
    "OutputDataConfig": {"S3OutputPath": "s3://fmlab-course/fmlab/output"},
    "ResourceConfig": {"InstanceType": "ml.g5.xlarg", "InstanceCount": 1, "VolumeSizeInGB": 30,
                       "KeepAlivePeriodInSeconds": 86400},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}
EX3 = dict(jobs=4, instance_type="ml.g5.12xlarge", instance_count=1, max_run_seconds=1800, keep_alive_seconds=1200)
EX4 = dict(jobs=8, instance_type="ml.p4d.24xlarge", instance_count=2, max_run_seconds=6 * 86400,
           keep_alive_seconds=900)


def broken_request() -> dict:
    """A fresh copy of the broken request to fix (the original stays as it is)."""
    return copy.deepcopy(BROKEN_REQUEST)


def check_sweep(specs: list) -> bool:
    def ok(answer) -> bool:
        if len(answer) != len(EX1["learning_rates"]) or not all(isinstance(s, JobSpec) for s in answer):
            raise ValueError(f"give a list of {len(EX1['learning_rates'])} JobSpec objects")
        lrs = sorted(float(s.hyperparameters.get("lr", "nan")) for s in answer)
        problems = [f"{s.name}: {p}" for s in answer for p in s.problems("local")]
        if problems:
            raise ValueError("; ".join(problems))
        return (lrs == sorted(EX1["learning_rates"]) and len({s.name for s in answer}) == len(answer)
                and all(s.instance_type == EX1["instance_type"] for s in answer)
                and all(0 < s.keep_alive_seconds <= 21600 for s in answer)
                and all(s.max_run_seconds <= EX1["max_run_seconds"] for s in answer))

    return LAB.check("ex1_sweep", specs, ok, "four valid jobs, one per learning rate, each keeping a warm pool",
                     f"one JobSpec per learning rate (hyperparameters={{'lr': ...}}), distinct names, instance type "
                     f"{EX1['instance_type']}, 0 < keep_alive_seconds <= 21600, max_run_seconds <= "
                     f"{EX1['max_run_seconds']}; fmlab.jobs.sweep(base, 'lr', values) does most of it")


def check_fixed_request(request: dict) -> bool:
    remaining = problems_in(request) if isinstance(request, dict) else []
    if not isinstance(request, dict):
        feedback = "fix the three fields that problems_in(lab03.broken_request()) names, in a copy of the request"
    elif remaining:
        feedback = "SageMaker would still reject: " + "; ".join(str(p) for p in remaining)
    else:
        feedback = ("the request is valid, but keep what it meant: same hyperparameters, data, instance count, a "
                    "warm pool, the single-GPU g5 instance, and a name that still starts fmlab-lr-sweep")

    def ok(answer) -> bool:
        rc = answer["ResourceConfig"]
        return (not remaining and answer["HyperParameters"] == BROKEN_REQUEST["HyperParameters"]
                and answer["InputDataConfig"] == BROKEN_REQUEST["InputDataConfig"]
                and rc["InstanceCount"] == 1 and rc["InstanceType"] == "ml.g5.xlarge"
                and 0 < rc.get("KeepAlivePeriodInSeconds", 0) <= 21600
                and answer["TrainingJobName"].startswith("fmlab-lr-sweep"))

    return LAB.check("ex2_fix_request", request, ok, "SageMaker would accept it, and it still means the same job",
                     feedback + " (run fmlab.sandbox.validate.problems_in(request) to see every problem)")


def check_sweep_cost(answer: float) -> bool:
    spec = JobSpec("cost", instance_type=EX3["instance_type"], instance_count=EX3["instance_count"],
                   max_run_seconds=EX3["max_run_seconds"], keep_alive_seconds=EX3["keep_alive_seconds"])
    expected = EX3["jobs"] * worst_case_cost(spec).worst_case_usd
    return LAB.check("ex3_sweep_cost", answer, lambda a: close(a, expected, 0.01), f"${expected:,.2f} at most",
                     "jobs x instances x price per hour x (max run hours + keep-alive hours); the price is in "
                     "fmlab.plan.catalog (job_guards.worst_case_cost does one job)")


def check_quotas(answer: set) -> bool:
    spec = JobSpec("plan", instance_type=EX4["instance_type"], instance_count=EX4["instance_count"],
                   max_run_seconds=EX4["max_run_seconds"], keep_alive_seconds=EX4["keep_alive_seconds"])
    expected = {r["quota"] for r in quota_requests(spec, jobs=EX4["jobs"])}
    return LAB.check("ex4_quotas", answer, lambda a: set(a) == expected, f"request: {', '.join(sorted(expected))}",
                     "compare the plan with the default quotas (fmlab.jobs.guards.DEFAULT_QUOTAS): instances per "
                     "type, across all jobs, per job, the longest run time, and warm pools")


def summary() -> None:
    LAB.summary()
