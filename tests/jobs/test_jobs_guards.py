"""Guard rails and the SageMaker backend, tested with botocore's Stubber and moto: never real AWS.

Cost guard (catalog prices x count x (max run + keep-alive)), quota pre-check (Service Quotas API + jobs in
progress), clean-up (stop jobs, release warm pools), credential redaction, and a SageMaker launch whose
request is validated against the service model before it is sent.
"""

import datetime as dt

import boto3
import pytest
from botocore.stub import Stubber

from fmlab import jobs
from fmlab.environment import redact
from fmlab.jobs.guards import (
    DEFAULT_QUOTAS,
    OverBudget,
    QuotaTooLow,
    check_budget,
    check_quotas,
    quota_requests,
    worst_case_cost,
)
from fmlab.jobs.spec import JobSpec

ROLE = "arn:aws:iam::111122223333:role/fmlab-course"


def test_worst_case_cost_is_price_times_count_times_run_plus_keep_alive():
    spec = JobSpec("cost", instance_type="ml.p4d.24xlarge", instance_count=2, max_run_seconds=7200,
                   keep_alive_seconds=1800)
    est = worst_case_cost(spec)
    # catalog: ml.p4d.24xlarge $37.688/h on-demand training, us-east-1
    assert est.run_usd == pytest.approx(37.688 * 2 * 2.0)
    assert est.keep_alive_usd == pytest.approx(37.688 * 2 * 0.5)
    assert est.worst_case_usd == pytest.approx(188.44)
    assert "warm-pool keep-alive" in str(est)


def test_a_job_on_a_training_plan_adds_no_instance_hours():
    """The plan was paid up front; pricing its job at SageMaker's on-demand rate would count the instances twice."""
    arn = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/fmlab-gpt30b"
    spec = JobSpec("on-plan", instance_type="ml.p5.48xlarge", instance_count=16, max_run_seconds=10 * 86400,
                   training_plan_arn=arn)
    est = worst_case_cost(spec)
    assert est.worst_case_usd == 0 and "paid up front" in est.source
    assert worst_case_cost(spec, price=10.0).worst_case_usd == pytest.approx(10.0 * 16 * 240)  # a price you give


def test_budget_refuses_above_the_limit_and_says_how_to_raise_it(monkeypatch):
    spec = JobSpec("big", instance_type="ml.p4d.24xlarge", max_run_seconds=3600)
    with pytest.raises(OverBudget, match=r"above your budget of \$10.00.*budget_usd=38"):
        check_budget(spec)
    assert check_budget(spec, budget_usd=40).worst_case_usd == pytest.approx(37.688)
    monkeypatch.setenv("FMLAB_BUDGET_USD", "100")
    assert check_budget(spec).worst_case_usd < 100
    with pytest.raises(OverBudget, match="no price for 'ml.c7i.large'"):
        check_budget(JobSpec("cpu", instance_type="ml.c7i.large"))
    assert check_budget(JobSpec("cpu", instance_type="ml.c7i.large"), price=0.1).worst_case_usd == pytest.approx(0.1)


def test_sagemaker_launch_over_budget_touches_no_aws(monkeypatch):
    def no_aws(*args, **kwargs):
        raise AssertionError("AWS was called")

    monkeypatch.setattr(boto3, "Session", no_aws)
    with pytest.raises(OverBudget):
        jobs.launch(JobSpec("big", instance_type="ml.p5.48xlarge", instance_count=4, role=ROLE),
                    backend="sagemaker", budget_usd=5)


