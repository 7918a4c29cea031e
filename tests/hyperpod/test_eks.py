"""fmlab.hyperpod.eks: the HyperPodPyTorchJob manifest against the operator's transcribed schema and the course's
rules; every problem named with its path."""

import copy
import json

import pytest

from fmlab.hyperpod import eks, planned
from fmlab.plan.layout import candidates, choose
from fmlab.plan.parallelism import ParallelConfig
from fmlab.plan.planned import planned_run
from fmlab.service.images import manifest_for

RUN = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16)  # module 11's planned run


@pytest.fixture
def job():
    return planned.eks_manifest(RUN, "fmlab-gpt30b", "img:1", data="/fsx/data/gpt2-tokens",
                                checkpoint_dir="/fsx/checkpoints/gpt30b", elastic=(8, 16), service_account="fmlab")


def test_the_manifest_passes_and_runs_the_course_script_with_hyperpodrun(job):
    assert eks.problems(job) == []
    container = job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    # elastic: hyperpodrun starts on 8 to 16 nodes, as the elastic policy lets the operator scale
    assert container["command"][:4] == ["hyperpodrun", "--nnodes=8:16", "--nproc-per-node=8", "entrypoints/train.py"]
    # what AWS's own p5 HyperPodPyTorchJob asks for (eks.AWS_P5_EXAMPLE)
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32,
                                                "hugepages-2Mi": "5120Mi"}
    pod = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["serviceAccountName"] == "fmlab"
    assert {v["name"]: v for v in pod["volumes"]}["dshm"]["emptyDir"] == {"medium": "Memory"}
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/fsx", "/dev/shm"}
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


def test_another_instance_types_layout_is_refused(job):
    """The layout the planner chose for 8 x p5en (141 GB GPUs) does not fit a p5's 80 GB: the check re-plans the
    manifest's flags for its own instance type, at its starting and its fewest nodes."""
    p5en = choose(candidates("gpt-30b", 300e9, "ml.p5en.48xlarge", 8))["parallel"]
    borrowed = eks.manifest("fmlab-gpt30b", "img:1", 16, "ml.p5.48xlarge", ["--model", "gpt-30b", *p5en.flags()])
    (problem,) = {p.split(" GB")[0]: p for p in eks.layout_problems(borrowed)}.values()  # same at 16 nodes
    assert "on 16 x ml.p5.48xlarge, which may use 68.4" in problem
    assert eks.layout_problems(job) == []


def test_a_manifest_that_runs_another_run_is_refused_by_its_own_flags():
    """The manifest module 11 printed before the planned run: hybrid 16, micro-batch 1 and 128 sequences per step,
    saving every 586 steps (the planned run's interval at its own 5.46 s step). Its own step is about a second, so it
    saves every few minutes: re-planned from its flags, the interval is refused, and the planned run's is not."""
    old = ParallelConfig(sharding="hybrid", hybrid_shard_degree=16)
    job = eks.manifest("fmlab-gpt30b", "img:1", 16, "ml.p5.48xlarge", ["--model", "gpt-30b", *old.flags(),
                       "--checkpoint-dir", "/fsx/checkpoints/gpt30b", "--checkpoint-every", "586",
                       "--async-checkpoint", "true", "--micro-batch", "1", "--global-batch", "128"])
    (problem,) = eks.layout_problems(job)
    assert "--checkpoint-every 586 steps of" in problem and "from Daly's 0.89 h" in problem, problem


def test_a_folder_on_no_volume_is_refused(job):
    bad = copy.deepcopy(job)
    container = bad["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m["mountPath"] != "/fsx"]
    found = eks.volume_problems(bad)
    assert any("--checkpoint-dir /fsx/checkpoints/gpt30b is on no volume" in p for p in found), found
    container["volumeMounts"] = []
    assert any("no /dev/shm volume" in p for p in eks.volume_problems(bad))


def test_an_elastic_job_keeps_its_global_batch(job):
    """8 of 16 replicas at the same micro-batch would halve the batch: the script takes --global-batch and
    accumulates twice as many passes on 8 nodes (fmlab.train.config.accumulation_for)."""
    from fmlab.train.config import TrainConfig, accumulation_for

    assert accumulation_for(TrainConfig(micro_batch=1, global_batch=128), 128) == 1
    assert accumulation_for(TrainConfig(micro_batch=1, global_batch=128), 64) == 2
    bad = copy.deepcopy(job)
    command = bad["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"]
    at = command.index("--global-batch")
    del command[at:at + 2]
    assert any("without --global-batch changes its batch" in p for p in eks.layout_problems(bad))
    command += ["--global-batch", "96"]  # 96 sequences do not split over 128 replicas x 2 at 16 nodes
    assert any("on 16 nodes: --global-batch 96 does not split" in p for p in eks.layout_problems(bad))


def test_restarts_need_a_checkpoint_to_resume_from(job):
    """The operator's restarts and elastic rescaling resume from the newest checkpoint: a script that saves none, or
    only at the end (--checkpoint-every 0, the course's default), is refused; a job with neither saves freely."""
    bad = copy.deepcopy(job)
    command = bad["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"]
    at = command.index("--checkpoint-every")
    del command[at:at + 2]
    found = eks.checkpoint_problems(bad)
    assert len(found) == 1 and "--checkpoint-every is 0" in found[0] and "fmlab.train.planned.flags" in found[0]
    assert "runPolicy.jobMaxRetryCount and runPolicy.restartPolicy and elasticPolicy" in found[0]
    assert found[0] in eks.problems(bad)
    at = command.index("--checkpoint-dir")
    del command[at:at + 2]
    assert "saves none: set --checkpoint-dir" in eks.checkpoint_problems(bad)[0]
    bad["spec"].pop("elasticPolicy")
    bad["spec"]["runPolicy"].pop("restartPolicy")
    bad["spec"]["runPolicy"]["jobMaxRetryCount"] = 0
    assert eks.checkpoint_problems(bad) == []  # nothing restarts it: nothing to resume from


def test_the_interval_in_steps_is_dalys_at_the_predicted_step():
    """Module 8's Daly interval for the planned 30B run on 16 p5 (0.89 h with asynchronous saves, 1.99 h
    synchronous), divided by the planner's predicted step of 5.46 s."""
    from fmlab.plan import scenario

    plan = RUN.estimate
    assert scenario.step_seconds(plan) == pytest.approx(plan.step["step_s"])
    for async_save, hours in ((True, 0.89), (False, 1.99)):
        assert scenario.daly_interval_hours(plan, async_save=async_save) == pytest.approx(hours, abs=0.01)
        steps = scenario.checkpoint_every_steps(plan, async_save=async_save)
        assert steps == round(scenario.daly_interval_hours(plan, async_save=async_save) * 3600 / plan.step["step_s"])
    assert scenario.checkpoint_every_steps(plan) == 519


def test_the_sagemaker_flavour_is_refused_on_eks(job):
    bad = copy.deepcopy(job)
    bad["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"] = (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker")
    assert any("SageMaker flavour" in p for p in eks.problems(bad))
    good = eks.eks_image("us-east-1")
    assert good.endswith("/pytorch:2.13-cu130-amzn2023") and manifest_for(good).name == "pytorch-2.13-ec2-gpu"


def test_an_unknown_instance_type_says_which_are_known():
    with pytest.raises(ValueError, match="ml.p5.48xlarge"):
        eks.manifest("x", "img", 2, "ml.g5.48xlarge", [])
