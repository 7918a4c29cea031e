"""The EFA environment a job needs follows from its image's aws-ofi-nccl (aws/aws-ofi-nccl doc/efa-env-var.md, read
2026-11-26): nothing from 1.7.0, FI_EFA_USE_DEVICE_RDMA=1 for 1.6.x, that plus FI_PROVIDER=efa and NCCL_PROTO=simple
up to 1.5.0; RDMAV_* is never set. Preflight warns only where the image's plug-in needs what is missing, or where a
variable the cheatsheet says not to use is set, and names the course's function only for the course's script."""

from __future__ import annotations

import dataclasses

import pytest

from fmlab.jobs.sharded import environment
from fmlab.service import checks
from fmlab.service.checks import efa_findings
from fmlab.service.images import (
    EFA_ENV_DOC,
    OLD_PLUGIN_ENVIRONMENT,
    PLUGIN_DEFAULTS,
    efa_environment,
    manifest,
)

IMAGE_213 = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker"
IMAGE_251 = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker"
IMAGE_SMP = "658645717510.dkr.ecr.us-west-2.amazonaws.com/smdistributed-modelparallel:2.5.1-gpu-py311-cu124"
EFA_VARIABLES = ("FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_PROTO")


def request(image: str = IMAGE_213, count: int = 2, instance: str = "ml.p4d.24xlarge", **env) -> dict:
    return {"AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File"},
            "ResourceConfig": {"InstanceType": instance, "InstanceCount": count, "VolumeSizeInGB": 30},
            "Environment": dict(env)}


def only(findings, check: str):
    [f] = [f for f in findings if f.check == check]
    return f


def test_the_cheatsheet_is_quoted_with_its_commit_and_the_day_it_was_read():
    assert "Use for aws-ofi-nccl<=1.5.0 AND EFA-enabled GPU instances" in EFA_ENV_DOC.says
    assert "Do not set for libfabric>=1.18.0 and aws-ofi-nccl>=1.7.0" in EFA_ENV_DOC.says
    assert "RDMAV_FORK_SAFE=1 can break things" in EFA_ENV_DOC.says and "Do not use." in EFA_ENV_DOC.says
    assert "2daf7d303aa139a03140aa530957d10521e4478d/doc/efa-env-var.md" in EFA_ENV_DOC.url
    assert EFA_ENV_DOC.read == PLUGIN_DEFAULTS.read == "2026-11-26"
    assert "Setting provider_filter to efa" in PLUGIN_DEFAULTS.says  # the plug-in picks efa itself


def test_the_environment_follows_the_plugin_version():
    dlc = manifest("pytorch-2.13-gpu")
    assert (dlc.aws_ofi_nccl, manifest("pytorch-2.10-gpu").aws_ofi_nccl, manifest("pytorch-2.5-gpu").aws_ofi_nccl) == (
        "1.20.0", "1.18.0", "1.12.1")
    assert all(efa_environment(manifest(n)) == {} for n in ("pytorch-2.13-gpu", "pytorch-2.10-gpu", "pytorch-2.5-gpu"))
    assert efa_environment(dataclasses.replace(dlc, aws_ofi_nccl="1.7.0")) == {}
    assert efa_environment(dataclasses.replace(dlc, aws_ofi_nccl="1.6.1")) == {"FI_EFA_USE_DEVICE_RDMA": "1"}
    assert efa_environment(dataclasses.replace(dlc, aws_ofi_nccl="1.5.0")) == OLD_PLUGIN_ENVIRONMENT == {
        "FI_EFA_USE_DEVICE_RDMA": "1", "FI_PROVIDER": "efa", "NCCL_PROTO": "simple"}
    # no source gives the SMP image's or the 2.3 DLC's plug-in: not known, the caller decides
    assert efa_environment(manifest("smp-2.8.0")) is None and efa_environment(manifest("pytorch-2.3-gpu")) is None
    assert efa_environment(None) is None and efa_environment(manifest("neuron-2.9.0")) is None


def test_jobs_set_only_what_their_image_needs():
    assert environment(IMAGE_213) == environment(IMAGE_251) == {"NCCL_DEBUG": "INFO"}
    assert environment(IMAGE_SMP) == {**OLD_PLUGIN_ENVIRONMENT, "NCCL_DEBUG": "INFO"}  # version not known: kept


