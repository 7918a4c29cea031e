"""fmlab.jobs.capacity: training-plan requests checked like every request, and the 30B job that runs on a plan."""

import datetime as dt

import pytest

from fmlab.jobs import capacity
from fmlab.jobs.preflight import preflight
from fmlab.jobs.request import capture_request
from fmlab.plan.capacity import reservation
from fmlab.plan.planned import planned_run

ARN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/fmlab-gpt30b"


def test_a_plan_for_the_30b_run_is_a_valid_search_and_a_valid_purchase():
    search = capacity.search_request("ml.p5.48xlarge", 16, days=13, start_after=dt.datetime(2027, 1, 4),
                                     end_before=dt.datetime(2027, 2, 1))
    assert search["DurationHours"] == 312 and search["TargetResources"] == ["training-job"]
    assert capacity.check(search, "SearchTrainingPlanOfferings") == []
    assert capacity.check(capacity.create_request("fmlab-gpt30b", "tpo-1a2b3c"), "CreateTrainingPlan") == []


@pytest.mark.parametrize("request_, field, words", [
    (capacity.search_request("ml.p5.48xlarge", 12, 13), "InstanceCount", "ask for 16"),
    (capacity.search_request("ml.p5.48xlarge", 16, 200), "DurationHours", "whole days, 1 to 182"),
    ({**capacity.search_request("ml.p5.48xlarge", 16, 13), "DurationHours": 100}, "DurationHours", "whole days"),
    (capacity.search_request("ml.g5.48xlarge", 16, 13), "InstanceType", "allowed values"),
    ({**capacity.search_request("ml.p5.48xlarge", 16, 13), "TargetResources": ["training-job", "hyperpod-cluster"]},
     "TargetResources", "one kind of resource"),
    (capacity.search_request("ml.p5.48xlarge", 16, 13, start_after=dt.datetime(2027, 1, 4),
                             end_before=dt.datetime(2027, 1, 10)), "EndTimeBefore", "widen it"),
])
def test_each_limit_is_named_with_the_fix(request_, field, words):
    problems = capacity.check(request_, "SearchTrainingPlanOfferings")
    assert [p.field for p in problems] == [field] and words in problems[0].message


def test_a_plan_name_outside_the_api_pattern_is_refused():
    problems = capacity.check(capacity.create_request("fmlab_gpt30b", "tpo-1"), "CreateTrainingPlan")
    assert [p.field for p in problems] == ["TrainingPlanName"]


def test_the_job_on_the_plan_is_todays_stack_and_passes_preflight(no_aws_credentials):
    run = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16)  # module 11's planned run: 9.0 days
    spec = capacity.current_stack_spec(run, ARN, "s3://fmlab-course/data/v1", "s3://fmlab-course/checkpoints/p5")
    request = capture_request(spec).request
    assert request["ResourceConfig"]["TrainingPlanArn"] == ARN
    assert request["ResourceConfig"]["InstanceType"] == "ml.p5.48xlarge"
    assert "/pytorch:" in request["AlgorithmSpecification"]["TrainingImage"]  # the DLC, not the SMP image
    assert "mp_parameters" not in request["HyperParameters"]
    hps = request["HyperParameters"]
    assert (hps["sharding"], hps["hybrid_shard_degree"], hps["backend"]) == ('hybrid', '32', 'nccl')
    assert (hps["micro_batch"], hps["global_batch"], hps["checkpoint_every"]) == ("2", "1024", "519")
    # the DLC's aws-ofi-nccl (1.20.0) needs no EFA variable: none is forced (aws-ofi-nccl doc/efa-env-var.md)
    assert not {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_PROTO"} & set(request["Environment"])
    assert request["StoppingCondition"]["MaxRuntimeInSeconds"] == int(1.2 * run.days * 24 * 3600)
    # the plan bought for this run holds the job: its MaxRuntime, the start-up and the plan's last 30 minutes
    plan = reservation(run.days)
    assert plan.covers(request["StoppingCondition"]["MaxRuntimeInSeconds"]) and plan.days == run.reserved_days == 13
    assert not reservation(run.days, margin=1.0).covers(request["StoppingCondition"]["MaxRuntimeInSeconds"])
    report = preflight(request, quotas=False)
    assert report.ok and "training-plan" in {f.check for f in report.findings if f.level == "warn"}


def test_every_target_the_api_model_lists_is_a_valid_search():
    """A plan serves one kind of resource: training jobs, a HyperPod cluster, endpoints or Studio apps."""
    import botocore.session

    enum = botocore.session.get_session().get_service_model("sagemaker").shape_for("SageMakerResourceName").enum
    assert set(capacity.TARGETS) == set(enum)
    for target in capacity.TARGETS:
        assert capacity.check(capacity.search_request("ml.p5.48xlarge", 16, 16, target=target),
                              "SearchTrainingPlanOfferings") == []


def test_the_types_a_plan_sells_include_todays_and_the_course_knows_where_its_table_ends():
    """The model's list has the 2025-26 types (p6-b200, p6-b300, the p6e-gb200 UltraServer); each is a valid
    search; the Capacity Blocks table module 11 prices (fmlab.plan.capacity.RESERVABLE_REGIONS) is a subset."""
    from fmlab.plan.capacity import RESERVABLE_REGIONS

    types = capacity.plan_instance_types()
    assert {"ml.p6-b200.48xlarge", "ml.p6-b300.48xlarge", "ml.p6e-gb200.36xlarge", "ml.trn2.48xlarge"} <= set(types)
    assert set(RESERVABLE_REGIONS) <= set(types)
    for name in types:
        assert capacity.check(capacity.search_request(name, 8, 14), "SearchTrainingPlanOfferings") == []
    assert capacity.check(capacity.search_request("ml.p6-b200.48xlarge-typo", 8, 14), "SearchTrainingPlanOfferings")
