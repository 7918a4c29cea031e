"""`fmlab preflight` and `fmlab job request`: every course job passes; a 30-day job and FSDP on the PyTorch 2.3 image
are refused naming why; exit 0 / 1 / 2; --json; the chain's cost; jobs.launch refuses on the local backend. No AWS:
the requests are captured in-process (moto), the quotas are read from fakes."""

from __future__ import annotations

import io
import json

import pytest
from test_service_rules import GOOD, IMAGE_23, request

from fmlab.cli import main
from fmlab.course_jobs import COURSE_JOBS
from fmlab.jobs.preflight import PreflightFailed, preflight, quota_findings


def run_cli(capsys, *argv, stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_course_job_passes_preflight(course_requests):
    assert {"sweep", "ddp", "smddp", "fsdp", "smp", "gpt30b", "trn1", "trn2"} <= set(course_requests)
    for name, r in course_requests.items():
        report = preflight(r, quotas=False)
        assert report.ok, (name, [str(f) for f in report.failures])


def test_course_jobs_run_on_images_that_hold_what_they_need(course_requests):
    image = {n: r["AlgorithmSpecification"]["TrainingImage"].split("/")[-1] for n, r in course_requests.items()}
    assert image["ddp"] == image["fsdp"] == "pytorch:2.13-cu133-amzn2023-sagemaker"
    assert image["smddp"].startswith("pytorch-training:2.5.1-gpu")  # the last DLC with SMDDP
    assert image["smp"].startswith("smdistributed-modelparallel:2.5.1") and image["gpt30b"] == image["smp"]
    assert image["trn1"].startswith("pytorch-training-neuronx:2.9.0")
    assert image["gpt30b-p5"] == image["ddp"]  # module 11: today's stack is the PyTorch DLC, not the SMP image
    assert course_requests["gpt30b-p5"]["ResourceConfig"]["TrainingPlanArn"].endswith(":training-plan/fmlab-gpt30b")


def test_job_request_prints_json_that_preflight_reads_from_stdin(capsys, monkeypatch, no_aws_credentials):
    code, out, _ = run_cli(capsys, "job", "request", "gpt30b")
    assert code == 0 and json.loads(out)["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    code, report, err = run_cli(capsys, "preflight", "-", stdin=out, monkeypatch=monkeypatch)
    assert code == 0, report + err
    assert "not checked: no AWS credentials" in report and "PASS  max-runtime" in report
    code, listed, _ = run_cli(capsys, "job", "request", "--list")
    assert code == 0 and [ln.split()[0] for ln in listed.splitlines() if not ln.startswith(" ")] == list(COURSE_JOBS)
    assert "the planned run on 16 x p4d" in listed and "not the planned run" in listed  # under the jobs it concerns


def test_a_30_day_job_is_refused_with_exit_1_naming_why(capsys, tmp_path, no_aws_credentials):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(request(StoppingCondition={"MaxRuntimeInSeconds": 30 * 86400})))
    code, out, _ = run_cli(capsys, "preflight", str(path))
    assert code == 1 and "FAIL  max-runtime" in out and "28 days" in out and "'The maximum value is 28 days'" in out
    code, out, _ = run_cli(capsys, "preflight", str(path), "--json")
    parsed = json.loads(out)
    assert code == 1 and parsed["ok"] is False
    assert [f["check"] for f in parsed["findings"] if f["level"] == "fail"] == ["max-runtime"]


def test_fsdp_on_the_2_3_image_is_refused_and_a_good_request_passes(capsys, tmp_path, no_aws_credentials):
    bad, good = tmp_path / "bad.json", tmp_path / "good.json"
    bad.write_text(json.dumps(request(AlgorithmSpecification={"TrainingImage": IMAGE_23},
                                      HyperParameters={"sharding": "full"})))
    good.write_text(json.dumps(GOOD))
    code, out, _ = run_cli(capsys, "preflight", str(bad))
    assert code == 1 and "FAIL  image/fsdp2" in out and "PyTorch >= 2.6" in out and "PR #141868" in out
    code, out, _ = run_cli(capsys, "preflight", str(good))
    assert code == 0 and "FAIL" not in out


def test_the_chain_is_priced_when_the_plan_is_longer_than_one_job():
    r = request(ResourceConfig={"InstanceCount": 16}, StoppingCondition={"MaxRuntimeInSeconds": 28 * 86400})
    chain = next(f for f in preflight(r, plan_days=41, quotas=False).findings if f.check == "chain-cost")
    assert chain.level == "warn" and "2 job(s)" in chain.message
    price = float(chain.message.split("$")[1].split()[0].replace(",", "")) / (16 * 41 * 24)
    assert price > 0 and "fmlab.plan.catalog" in chain.source
    assert not [f for f in preflight(r, quotas=False).findings if f.check == "chain-cost"]


class _Paginator:
    def __init__(self, pages):
        self.pages = pages

    def paginate(self, **_):
        return self.pages


class _Quotas:
    def get_paginator(self, _):
        return _Paginator([{"Quotas": [{"QuotaName": "ml.p4d.24xlarge for training job usage", "Value": 0.0}]}])


class _SageMaker:
    def get_paginator(self, _):
        return _Paginator([{"TrainingJobSummaries": []}])


def test_quotas_are_read_when_a_client_is_there_and_say_so_when_not(no_aws_credentials):
    assert quota_findings(GOOD)[0].message.startswith("not checked: no AWS credentials")
    found = quota_findings(GOOD, _Quotas(), _SageMaker())
    assert found[0].level == "fail" and "ml.p4d.24xlarge for training job usage" in found[0].message


def test_launch_refuses_on_the_local_backend_with_the_failing_check(local_env):
    from fmlab import jobs

    spec = jobs.JobSpec("too-long", max_run_seconds=30 * 86400)
    with pytest.raises(PreflightFailed, match="max-runtime.*28 days"):
        jobs.launch(spec, backend="local", quiet=True)
    assert not list((local_env / "sandbox").glob("jobs/*"))


class _Plans:
    def __init__(self, status):
        self.status = status

    def describe_training_plan(self, TrainingPlanName):
        return {"TrainingPlanName": TrainingPlanName, "Status": self.status}


class _S3:
    def __init__(self, count):
        self.count = count

    def list_objects_v2(self, Bucket, Prefix, MaxKeys):
        assert MaxKeys == 1  # one key answers "is anything there"
        return {"KeyCount": self.count}


def test_what_only_the_account_knows_is_read_with_credentials_and_said_unchecked_without(no_aws_credentials):
    from fmlab.jobs.preflight import account_findings

    arn = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/course-plan"
    request = {**GOOD, "ResourceConfig": {**GOOD["ResourceConfig"], "TrainingPlanArn": arn}}
    blind = account_findings(request)
    assert [f.level for f in blind] == ["warn"] and "not checked without AWS credentials" in blind[0].message
    assert "training plan" in blind[0].message and "S3 input prefix" in blind[0].message
    read = account_findings(request, _Plans("Expired"), _S3(0))
    assert {(f.check, f.level) for f in read} == {("training-plan", "fail"), ("input-data", "fail")}
    ok = account_findings(request, _Plans("Active"), _S3(1))
    assert {f.level for f in ok} == {"pass"}
    market = {**GOOD, "AlgorithmSpecification": {"AlgorithmName": "arn:aws:sagemaker:us-east-1:123456789012:"
                                                                  "algorithm/some-vendor-algo", "TrainingInputMode": "File"}}
    assert any(f.check == "marketplace" and "not checked" in f.message for f in account_findings(market))
    report = preflight(request, quotas=True)
    assert report.ok and report.verdict.startswith("no check refused it; not checked here:")
    assert "quotas" in report.unchecked and "account" in report.unchecked


def test_a_small_worst_case_shows_its_cents():
    from fmlab.jobs.preflight import dollars

    assert dollars(0.59) == "$0.59" and dollars(12345.6) == "$12,346"  # notebook 03 printed "$0" for a $0.59 job