def _stub_quotas(quotas: dict[str, float], running: list[tuple[str, str, int]]):
    sq = boto3.client("service-quotas", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    sm = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    sq_stub, sm_stub = Stubber(sq), Stubber(sm)
    sq_stub.add_response("list_service_quotas", {"Quotas": [
        {"QuotaName": name, "Value": value, "ServiceCode": "sagemaker"} for name, value in quotas.items()]},
        {"ServiceCode": "sagemaker"})
    now = dt.datetime(2024, 6, 1)
    summaries = [{"TrainingJobName": n, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:111122223333:training-job/{n}",
                  "CreationTime": now, "TrainingJobStatus": "InProgress"} for n, _, _ in running]
    sm_stub.add_response("list_training_jobs", {"TrainingJobSummaries": summaries}, {"StatusEquals": "InProgress"})
    sm_stub.add_response("list_training_jobs", {"TrainingJobSummaries": []}, {"WarmPoolStatusEquals": "Available"})
    for name, kind, count in sorted(running):
        sm_stub.add_response("describe_training_job", {
            "TrainingJobName": name, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:111122223333:training-job/{name}",
            "TrainingJobStatus": "InProgress", "SecondaryStatus": "Training", "CreationTime": now,
            "AlgorithmSpecification": {"TrainingInputMode": "File"},
            "ResourceConfig": {"InstanceType": kind, "InstanceCount": count, "VolumeSizeInGB": 30},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, "ModelArtifacts": {"S3ModelArtifacts": ""}},
            {"TrainingJobName": name})
    sq_stub.activate()
    sm_stub.activate()
    return sq, sm, sq_stub, sm_stub


def test_quota_precheck_says_what_to_request():
    spec = JobSpec("q", instance_type="ml.p4d.24xlarge", instance_count=2, max_run_seconds=6 * 86400, role=ROLE)
    quotas = {"ml.p4d.24xlarge for training job usage": 2, "Number of instances across all training jobs": 4,
              "Maximum number of instances per training job": 20, "Longest run time for a training job": 432000}
    sq, sm, sq_stub, sm_stub = _stub_quotas(quotas, [("fmlab-other-1", "ml.p4d.24xlarge", 1)])
    with pytest.raises(QuotaTooLow) as err:
        check_quotas(spec, sq, sm)
    message = str(err.value)
    assert "'ml.p4d.24xlarge for training job usage' is 2 with 1 in use" in message and "at least 3" in message
    assert "longest run time" in message.lower() and "518400" in message
    assert "Number of instances across all" not in message  # 1 in use + 2 = 3 <= 4
    sq_stub.assert_no_pending_responses()
    sm_stub.assert_no_pending_responses()


def test_quota_precheck_passes_when_the_account_has_room():
    spec = JobSpec("q", instance_type="ml.g5.12xlarge", instance_count=1, role=ROLE)
    sq, sm, *_ = _stub_quotas({"ml.g5.12xlarge for training job usage": 2,
                               "Number of instances across all training jobs": 4}, [])
    check_quotas(spec, sq, sm)


def test_default_quotas_as_the_post_states_them():
    # "Training large language models on Amazon SageMaker: best practices": 432,000 s longest run time,
    # 4 instances across all training jobs, 20 per job, p4d usage 0.
    defaults = {q["quota"]: q["default"] for q in DEFAULT_QUOTAS}
    assert defaults["Longest run time for a training job"].startswith("432,000")
    assert defaults["Number of instances across all training jobs"] == "4"
    assert defaults["Maximum number of instances per training job"] == "20"
    assert defaults["ml.p4d.24xlarge for training job usage"] == "0"
    plan = JobSpec("big", instance_type="ml.p4d.24xlarge", instance_count=16, max_run_seconds=30 * 86400,
                   keep_alive_seconds=600)
    rows = {r["quota"]: r for r in quota_requests(plan)}
    assert rows["ml.p4d.24xlarge for training job usage"]["request"] == 16
    assert rows["Number of instances across all training jobs"]["request"] == 16
    assert rows["Longest run time for a training job"]["request"] == 30 * 86400
    assert "Maximum number of instances per training job" not in rows  # 16 <= 20
    assert rows["ml.p4d.24xlarge for training warm pool usage"]["blocks"] is False


def test_cleanup_stops_jobs_and_releases_warm_pools(capsys):
    sm = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(sm)
    now = dt.datetime(2024, 6, 1)

    def summary(name, status):
        return {"TrainingJobName": name, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:1:training-job/{name}",
                "CreationTime": now, "TrainingJobStatus": status}

    stub.add_response("list_training_jobs", {"TrainingJobSummaries": [summary("fmlab-a-1", "InProgress")]},
                      {"StatusEquals": "InProgress", "NameContains": "fmlab-"})
    stub.add_response("stop_training_job", {}, {"TrainingJobName": "fmlab-a-1"})
    stub.add_response("list_training_jobs", {"TrainingJobSummaries": [summary("fmlab-b-2", "Completed")]},
                      {"WarmPoolStatusEquals": "Available", "NameContains": "fmlab-"})
    stub.add_response("update_training_job", {"TrainingJobArn": "arn:aws:sagemaker:us-east-1:1:training-job/fmlab-b-2"},
                      {"TrainingJobName": "fmlab-b-2", "ResourceConfig": {"KeepAlivePeriodInSeconds": 0}})
    with stub:
        actions = jobs.cleanup("sagemaker", sagemaker_client=sm)
    stub.assert_no_pending_responses()
    assert actions == ["stopped fmlab-a-1", "released the warm pool of fmlab-b-2 (keep-alive set to 0)"]
    assert "released the warm pool of fmlab-b-2" in capsys.readouterr().out


def test_redact_hides_keys_secrets_and_tokens(monkeypatch):
    monkeypatch.setenv("AWS_SESSION_TOKEN", "IQoJb3JpZ2luX2VjEXAMPLETOKENVALUE")
    text = ("key AKIAIOSFODNN7EXAMPLE secret aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY "
            '"SessionToken": "FQoGZXIvYXdzEJr//////////wEaDEXAMPLE" env IQoJb3JpZ2luX2VjEXAMPLETOKENVALUE')
    out = redact(text)
    for secret in ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "FQoGZXIvYXdzEJr",
                   "IQoJb3JpZ2luX2VjEXAMPLETOKENVALUE"):
        assert secret not in out
    assert out.count("****") == 4 and redact("loss=2.5 lr=3e-4") == "loss=2.5 lr=3e-4"


