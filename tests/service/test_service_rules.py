"""Each SageMaker rule beyond the API model, and each image feature, broken by a request: refused (or warned) with
its rule and source, by fmlab.service, by the sandbox's validator and by preflight. No AWS.

Sources are in src/fmlab/service/rules.py, images.py and features.py (botocore 1.44.8's SageMaker model prose, the
developer guide, aws/deep-learning-containers, pytorch PRs #141868 and #133881)."""

from __future__ import annotations

import copy

import pytest

from fmlab import sandbox
from fmlab.service import MANIFESTS, manifest_for, refusals, service_findings
from fmlab.service import retry as service_retry
from fmlab.service.api_model import RequestInvalid, api_problems, problems_in, validate_request
from fmlab.service.features import features_of, image_having

IMAGE_213 = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker"
IMAGE_23 = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker"
IMAGE_251 = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker"
IMAGE_SMP = "658645717510.dkr.ecr.us-west-2.amazonaws.com/smdistributed-modelparallel:2.5.1-gpu-py311-cu124"
IMAGE_TORCHNEURON = "111122223333.dkr.ecr.us-east-2.amazonaws.com/fmlab-torchneuron:2.13.0-neuronx2.13.3-sdk2.33.0-ubuntu26.04"

GOOD = {
    "TrainingJobName": "fmlab-preflight-demo",
    "RoleArn": "arn:aws:iam::111122223333:role/fmlab-course",
    "AlgorithmSpecification": {"TrainingImage": IMAGE_213, "TrainingInputMode": "File"},
    "HyperParameters": {"lr": "0.0003", "max_steps": "200"},
    "Environment": {"FMLAB_SCRIPT": "entrypoints/train.py"},  # the course's script (fmlab.jobs.request sets it)
    "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://fmlab-course/fmlab/data/tiny"}}}],
    "OutputDataConfig": {"S3OutputPath": "s3://fmlab-course/fmlab/output"},
    "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}


# A heterogeneous cluster as AWS's guide builds one: a CPU group beside a GPU group, one (GPU) image for both
HETERO = {"InstanceType": None, "InstanceCount": None, "InstanceGroups": [
    {"InstanceGroupName": "data", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 2},
    {"InstanceGroupName": "train", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}]}


OURS = {"Environment": GOOD["Environment"]}


def request(**changes) -> dict:
    """GOOD with top-level sections updated (dicts merged one level deep)."""
    r = copy.deepcopy(GOOD)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(r.get(key), dict):
            r[key].update(value)
        else:
            r[key] = value
    return r


def levels(r: dict, check: str) -> list[str]:
    return [f.level for f in service_findings(r) if f.check == check]


def refused(r: dict, check: str, source_words: str) -> str:
    """Assert `r` is refused by the `check` rule, citing its source, by fmlab.service and by the sandbox."""
    found = [f for f in refusals(r) if f.check == check]
    assert found, [str(f) for f in service_findings(r)]
    assert source_words in found[0].source
    with pytest.raises(RequestInvalid) as e:
        validate_request(r)
    assert f"[{check}]" in str(e.value) and source_words in str(e.value)
    return found[0].message


def test_the_good_request_passes_every_check():
    assert not api_problems(GOOD) and not problems_in(GOOD) and not refusals(GOOD)


def test_max_runtime_above_28_days_is_refused_citing_the_api_reference():
    r = request(StoppingCondition={"MaxRuntimeInSeconds": 30 * 86400})
    assert not api_problems(r)  # the model carries only min 1: shape alone accepts it
    message = refused(r, "max-runtime", "StoppingCondition.MaxRuntimeInSeconds")
    assert "30.0 days" in message and "2,419,200" in message and "chain of jobs" in message
    assert levels(request(StoppingCondition={"MaxRuntimeInSeconds": 28 * 86400}), "max-runtime") == ["pass"]


def test_max_runtime_with_retries_bounds_all_attempts_together():
    r = request(RetryStrategy={"MaximumRetryAttempts": 3},
                CheckpointConfig={"S3Uri": "s3://fmlab-course/ck", "LocalPath": "/opt/ml/checkpoints"})
    note = next(f for f in service_findings(r) if f.check == "max-runtime")
    assert note.level == "pass" and "all 4 attempts together" in note.message


