"""The CreateTrainingJob request a JobSpec becomes, captured in-process (moto, never real AWS), and the
validation that names each field SageMaker would reject."""

import json

import pytest

from fmlab.jobs.images import ImageError, image_uri
from fmlab.jobs.request import capture_request
from fmlab.jobs.spec import JobSpec, JobSpecInvalid
from fmlab.service.api_model import (
    RequestInvalid,
    instance_types,
    problems_in,
    service_model,
    validate_request,
)

ROLE = "arn:aws:iam::111122223333:role/fmlab-course"


@pytest.fixture(scope="module")
def smp_request():
    """The request of a 2 x p4d SMP v2 job with a warm pool, channels and a checkpoint URI, as SageMaker gets it."""
    spec = JobSpec("gpt-smp", hyperparameters={"max_steps": 100, "lr": 3e-4}, instance_type="ml.p4d.24xlarge",
                   instance_count=2, distribution="smp", smp={"hybrid_shard_degree": 8, "tensor_parallel_degree": 2},
                   inputs={"train": "s3://course-bucket/fmlab/data/tiny"}, keep_alive_seconds=1800,
                   checkpoint_s3_uri="s3://course-bucket/fmlab/checkpoints/gpt-smp", role=ROLE, region="us-west-2",
                   bucket="course-bucket", max_run_seconds=7200)
    return capture_request(spec, backend="sagemaker")


def test_captured_request_is_valid_and_says_what_was_intended(smp_request):
    r = validate_request(smp_request.request)
    assert r["TrainingJobName"].startswith("fmlab-gpt-smp-") and len(r["TrainingJobName"]) <= 63
    assert r["RoleArn"] == ROLE
    assert r["ResourceConfig"] == {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30,
                                   "KeepAlivePeriodInSeconds": 1800}
    assert r["StoppingCondition"] == {"MaxRuntimeInSeconds": 7200}
    assert json.loads(r["HyperParameters"]["mp_parameters"]) == {"hybrid_shard_degree": 8, "tensor_parallel_degree": 2}
    assert r["HyperParameters"]["max_steps"] == "100" and float(r["HyperParameters"]["lr"]) == 3e-4
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in r["InputDataConfig"]}
    assert channels["train"] == "s3://course-bucket/fmlab/data/tiny"
    assert set(channels) == {"train", "code", "sm_drivers"}
    assert r["CheckpointConfig"] == {"S3Uri": "s3://course-bucket/fmlab/checkpoints/gpt-smp",
                                     "LocalPath": "/opt/ml/checkpoints"}
    assert r["OutputDataConfig"]["S3OutputPath"] == "s3://course-bucket/fmlab/output"
    assert r["AlgorithmSpecification"]["TrainingImage"] == (
        "658645717510.dkr.ecr.us-west-2.amazonaws.com/smdistributed-modelparallel:2.5.1-gpu-py311-cu124")
    assert {m["Name"] for m in r["AlgorithmSpecification"]["MetricDefinitions"]} >= {"train:loss", "train:mfu"}


def test_the_source_directory_ships_script_fmlab_and_requirements(smp_request):
    code = next(c for c in smp_request.request["InputDataConfig"] if c["ChannelName"] == "code")
    prefix = code["DataSource"]["S3DataSource"]["S3Uri"] + "/"
    shipped = {k[len(prefix):] for k in smp_request.uploads if k.startswith(prefix)}
    assert {"train.py", "requirements.txt", "fmlab/__init__.py", "fmlab/train/loop.py", "fmlab/parallel/__init__.py"} <= shipped
    assert not any("__pycache__" in k for k in shipped)
    drivers = next(c for c in smp_request.request["InputDataConfig"] if c["ChannelName"] == "sm_drivers")
    root = drivers["DataSource"]["S3DataSource"]["S3Uri"]
    train_sh = smp_request.uploads[f"{root}/sm_train.sh"].decode()
    assert "torchrun_driver.py" in train_sh and "requirements.txt" in train_sh
    assert json.loads(smp_request.uploads[f"{root}/distributed.json"])["smp"]["tensor_parallel_degree"] == 2