def test_sagemaker_launch_validates_the_request_before_sending_it(monkeypatch, capsys):
    """The SageMaker path end to end against moto: budget shown, request checked by the sandbox validator."""
    from moto import mock_aws

    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="course-bucket")
        spec = JobSpec("sm-launch", instance_type="ml.g5.xlarge", keep_alive_seconds=600, max_run_seconds=900,
                       role=ROLE, bucket="course-bucket", region="us-east-1")
        job = jobs.launch(spec, backend="sagemaker", quotas=False)
        assert job.backend == "sagemaker" and job.request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 600
        assert job.status() in ("InProgress", "Completed")  # moto's own state machine
        out = capsys.readouterr().out
        assert "worst case $0.59" in out  # 1.408 $/h x (0.25 h + 0.1667 h)
        bad = spec.with_(name="sm-bad", keep_alive_seconds=99999, max_run_seconds=60)
        from fmlab.service.api_model import RequestInvalid

        with pytest.raises(RequestInvalid, match="KeepAlivePeriodInSeconds"):
            jobs.launch(bad, backend="sagemaker", quotas=False, budget_usd=100)
        assert not any(j["TrainingJobName"].startswith("fmlab-sm-bad")
                       for j in boto3.client("sagemaker").list_training_jobs()["TrainingJobSummaries"])


def test_cli_job_commands_on_the_local_sandbox(tmp_path, monkeypatch, capsys):
    from fmlab.cli import main

    monkeypatch.setenv("FMLAB_LOCAL_BUCKET", str(tmp_path / "bucket"))
    monkeypatch.setenv("FMLAB_SANDBOX_DIR", str(tmp_path / "sandbox"))
    monkeypatch.setenv("FMLAB_BACKEND", "local")
    script = tmp_path / "hello.py"
    script.write_text("import sys\nprint('step=1 loss=1.5 lr=0.1', sys.argv[1:])\n")
    assert main(["job", "run", "--name", "cli", "--entry-point", str(script), "--hp", "x=1", "--wait"]) == 0
    out = capsys.readouterr().out
    assert "step=1 loss=1.5" in out and "['--x', '1']" in out and "Completed" in out
    assert main(["job", "list"]) == 0
    name = capsys.readouterr().out.split()[0]
    assert name.startswith("fmlab-cli-")
    assert main(["job", "describe", name]) == 0 and "Completed" in capsys.readouterr().out
    assert main(["job", "logs", name]) == 0 and "step=1 loss=1.5" in capsys.readouterr().out
    assert main(["job", "cleanup"]) == 0 and "nothing to clean up" in capsys.readouterr().out
    assert main(["job", "run", "--name", "x" * 60, "--entry-point", str(script)]) == 2
    assert "name:" in capsys.readouterr().err