def test_a_sized_volume_on_an_nvme_instance_is_warned_as_ignored():
    r = request(ResourceConfig={"VolumeSizeInGB": 1325})
    warn = next(f for f in service_findings(r) if f.check == "nvme-volume")
    assert warn.level == "warn" and "ignored" in warn.message and "ResourceConfig.VolumeSizeInGB" in warn.source
    assert levels(request(ResourceConfig={"InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 500}),
                  "nvme-volume") == []  # EBS-only instances use the volume


def test_warm_pool_above_the_guide_warns_and_above_the_api_fails_once():
    guide = request(ResourceConfig={"KeepAlivePeriodInSeconds": 3601})
    assert levels(guide, "warm-pool") == ["warn"]  # the API's reference and model allow it since 2025-12-17
    warning = next(f for f in service_findings(guide) if f.check == "warm-pool")
    assert "21,600" in warning.message and "3,600" in warning.message and "sagemaker:KeepAlivePeriod" in warning.message
    over = request(ResourceConfig={"KeepAlivePeriodInSeconds": 86400})
    found = [f for f in refusals(over) if f.check == "warm-pool"]
    assert found and "21,600" in found[0].message and "3,600" in found[0].message
    assert "KeepAlivePeriodInSeconds max 21600" in found[0].source and "API_ResourceConfig" in found[0].source
    with pytest.raises(RequestInvalid) as e:  # the API model names the field; the rule does not say it twice
        validate_request(over)
    assert e.value.fields == ["ResourceConfig.KeepAlivePeriodInSeconds"]
    assert levels(request(ResourceConfig={"KeepAlivePeriodInSeconds": 3600}), "warm-pool") == ["pass"]


def test_a_warm_pool_is_refused_with_spot_and_with_a_heterogeneous_cluster():
    spot = request(ResourceConfig={"KeepAlivePeriodInSeconds": 600}, EnableManagedSpotTraining=True,
                   StoppingCondition={"MaxWaitTimeInSeconds": 7200})
    assert "managed spot" in refused(spot, "warm-pool-with", "Considerations")
    groups = request(ResourceConfig={"KeepAlivePeriodInSeconds": 600, **HETERO})
    assert "heterogeneous" in refused(groups, "warm-pool-with", "Considerations")


def test_retry_without_checkpoints_warns_that_it_starts_from_step_0():
    r = request(RetryStrategy={"MaximumRetryAttempts": 2})
    assert levels(r, "retry-scope") == ["pass", "warn"]
    found = [f for f in service_findings(r) if f.check == "retry-scope"]
    assert "InternalServerError" in found[0].message and "step 0" in found[1].message
    assert "API reference, RetryStrategy" in found[1].source


def test_retry_scope_a_killed_process_is_not_retried_a_lost_host_is():
    assert service_retry.failure_kind(-9, host_lost=False) == "AlgorithmError"  # the OOM killer's SIGKILL
    assert service_retry.failure_kind(1, host_lost=False) == "AlgorithmError"
    assert service_retry.failure_kind(-9, host_lost=True) == "InternalServerError"
    assert not service_retry.retried("AlgorithmError") and service_retry.retried("InternalServerError")
    assert "RetryStrategy" in service_retry.SOURCE and "cluster-repair" in service_retry.SOURCE
    assert "OOM killer" in service_retry.describe_exit(-9)


def test_smddp_backend_off_p4_is_refused():
    r = request(AlgorithmSpecification={"TrainingImage": IMAGE_251},
                HyperParameters={"backend": '"smddp"'}, ResourceConfig={"InstanceType": "ml.p5.48xlarge"})
    message = refused(r, "smddp-instances", "SMDDP library supports P4 and P4de")
    assert "ml.p5.48xlarge" in message and "nccl" in message
    assert not [f for f in refusals(request(AlgorithmSpecification={"TrainingImage": IMAGE_251},
                                            HyperParameters={"backend": "smddp"}))]


def test_an_image_on_the_wrong_processor_is_refused():
    message = refused(request(ResourceConfig={"InstanceType": "ml.trn1.32xlarge"}), "image-instance",
                      "fmlab.service.images")
    assert "ml.trn1.32xlarge" in message and "GPU" in message


def test_instance_preferences_exclude_instance_type_and_repeat_nothing():
    prefs = [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2}, {"InstanceType": "ml.p5.48xlarge"}]
    r = request(ResourceConfig={"InstancePreferences": prefs})
    found = [f for f in refusals(r) if f.check == "instance-preferences"]
    assert any("InstanceType" in f.message for f in found) and any("more than once" in f.message for f in found)
    assert "InstancePreferences" in found[0].source
    refused(r, "instance-preferences", "ResourceConfig.InstancePreferences")
    ok = copy.deepcopy(GOOD)
    ok["ResourceConfig"] = {"InstancePreferences": [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
                                                    {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2}],
                            "VolumeSizeInGB": 30}
    assert not [f for f in refusals(ok) if f.check == "instance-preferences"]
    assert validate_request(ok)  # no InstanceType needed: the preferences name theirs
    ok["ResourceConfig"]["InstancePreferences"][1].pop("InstanceCount")
    assert api_problems(ok)  # each preference counts its instances when the job does not
    ok["ResourceConfig"]["InstanceCount"] = 2
    assert [p.field for p in api_problems(ok)] == ["ResourceConfig.InstancePreferences"]  # counted on only one
    ok["ResourceConfig"]["InstancePreferences"][0].pop("InstanceCount")
    assert api_problems(ok) == []  # one count for the job, none per preference
    ok["ResourceConfig"]["InstancePreferences"][0]["InstanceCount"] = 1
    ok["ResourceConfig"]["InstancePreferences"][1]["InstanceCount"] = 2
    both = api_problems(ok)  # the API reference: "rejects requests that set it both per preference and in ResourceConfig"
    assert [p.field for p in both] == ["ResourceConfig.InstanceCount"] and "keep one place" in both[0].message


def test_smp_v1_is_not_held_to_smp_v2s_instances():
    """SDK v2 passes mp_parameters for SMP v1 too, inside a PyTorch 1.x DLC; the image says which library runs."""
    v1 = request(AlgorithmSpecification={"TrainingImage": "763104351884.dkr.ecr.us-west-2.amazonaws.com/"
                                                         "pytorch-training:1.12.0-gpu-py38"},
                 HyperParameters={"mp_parameters": '{"partitions": 2}'},
                 ResourceConfig={"InstanceType": "ml.p3.16xlarge"})
    assert not [f for f in refusals(v1) if f.check == "smp-instances"]
    v2 = request(AlgorithmSpecification={"TrainingImage": "658645717510.dkr.ecr.us-west-2.amazonaws.com/"
                                                         "smdistributed-modelparallel:2.4.1-gpu-py311-cu121"},
                 ResourceConfig={"InstanceType": "ml.p3.16xlarge"})
    assert [f.check for f in refusals(v2) if f.check == "smp-instances"] == ["smp-instances"]


def test_a_serverless_job_names_no_instances():
    """ServerlessJobConfig (SDK v3's fine-tuning trainers): SageMaker chooses the compute, so ResourceConfig's
    instance type and count are not demanded."""
    serverless = {k: v for k, v in copy.deepcopy(GOOD).items() if k != "ResourceConfig"}
    serverless["ServerlessJobConfig"] = {"BaseModelArn": "arn:aws:sagemaker:us-west-2:aws:hub-content/"
                                         "SageMakerPublicHub/Model/meta-textgeneration-llama-3-2-1b/1.0.0",
                                         "JobType": "FineTuning"}
    assert [p for p in api_problems(serverless) if p.field.startswith("ResourceConfig")] == []
    assert [p.field for p in api_problems({**serverless, "ServerlessJobConfig": None})][:1] == [
        "ResourceConfig.InstanceType"]


def test_a_training_plan_is_warned_as_checkable_only_on_aws():
    arn = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/course-plan"
    r = request(ResourceConfig={"TrainingPlanArn": arn})
    assert not api_problems(r)
    assert levels(r, "training-plan") == ["warn"]
    both = request(ResourceConfig={"TrainingPlanArn": arn, "InstanceType": None, "InstancePreferences": [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "TrainingPlanArns": [arn]}]})
    refused(both, "instance-preferences", "InstancePreference")