def test_mpi_distribution_uses_the_sdk_mpi_driver():
    spec = JobSpec("smddp", instance_type="ml.p4d.24xlarge", distribution="mpi", role=ROLE,
                   mpi_options=["-x", "NCCL_DEBUG=INFO"])
    captured = capture_request(spec, backend="sagemaker")
    drivers = next(c for c in captured.request["InputDataConfig"] if c["ChannelName"] == "sm_drivers")
    root = drivers["DataSource"]["S3DataSource"]["S3Uri"]
    assert "mpi_driver.py" in captured.uploads[f"{root}/sm_train.sh"].decode()
    assert json.loads(captured.uploads[f"{root}/distributed.json"])["mpi_additional_options"] == ["-x", "NCCL_DEBUG=INFO"]
    assert captured.request["AlgorithmSpecification"]["TrainingImage"].endswith(
        "pytorch:2.13-cu133-amzn2023-sagemaker")  # mpirun with NCCL runs in the current DLC
    smddp = capture_request(spec.with_(hyperparameters={"backend": "smddp"}), backend="sagemaker")
    assert smddp.request["AlgorithmSpecification"]["TrainingImage"].endswith(  # the last DLC that ships SMDDP
        "pytorch-training:2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker")


def test_mpi_on_two_instances_asks_mpirun_for_every_rank_placed_per_node():
    """SDK v3 passes process_count_per_node as mpirun's -np (a total in Open MPI): fmlab asks for all 16 ranks
    of 2 x p4d and places 8 per node, ahead of the learner's own options."""
    spec = JobSpec("smddp", instance_type="ml.p4d.24xlarge", instance_count=2, processes_per_host=8,
                   distribution="mpi", role=ROLE, mpi_options=["-x", "NCCL_DEBUG=INFO"])
    captured = capture_request(spec, backend="sagemaker")
    drivers = next(c for c in captured.request["InputDataConfig"] if c["ChannelName"] == "sm_drivers")
    config = json.loads(captured.uploads[f"{drivers['DataSource']['S3DataSource']['S3Uri']}/distributed.json"])
    assert config["process_count_per_node"] == 16
    assert config["mpi_additional_options"] == ["--map-by", "ppr:8:node", "-x", "NCCL_DEBUG=INFO"]


