"""fmlab.hyperpod.eks: the HyperPodPyTorchJob manifest against the operator's transcribed schema and the course's
rules; every problem named with its path."""

import copy
import json

import pytest

from fmlab.hyperpod import eks


@pytest.fixture
def job():
    return eks.manifest("fmlab-gpt30b", "img:1", 16, "ml.p5.48xlarge", ["--model", "gpt-30b"], elastic=(8, 16))


def test_the_manifest_passes_and_runs_the_course_script_with_hyperpodrun(job):
    assert eks.problems(job) == []
    container = job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    assert container["command"][:4] == ["hyperpodrun", "--nnodes=16", "--nproc-per-node=8", "entrypoints/train.py"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}
    assert job["spec"]["elasticPolicy"]["minReplicas"] == 8
    assert "hyperpodrun" in eks.to_yaml(job) and "&id" not in eks.to_yaml(job)  # no YAML anchors


def test_the_schema_names_its_source_and_closes_what_the_operator_closes():
    text = json.loads(eks.SCHEMA_PATH.read_text())["$comment"]
    assert "aws/sagemaker-hyperpod-cli" in text and "011ca927123e02b35a399935bbb3ab1905fe33c7" in text
    assert "2026-11-24" in text


@pytest.mark.parametrize("change, words", [
    (lambda j: j.update(kind="PyTorchJob"), "job.kind: 'PyTorchJob' is not one of"),
    (lambda j: j["spec"].update(nprocPerNode=8), "job.spec.nprocPerNode: must be a string"),
    (lambda j: j["spec"]["runPolicy"].update(jobMaxRetries=3), "job.spec.runPolicy.jobMaxRetries: is not a field"),
    (lambda j: j["spec"]["runPolicy"]["restartPolicy"].pop("evalPeriodSeconds"), "evalPeriodSeconds: is required"),
    (lambda j: j["spec"]["runPolicy"]["logMonitoringConfiguration"][0].pop("logPattern"), "logPattern: is required"),
    (lambda j: j["spec"].update(elasticPolicies={}), "drops it without a word"),
    (lambda j: j["spec"].update(nprocPerNode="4"), "8 GPUs per pod but nprocPerNode '4'"),
    (lambda j: j["spec"]["elasticPolicy"].update(minReplicas=20), "minReplicas (20) <= replicas (16)"),
    (lambda j: j["spec"]["elasticPolicy"].update(replicaIncrementStep=3), "does not lead from 8 to 16"),
    (lambda j: j["spec"]["replicaSpecs"][0].update(replicas="16"), "replicas: must be an integer"),
])
def test_each_mistake_is_named(job, change, words):
    bad = copy.deepcopy(job)
    change(bad)
    assert any(words in p for p in eks.problems(bad)), eks.problems(bad)


def test_an_unknown_instance_type_says_which_are_known():
    with pytest.raises(ValueError, match="ml.p5.48xlarge"):
        eks.manifest("x", "img", 2, "ml.g5.48xlarge", [])