def test_any_checkpoint_path_is_synced_but_the_course_script_must_write_there():
    elsewhere = {"S3Uri": "s3://fmlab-course/ck", "LocalPath": "/tmp/ck"}
    theirs = request(CheckpointConfig=elsewhere)
    del theirs["Environment"]  # another script than the course's: SageMaker syncs /tmp/ck, and that script writes there
    assert levels(theirs, "checkpoint-path") == ["pass"] and validate_request(theirs)
    ours = request(CheckpointConfig=elsewhere)
    assert "never reach S3" in refused(ours, "checkpoint-path", "CheckpointConfig.LocalPath")
    told = request(CheckpointConfig=elsewhere, HyperParameters={"checkpoint_dir": "/tmp/ck"})
    assert levels(told, "checkpoint-path") == ["pass"]


def test_a_heterogeneous_cluster_runs_one_image_on_every_group():
    ok = request(ResourceConfig=HETERO)
    assert not refusals(ok) and not api_problems(ok)
    both = request(ResourceConfig={**HETERO, "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1})
    assert "cannot be given with InstanceGroups" in refused(both, "instance-groups", "heterogeneous")
    channels = [{"ChannelName": name, "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": f"s3://fmlab-course/{name}", **extra}}}
        for name, extra in (("train", {"InstanceGroupNames": ["train"]}), ("eval", {}))]
    partial = request(ResourceConfig=HETERO, InputDataConfig=channels)
    assert "on every channel, or on none" in refused(partial, "instance-groups", "InstanceGroupNames")
    channels[1]["DataSource"]["S3DataSource"]["InstanceGroupNames"] = ["nope"]
    assert "nope" in refused(request(ResourceConfig=HETERO, InputDataConfig=channels), "instance-groups", "hetero")
    cpu_only = request(ResourceConfig={"InstanceType": None, "InstanceCount": None, "InstanceGroups": [
        {"InstanceGroupName": "data", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 2}]})
    refused(cpu_only, "image-instance", "fmlab.service.images")  # no group can run the GPU image