def test_bad_fields_in_a_request_are_each_named(smp_request):
    broken = json.loads(json.dumps(smp_request.request))
    broken["TrainingJobName"] = "x" * 64
    broken["ResourceConfig"]["InstanceType"] = "ml.p4d.24xlarg"
    broken["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 21601
    del broken["RoleArn"]
    with pytest.raises(RequestInvalid) as err:
        validate_request(broken)
    assert set(err.value.fields) == {"TrainingJobName", "ResourceConfig.InstanceType",
                                     "ResourceConfig.KeepAlivePeriodInSeconds", "RoleArn"}
    message = str(err.value)
    assert "at most 63" in message and "did you mean ml.p4d.24xlarge" in message and "0..21600" in message


@pytest.mark.parametrize("name", ["has_underscore", "has space", "-leading-hyphen", "dot.name"])
def test_job_name_with_a_bad_character_names_the_field(smp_request, name):
    bad = {**smp_request.request, "TrainingJobName": name}
    assert [p.field for p in problems_in(bad)] == ["TrainingJobName"]


def test_keep_alive_bounds_come_from_the_service_model(smp_request):
    member = service_model().operation_model("CreateTrainingJob").input_shape.members["ResourceConfig"]
    bounds = member.members["KeepAlivePeriodInSeconds"].metadata
    assert (bounds["min"], bounds["max"]) == (0, 21600)  # botocore's SageMaker model
    ok = json.loads(json.dumps(smp_request.request))
    # the model and the API reference allow 21,600 s; the developer guide's older 3,600 is a warning (the warm-pool rule)
    for value, valid in ((0, True), (3600, True), (3601, True), (21600, True), (-1, False), (21601, False)):
        ok["ResourceConfig"]["KeepAlivePeriodInSeconds"] = value
        assert (problems_in(ok) == []) is valid, value
    assert "ml.p4d.24xlarge" in instance_types() and "ml.p4d.24xlarge-typo" not in instance_types()


def test_spot_rules_the_model_cannot_state(smp_request):
    spot = {**smp_request.request, "EnableManagedSpotTraining": True}
    keeps_warm = bool(spot["ResourceConfig"].get("KeepAlivePeriodInSeconds"))  # and a warm pool cannot be spot
    assert [p.field for p in problems_in(spot)] == ["StoppingCondition.MaxWaitTimeInSeconds"] + (
        ["[warm-pool-with]"] if keeps_warm else [])
    spot["StoppingCondition"] = {"MaxRuntimeInSeconds": 7200, "MaxWaitTimeInSeconds": 3600}
    assert "at least MaxRuntimeInSeconds" in str(problems_in(spot)[0])


def test_jobspec_problems_name_their_field(tmp_path):
    long_name = JobSpec("a" * 60)
    assert "name" in JobSpecInvalid(long_name.problems()).fields
    assert any("at most 63" in str(p) for p in long_name.problems())
    bad_char = JobSpec("lr=3e-4")
    assert [p.field for p in bad_char.problems()] == ["name"]
    assert [p.field for p in JobSpec("demo").problems("sagemaker")] == ["role"]
    assert JobSpec("demo").problems("local") == []  # the sandbox needs no role
    tp = JobSpec("tp", instance_type="ml.p4d.24xlarge", distribution="smp", smp={"tensor_parallel_degree": 3})
    assert [p.field for p in tp.problems()] == ["smp.tensor_parallel_degree"]
    assert "tp=3 does not divide the 8 devices" in str(tp.problems()[0])
    shard = JobSpec("hsdp", instance_type="ml.p4d.24xlarge", instance_count=2, distribution="smp",
                    smp={"tensor_parallel_degree": 2, "hybrid_shard_degree": 3})
    assert {p.field for p in shard.problems()} == {"smp.hybrid_shard_degree"}
    assert JobSpec("ok", instance_type="ml.p4d.24xlarge", instance_count=2, distribution="smp",
                   smp={"tensor_parallel_degree": 2, "hybrid_shard_degree": 8}).problems() == []
    assert [p.field for p in JobSpec("x", smp={"tensor_parallel_degree": 2}).problems()] == ["smp"]
    assert [p.field for p in JobSpec("x", distribution="smp", smp={"pipeline": 2}).problems()] == ["smp"]
    spot = JobSpec("spot", spot=True)
    assert {p.field for p in spot.problems()} == {"max_wait_seconds", "checkpoint_s3_uri"}
    for seconds, valid in ((1_799, False), (1_800, True), (28 * 86400, True), (28 * 86400 + 1, False), (3600.5, False)):
        found = JobSpec("wait", max_pending_seconds=seconds).problems()
        assert (found == []) is valid and all(p.field == "max_pending_seconds" for p in found), (seconds, found)
    assert [p.field for p in JobSpec("x", entry_point=str(tmp_path / "nope.py")).problems()] == ["entry_point"]
    with pytest.raises(JobSpecInvalid, match="role"):
        capture_request(JobSpec("demo"), backend="sagemaker")


def test_unknown_instance_type_is_refused_by_the_request_validation():
    with pytest.raises(RequestInvalid) as err:
        from fmlab.sandbox import submit

        submit(capture_request(JobSpec("typo", instance_type="ml.g5.xlarg")).request)
    assert err.value.fields == ["ResourceConfig.InstanceType"]


def test_image_uris_match_the_sdk_and_their_sources():
    from sagemaker.core import image_uris

    for region in ("us-east-1", "eu-west-1", "ap-northeast-1"):
        for processor, instance in (("gpu", "ml.p4d.24xlarge"), ("cpu", "ml.m5.xlarge")):
            ours = image_uri("pytorch", region, processor=processor)
            sdk = image_uris.retrieve("pytorch-amzn2023", region=region, version="2.13", instance_type=instance,
                                      image_scope="training")
            assert ours == sdk, (ours, sdk)
            old = image_uris.retrieve("pytorch", region=region, version="2.3.0", py_version="py311",
                                      instance_type=instance, image_scope="training")
            assert image_uri("pytorch", region, "2.3.0", processor).startswith(old)  # the SDK gives the short tag
        sdk_smp = image_uris.retrieve("pytorch-smp", region=region, version="2.5.1", py_version="py311",
                                      instance_type="ml.p4d.24xlarge", image_scope="training")
        assert image_uri("smp", region).startswith(sdk_smp)
    # The full tags as AWS publishes them (DLC changelog for 2.13; available_images.md; SMP release notes).
    assert image_uri("pytorch", "us-east-1") == ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:"
                                                 "2.13-cu133-amzn2023-sagemaker")
    assert image_uri("pytorch", "us-east-1", processor="cpu").endswith("/pytorch:2.13-cpu-amzn2023-sagemaker")
    assert image_uri("pytorch", "us-east-1", "2.3.0").endswith(":2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker")
    assert image_uri("smddp", "us-east-1").endswith(":2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker")
    assert image_uri("neuron", "us-west-2") == ("763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training-"
                                                "neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04")
    from fmlab.jobs.request import training_image

    assert training_image(JobSpec("trn", instance_type="ml.trn1.32xlarge", region="us-west-2")) == image_uri(
        "neuron", "us-west-2")
    assert training_image(JobSpec("cpu", instance_type="ml.m5.xlarge")).endswith(":2.13-cpu-amzn2023-sagemaker")
    assert JobSpec("trn", instance_type="ml.trn1.32xlarge", distribution="torchrun").processes() == 32
    with pytest.raises(ImageError, match="not published"):
        image_uri("neuron", "us-west-1")
    with pytest.raises(ImageError, match="no CPU variant"):
        image_uri("smp", "us-east-1", processor="cpu")


