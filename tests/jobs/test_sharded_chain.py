"""Module 7's 30B run is longer than one SageMaker training job may last (28 days, all retries included): it is a
chain of jobs that resume from the same checkpoint URI, priced as a whole; and the volume line says what a p4d has.

Run: .venv/bin/python -m pytest tests/jobs/test_sharded_chain.py -q
"""

import botocore.session
import pytest

from fmlab.jobs import sharded
from fmlab.jobs.guards import worst_case_chain_cost, worst_case_cost
from fmlab.jobs.request import capture_request
from fmlab.plan import compute
from fmlab.service.api_model import problems_in

HYBRID_64 = dict(sharding="hybrid", hybrid_shard_degree=64)  # the layout notebook 07 chooses

ROLE = "arn:aws:iam::111122223333:role/SageMakerExecution"
DATA, CKPT = "s3://bucket/fmlab/data/gpt2-tokens", "s3://bucket/fmlab/checkpoints/gpt30b"


@pytest.fixture(scope="module")
def plan():
    return compute.estimate_run("gpt-30b", 300e9, "ml.p4d.24xlarge", 16, 0.4)


@pytest.fixture(scope="module")
def chain(plan):
    return sharded.job_chain(sharded.ShardedRun().shrink(**HYBRID_64), plan.days, DATA, CKPT, role=ROLE,
                             region="us-west-2")


def test_the_limit_is_the_api_references_28_days():
    doc = botocore.session.get_session().get_service_model("sagemaker").shape_for(
        "StoppingCondition").members["MaxRuntimeInSeconds"].documentation
    assert "The maximum value is 28 days" in doc and "all of the attempts in total" in doc
    assert sharded.MAX_RUN_SECONDS == 28 * 86400 == 2_419_200


def test_each_job_fits_and_the_chain_covers_the_plan(plan, chain):
    assert plan.days > 28  # ~41 days: one job cannot hold it
    assert len(chain) == 2
    assert all(s.max_run_seconds <= sharded.MAX_RUN_SECONDS for s in chain)
    assert sum(s.max_run_seconds for s in chain) >= plan.days * 1.2 * 86400
    assert [s.name for s in chain] == ["gpt30b-1of2", "gpt30b-2of2"]


def test_every_job_resumes_from_the_same_checkpoints(chain):
    requests = [capture_request(s).request for s in chain]
    assert {r["CheckpointConfig"]["S3Uri"] for r in requests} == {CKPT}
    assert {r["CheckpointConfig"]["LocalPath"] for r in requests} == {"/opt/ml/checkpoints"}
    assert len({str(sorted(r["HyperParameters"].items())) for r in requests}) == 1  # the same job, continued
    assert all(problems_in(r) == [] for r in requests)
    assert all(r["StoppingCondition"]["MaxRuntimeInSeconds"] <= 2_419_200 for r in requests)


def test_the_chain_costs_at_least_the_plan(plan, chain):
    cost = worst_case_chain_cost(chain)
    assert cost.worst_case_usd >= plan.cost_usd
    assert cost.worst_case_usd == pytest.approx(sum(worst_case_cost(s).worst_case_usd for s in chain))
    assert cost.run_days == pytest.approx(plan.days * 1.2, abs=0.01)
    old_single_job = worst_case_cost(chain[0].with_(max_run_seconds=30 * 86400))  # what the course used to show
    assert old_single_job.worst_case_usd < plan.cost_usd < cost.worst_case_usd
    assert "2 chained jobs" in str(cost)


def test_a_short_run_is_one_job_and_bad_input_is_named():
    run = sharded.ShardedRun().shrink(**HYBRID_64)
    (one,) = sharded.job_chain(run, 10, DATA, CKPT)
    assert one.name == "gpt30b" and one.max_run_seconds == 12 * 86400
    with pytest.raises(ValueError, match="planned_days"):
        sharded.job_chain(run, 0, DATA, CKPT)
    with pytest.raises(ValueError, match="margin"):
        sharded.job_chain(run, 10, DATA, CKPT, margin=0.5)
    with pytest.raises(ValueError, match="28 days"):
        sharded.job_chain(run, 10, DATA, CKPT, max_days=30)
    with pytest.raises(ValueError, match="at least one job"):
        worst_case_chain_cost([])


def test_the_volume_line_says_what_a_p4d_has():
    storage = sharded.ShardedRun().shrink(**HYBRID_64).storage()
    assert storage["instance storage GB"] == 8000 and storage["fits"]
    assert "NVMe" in storage["what the instance has"] and "does not use VolumeSizeInGB" in storage["what the instance has"]
    doc = botocore.session.get_session().get_service_model("sagemaker").shape_for(
        "ResourceConfig").members["VolumeSizeInGB"].documentation
    assert "NVMe" in doc and "ml.p4d" in doc
    other = sharded.ShardedRun().shrink(instance_type="ml.g5.48xlarge", model="small-gpt").storage()
    assert other["fits"] is None and "not in the course's table" in other["what the instance has"]