def test_no_kms_key_on_local_storage():
    message = refused(request(ResourceConfig={"VolumeKmsKeyId": "1234abcd-12ab-34cd-56ef-1234567890ab"}),
                      "local-storage-kms", "can't request a VolumeKmsKeyId")
    assert "ml.p4d.24xlarge" in message
    ebs = request(ResourceConfig={"VolumeKmsKeyId": "1234abcd-12ab-34cd-56ef-1234567890ab",
                                  "InstanceType": "ml.p3.16xlarge"})
    assert not [f for f in refusals(ebs) if f.check == "local-storage-kms"]


def test_smp_v2_runs_on_p4d_p4de_and_p5_only():
    smp = {"TrainingImage": IMAGE_SMP}
    assert "ml.g5.48xlarge" in refused(request(AlgorithmSpecification=smp, ResourceConfig={
        "InstanceType": "ml.g5.48xlarge"}), "smp-instances", "SMP v2")
    assert not [f for f in refusals(request(AlgorithmSpecification=smp, ResourceConfig={
        "InstanceType": "ml.p5.48xlarge"})) if f.check == "smp-instances"]


def test_a_gpu_only_builtin_algorithm_on_a_cpu_instance_is_refused():
    image = "811284229777.dkr.ecr.us-east-1.amazonaws.com/image-classification:1"
    r = request(AlgorithmSpecification={"TrainingImage": image}, ResourceConfig={"InstanceType": "ml.m5.xlarge"})
    assert "GPU instances only" in refused(r, "builtin-algorithm", "Image Classification")
    gpu = request(AlgorithmSpecification={"TrainingImage": image}, ResourceConfig={"InstanceType": "ml.p3.2xlarge"})
    assert not [f for f in refusals(gpu) if f.check == "builtin-algorithm"]