def test_smp_images_come_from_the_sdks_table_with_each_releases_python_and_cuda():
    """SMP v2 release notes: PyTorch 2.5.1 -> SMP v2.8.0, py311, CUDA 12.4; PyTorch 2.2.0 -> py310, CUDA 12.1."""
    from fmlab.jobs.images import smp_releases

    releases = smp_releases()
    assert list(releases)[-1] == "2.5.1" and releases["2.5.1"]["smp"] == "2.8.0"
    assert image_uri("smp", "us-west-2").endswith("smdistributed-modelparallel:2.5.1-gpu-py311-cu124")
    assert image_uri("smp", "us-west-2", "2.2.0").endswith(":2.2.0-gpu-py310-cu121")
    with pytest.raises(ImageError, match="no SMP v2 image for PyTorch 1.13.1"):
        image_uri("smp", "us-west-2", "1.13.1")
    with pytest.raises(ImageError, match="not published"):
        image_uri("smp", "me-south-1")


def test_a_retry_strategy_reaches_the_request_and_needs_a_checkpoint_uri():
    spec = JobSpec("retry", max_retry_attempts=3, checkpoint_s3_uri="s3://fmlab-local/fmlab/checkpoints/retry")
    r = capture_request(spec).request
    assert validate_request(r)["RetryStrategy"] == {"MaximumRetryAttempts": 3}
    assert "RetryStrategy" not in capture_request(JobSpec("plain")).request
    assert [p.field for p in JobSpec("retry", max_retry_attempts=3).problems()] == ["checkpoint_s3_uri"]
    assert [p.field for p in spec.with_(max_retry_attempts=31).problems()] == ["max_retry_attempts"]