@pytest.fixture(scope="module")
def course():
    from fmlab.course_jobs import course_request

    return {name: course_request(name) for name in ("ddp", "smddp", "smp", "trn2", "gpt30b-p5")}


def test_course_jobs_force_nothing_the_plugin_does_itself(course):
    for name in ("ddp", "smddp", "gpt30b-p5"):  # PyTorch DLCs with aws-ofi-nccl 1.20.0 / 1.12.1
        env = course[name]["Environment"]
        assert not set(EFA_VARIABLES) & set(env), (name, env)
        f = only(efa_findings(course[name]), "efa")
        assert f.level == "pass" and "no EFA variable needed" in f.message, f
    assert all(course["smp"]["Environment"][k] == v for k, v in OLD_PLUGIN_ENVIRONMENT.items())
    assert "was not checked" in only(efa_findings(course["smp"]), "efa").message
    assert "RDMAV_FORK_SAFE" not in course["trn2"]["Environment"]  # the cheatsheet: "Do not use"
    assert course["trn2"]["Environment"]["FI_EFA_FORK_SAFE"] == "1"  # the one it prefers
    assert efa_findings(course["trn2"]) == []


def test_a_new_plugin_needs_nothing_and_an_old_one_is_told_what_is_missing(monkeypatch):
    f = only(efa_findings(request()), "efa")
    assert f.level == "pass" and "aws-ofi-nccl 1.20.0" in f.message and "no EFA variable needed" in f.message
    needless = only(efa_findings(request(NCCL_PROTO="simple")), "efa")
    assert needless.level == "pass" and "NCCL_PROTO=simple set, which this plug-in does not need" in needless.message
    rdma = dataclasses.replace(manifest("pytorch-2.13-gpu"), aws_ofi_nccl="1.6.0")
    monkeypatch.setattr(checks, "manifest_for", lambda uri: rdma)
    assert "FI_EFA_USE_DEVICE_RDMA=1 set, as its cheatsheet says" in only(
        efa_findings(request(FI_EFA_USE_DEVICE_RDMA="1")), "efa").message
    old = dataclasses.replace(manifest("pytorch-2.13-gpu"), aws_ofi_nccl="1.5.0")
    monkeypatch.setattr(checks, "manifest_for", lambda uri: old)
    warn = only(efa_findings(request(FI_PROVIDER="efa")), "efa")
    assert warn.level == "warn" and "aws-ofi-nccl 1.5.0" in warn.message
    assert "FI_EFA_USE_DEVICE_RDMA=1, NCCL_PROTO=simple" in warn.message and "FI_PROVIDER" not in warn.message
    assert "fmlab" not in warn.message  # worded for anyone: the request does not run the course's script
    ours = only(efa_findings(request(FMLAB_SCRIPT="entrypoints/train.py")), "efa")
    assert "fmlab.jobs.sharded.environment()" in ours.message
    assert only(efa_findings(request(**OLD_PLUGIN_ENVIRONMENT)), "efa").level == "pass"


def test_an_unknown_image_is_said_to_be_unchecked_and_rdmav_is_always_a_warning():
    unknown = "111122223333.dkr.ecr.us-west-2.amazonaws.com/my-image:1"
    f = only(efa_findings(request(unknown)), "efa")
    assert f.level == "warn" and "was not checked" in f.message and "from 1.7.0" in f.message
    assert only(efa_findings(request(unknown, **OLD_PLUGIN_ENVIRONMENT)), "efa").level == "pass"
    rdmav = only(efa_findings(request(RDMAV_FORK_SAFE="1")), "efa/rdmav")
    assert rdmav.level == "warn" and "FI_EFA_FORK_SAFE" in rdmav.message
    assert rdmav.field == "Environment.RDMAV_FORK_SAFE"
    assert "efa-env-var.md" in rdmav.source
    trn = request(unknown, instance="ml.trn2.48xlarge", RDMAV_FORK_SAFE="1")
    assert [x.check for x in efa_findings(trn)] == ["efa/rdmav"]
    assert efa_findings(request(count=1, RDMAV_FORK_SAFE="1")) == []  # one instance: no EFA traffic
    assert efa_findings(request(instance="ml.g5.48xlarge")) == []