def test_a_builtin_algorithm_that_does_not_checkpoint_waits_at_most_an_hour_on_spot():
    """Developer guide, 'Checkpoints in Amazon SageMaker AI': a pre-built algorithm that does not checkpoint may wait
    at most an hour on managed spot; those that checkpoint include XGBoost 0.90-1+ (issue 64's held-out DeepAR)."""
    deepar = "522234722520.dkr.ecr.us-east-1.amazonaws.com/forecasting-deepar:1"
    spot = {"EnableManagedSpotTraining": True,
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}}
    cpu = {"InstanceType": "ml.c5.2xlarge"}
    message = refused(request(AlgorithmSpecification={"TrainingImage": deepar}, ResourceConfig=cpu, **spot),
                      "spot-wait-builtin", "model-checkpoints")
    assert "forecasting-deepar" in message and "3,600" in message
    within = {**spot, "StoppingCondition": {"MaxRuntimeInSeconds": 1800, "MaxWaitTimeInSeconds": 3600}}
    assert not [f for f in refusals(request(AlgorithmSpecification={"TrainingImage": deepar}, ResourceConfig=cpu,
                                            **within)) if f.check == "spot-wait-builtin"]
    xgboost = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1"
    assert not [f for f in refusals(request(AlgorithmSpecification={"TrainingImage": xgboost}, ResourceConfig=cpu,
                                            **spot)) if f.check == "spot-wait-builtin"]
    assert not [f for f in refusals(request(**spot)) if f.check == "spot-wait-builtin"]  # the course's own script


@pytest.mark.parametrize("interval, refused_", [(300, True), (100, False), (60_000, False), (2_000, True)])
def test_the_profiling_interval_is_one_of_the_six_the_api_reference_lists(interval, refused_):
    r = request(ProfilerConfig={"S3OutputPath": "s3://fmlab-course/profile",
                                "ProfilingIntervalInMilliseconds": interval})
    if refused_:
        assert "60,000" in refused(r, "profiling-interval", "ProfilingIntervalInMilliseconds")
    else:
        assert not [f for f in refusals(r) if f.check == "profiling-interval"]


def test_max_wait_without_spot_is_accepted_with_a_retry_strategy():
    r = request(StoppingCondition={"MaxWaitTimeInSeconds": 7200}, RetryStrategy={"MaximumRetryAttempts": 2})
    assert not api_problems(r)
    assert api_problems(request(StoppingCondition={"MaxWaitTimeInSeconds": 7200}))


def test_fsdp_on_the_pytorch_2_3_image_is_refused_naming_the_feature_version_and_an_image():
    r = request(AlgorithmSpecification={"TrainingImage": IMAGE_23}, HyperParameters={"sharding": '"full"'})
    message = refused(r, "image/fsdp2", "PR #141868")
    assert "PyTorch >= 2.6" in message and "PyTorch 2.3.0" in message and "pytorch:2.13-cu133" in message
    assert not refusals(request(HyperParameters={"sharding": "full"}))  # the 2.13 DLC has it


def test_tensor_parallelism_needs_2_5_and_smddp_smp_nxd_need_their_library():
    tp = request(AlgorithmSpecification={"TrainingImage": IMAGE_23}, HyperParameters={"tp": "2"})
    assert "PyTorch >= 2.5" in refused(tp, "image/dtensor-tp", "PR #133881")
    smddp = request(HyperParameters={"backend": "smddp"})
    assert "pytorch-training:2.5.1" in refused(smddp, "image/smddp", "SMDDP")
    smp = request(HyperParameters={"mp_parameters": '{"hybrid_shard_degree": 8}'})
    assert "smdistributed-modelparallel" in refused(smp, "image/smp", "SMP v2 release notes")
    nxd = request(AlgorithmSpecification={"TrainingImage": IMAGE_TORCHNEURON},
                  ResourceConfig={"InstanceType": "ml.trn2.48xlarge"}, HyperParameters={"tensor_parallel_size": "8"})
    assert "pytorch-training-neuronx:2.9.0" in refused(nxd, "image/nxd", "neuronx")
    on_smp = request(AlgorithmSpecification={"TrainingImage": IMAGE_SMP},
                     HyperParameters={"mp_parameters": '{"hybrid_shard_degree": 8}', "backend": "smddp"})
    assert not refusals(on_smp)


def test_the_course_scripts_flags_mean_nothing_to_another_script():
    other = request(AlgorithmSpecification={"TrainingImage": IMAGE_23}, HyperParameters={"sharding": "full", "tp": "2"})
    del other["Environment"]  # someone else's script on the 2.3 image: its `sharding` is its own business
    assert features_of(other) == [] and not refusals(other)
    assert [f.id for f in features_of({**other, "HyperParameters": {"mp_parameters": "{}"}})] == ["smp"]


def test_features_follow_the_hyperparameters_only():
    assert [f.id for f in features_of({**OURS, "HyperParameters": {"sharding": '"hybrid"', "tp": '"4"'}})] == \
        ["fsdp2", "dtensor-tp"]
    assert [f.id for f in features_of({**OURS, "HyperParameters": {"mp_parameters": '{"tensor_parallel_degree": 2}',
                                                           "tp": "4"}})] == ["smp"]
    assert features_of({**OURS, "HyperParameters": {"sharding": "none", "tp": "1"}}) == []


def test_every_manifest_has_a_source_a_date_and_finds_itself():
    for m in MANIFESTS:
        assert m.source and m.read and m.pytorch and m.python, m.name
        assert manifest_for(f"123456789012.dkr.ecr.us-east-1.amazonaws.com/{m.repository}:{m.tag}") is m
    assert manifest_for("public.ecr.aws/unknown/image:1.0") is None
    assert image_having(features_of({**OURS, "HyperParameters": {"backend": "smddp"}})[0]).name == "pytorch-2.5-gpu"


def test_an_unknown_image_is_a_warning_not_a_refusal():
    r = request(AlgorithmSpecification={"TrainingImage": "111122223333.dkr.ecr.us-east-1.amazonaws.com/mine:1"})
    assert levels(r, "image") == ["warn"] and not refusals(r)


def test_the_sandbox_refuses_what_preflight_refuses(local_env):
    from fmlab.jobs.preflight import preflight

    for broken in (request(StoppingCondition={"MaxRuntimeInSeconds": 30 * 86400}),
                   request(AlgorithmSpecification={"TrainingImage": IMAGE_23}, HyperParameters={"sharding": "full"})):
        assert not preflight(broken, quotas=False).ok
        with pytest.raises(RequestInvalid):
            sandbox.submit(broken, start=False)
    assert not list((local_env / "sandbox").glob("jobs/*"))  # refused before a job folder exists


def test_verdicts_say_what_was_not_checked():
    unknown = request(AlgorithmSpecification={"TrainingImage": "111122223333.dkr.ecr.us-east-1.amazonaws.com/mine:1"})
    [image] = [f for f in service_findings(unknown) if f.check == "image"]
    assert image.message.startswith("not checked:") and "can start was not checked" in image.message
    market = request(AlgorithmSpecification={"AlgorithmName": "arn:aws:sagemaker:us-east-1:123456789012:algorithm/x",
                                             "TrainingInputMode": "File"})
    market["AlgorithmSpecification"].pop("TrainingImage")
    [image] = [f for f in service_findings(market) if f.check == "image"]
    assert "brings its own image" in image.message and "no TrainingImage" not in image.message


def test_debugger_and_profiler_rules_are_processing_jobs_the_quota_must_hold():
    """A quoted ResourceLimitExceeded: 11 rules asked for 11 processing-job instances against a quota of 4. The
    count depends on the account, so preflight warns with the count instead of refusing."""
    rule = {"RuleConfigurationName": "ProfilerReport", "RuleEvaluatorImage": "895741380848.dkr.ecr.us-west-2."
            "amazonaws.com/sagemaker-debugger-rules:latest"}
    r = request(ProfilerRuleConfigurations=[rule], DebugRuleConfigurations=[
        {**rule, "RuleConfigurationName": f"rule-{i}"} for i in range(10)])
    found = [f for f in service_findings(r) if f.check == "rule-processing-jobs"]
    assert [f.level for f in found] == ["warn"] and "11 processing-job instance" in found[0].message
    assert "issue #200" in found[0].source
    assert not [f for f in service_findings(request()) if f.check == "rule-processing-jobs"]
