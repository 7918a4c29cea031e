"""JobSpec -> SageMaker SDK v3 ModelTrainer -> the exact CreateTrainingJob request, without touching AWS.

`build_trainer(spec, session)` is the one place the course writes SageMaker SDK v3 code: `Compute`,
`SourceCode`, `Torchrun(smp=SMP(...))` or `MPI(...)`, `CheckpointConfig`, `InputData`, `OutputDataConfig`,
`StoppingCondition`. `capture_request(spec)` runs `ModelTrainer.train(wait=False)` against an in-process
fake AWS (moto) and records the parameters of the CreateTrainingJob call with a botocore event hook: the
request SageMaker would receive, and the objects the SDK uploaded (the source directory and its own driver
scripts). The local backend hands both to the sandbox; the SageMaker backend shows and validates the request
before the real launch.

    captured = capture_request(JobSpec("demo", hyperparameters={"max_steps": 20}))
    captured.request["ResourceConfig"]   # {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, ...}

The source directory ships the entry script, the `fmlab` package next to it (the script imports it) and a
requirements.txt the SageMaker PyTorch / SMP containers install before running the script.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from fmlab.jobs.images import image_uri, processor_for
from fmlab.jobs.spec import LOCAL_ROLE, JobSpec
from fmlab.service.api_model import RequestInvalid

LOCAL_BUCKET_NAME = "fmlab-local"  # the bucket name local jobs stage under (a folder in the local bucket)
CREATE_EVENT = "provide-client-params.sagemaker.CreateTrainingJob"
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
_PACKAGE = Path(__file__).resolve().parents[1]  # src/fmlab, shipped with the job
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".ipynb_checkpoints")


@dataclass
class CapturedRequest:
    """What `ModelTrainer.train(wait=False)` sent: the CreateTrainingJob parameters and the uploaded objects."""

    request: dict
    uploads: dict[str, bytes] = field(default_factory=dict)  # "s3://bucket/key" -> content

    @property
    def job_name(self) -> str:
        return self.request["TrainingJobName"]


def stage_source(spec: JobSpec, folder: str | Path) -> Path:
    """Fill `folder` with the job's source directory: entry script, the fmlab package, requirements.txt."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(spec.entry_path, folder / spec.entry_path.name)
    if spec.ship_fmlab:
        shutil.copytree(_PACKAGE, folder / "fmlab", ignore=_IGNORE, dirs_exist_ok=True)
    if spec.requirements:
        (folder / "requirements.txt").write_text(
            "# installed by the SageMaker container before the entry script runs (fmlab.jobs.request)\n"
            + "\n".join(spec.requirements) + "\n")
    return folder


def training_image(spec: JobSpec) -> str:
    """The container image URI for the spec: a full URI as given, else built from the catalog of images."""
    if spec.image and "/" in spec.image:
        return spec.image
    processor = processor_for(spec.instance_type) if spec.image_kind == "pytorch" else "gpu"  # SMDDP/SMP/Neuron: one
    return image_uri(spec.image_kind, spec.aws_region, spec.image_version, processor)


def build_trainer(spec: JobSpec, session, source_dir: str | Path, bucket: str, role: str | None = None):
    """The SDK v3 ModelTrainer for `spec`; `session` is a sagemaker Session, `source_dir` a staged folder."""
    from sagemaker.core.shapes import MetricDefinition
    from sagemaker.core.training.configs import (
        CheckpointConfig,
        Compute,
        OutputDataConfig,
        SourceCode,
        StoppingCondition,
    )
    from sagemaker.train import ModelTrainer
    from sagemaker.train.distributed import MPI, SMP, Torchrun

    from fmlab.plan import catalog
    from fmlab.service.mpi_launch import mpi_launch
    from fmlab.train.log import METRIC_DEFINITIONS, VALIDATION_METRIC_DEFINITIONS

    distributed = None
    if spec.distribution == "torchrun":
        distributed = Torchrun(process_count_per_node=spec.processes_per_host)
    elif spec.distribution == "smp":
        distributed = Torchrun(process_count_per_node=spec.processes_per_host, smp=SMP(**spec.smp))
    elif spec.distribution == "mpi":
        # SDK v3 passes process_count_per_node as mpirun's -np, a total: ask for every rank of the job and
        # place them per instance (fmlab.service.mpi_launch.mpi_launch explains).
        known = catalog.INSTANCES.get(spec.instance_type)
        launch = mpi_launch(spec.processes_per_host or (known.processes if known else 1), spec.instance_count)
        distributed = MPI(process_count_per_node=launch["process_count_per_node"],
                          mpi_additional_options=launch["mpi_additional_options"] + list(spec.mpi_options) or None)
    compute = Compute(instance_type=spec.instance_type, instance_count=spec.instance_count,
                      volume_size_in_gb=spec.volume_gb, keep_alive_period_in_seconds=spec.keep_alive_seconds or None,
                      enable_managed_spot_training=spec.spot or None, training_plan_arn=spec.training_plan_arn)
    stopping = StoppingCondition(max_runtime_in_seconds=spec.max_run_seconds,
                                 max_wait_time_in_seconds=spec.max_wait_seconds if spec.spot else None,
                                 max_pending_time_in_seconds=spec.max_pending_seconds)
    output = spec.output_path or f"s3://{bucket}/fmlab/output"
    trainer = ModelTrainer(
        sagemaker_session=session,
        role=role or spec.role,
        base_job_name=spec.base_job_name,
        training_image=training_image(spec),
        source_code=SourceCode(source_dir=str(source_dir), entry_script=spec.entry_path.name,
                               requirements="requirements.txt" if spec.requirements else None),
        distributed=distributed,
        compute=compute,
        stopping_condition=stopping,
        hyperparameters=dict(spec.hyperparameters),
        environment=course_environment(spec),
        output_data_config=OutputDataConfig(s3_output_path=output),
        checkpoint_config=(CheckpointConfig(s3_uri=spec.checkpoint_s3_uri, local_path=CHECKPOINT_LOCAL_PATH)
                           if spec.checkpoint_s3_uri else None),
        training_input_mode=spec.input_mode,
        input_data_config=[_channel(name, str(source), spec.input_mode) for name, source in spec.inputs.items()]
        or None,
    )
    trainer = trainer.with_metric_definitions([MetricDefinition(name=m["Name"], regex=m["Regex"])
                                               for m in METRIC_DEFINITIONS + VALIDATION_METRIC_DEFINITIONS])
    if spec.max_retry_attempts:
        from sagemaker.core.shapes import RetryStrategy

        trainer = trainer.with_retry_strategy(RetryStrategy(maximum_retry_attempts=spec.max_retry_attempts))
    return trainer


def course_environment(spec: JobSpec) -> dict[str, str]:
    """The job's Environment, plus FMLAB_SCRIPT naming the course's training script when that is what runs: the
    service rules about that script (fmlab.service.rules.runs_course_script) apply to this request then."""
    from fmlab.environment import ROOT
    from fmlab.jobs.spec import DEFAULT_ENTRY_POINT
    from fmlab.service.rules import COURSE_SCRIPT_ENV

    env = dict(spec.environment)
    if spec.entry_path.resolve() == (ROOT / DEFAULT_ENTRY_POINT).resolve():
        env[COURSE_SCRIPT_ENV] = DEFAULT_ENTRY_POINT
    return env


def _channel(name: str, source: str, input_mode: str):
    """One input channel. The SDK writes InputMode "File" on every channel it builds from a URI, and a channel's
    mode overrides the job's, so S3 channels are built here with the job's mode (FastFile streams from S3)."""
    from sagemaker.core.shapes import Channel, DataSource, S3DataSource
    from sagemaker.core.training.configs import InputData

    if not source.startswith("s3://"):
        return InputData(channel_name=name, data_source=source)  # a local folder: uploaded, then File
    return Channel(channel_name=name, input_mode=input_mode, data_source=DataSource(s3_data_source=S3DataSource(
        s3_data_type="S3Prefix", s3_uri=source, s3_data_distribution_type="FullyReplicated")))


@contextlib.contextmanager
def quiet_sdk(level: int | None = None):
    """The SDK logs every upload at INFO; keep a notebook's output to what the course prints (WARNING and up,
    or `level`)."""
    import logging

    loggers = [logging.getLogger(n) for n in ("sagemaker", "sagemaker.train", "sagemaker.core", "botocore")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING if level is None else level)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def capture_request(spec: JobSpec, backend: str = "local") -> CapturedRequest:
    """Build the spec's ModelTrainer and run train(wait=False) against moto; return what it would send.

    Nothing reaches AWS: moto answers S3 and SageMaker in-process with fake credentials, and role
    validation is off. The spec is validated first (JobSpecInvalid names the field at fault)."""
    from moto import mock_aws

    spec.validate(backend)
    bucket = spec.bucket or LOCAL_BUCKET_NAME
    role = spec.role or (LOCAL_ROLE if backend == "local" else None)
    captured: dict = {}
    uploads: dict[str, bytes] = {}
    buckets: set[str] = set()  # the buckets created below: an upload elsewhere fails as it would on S3
    with tempfile.TemporaryDirectory(prefix="fmlab-source-") as tmp, quiet_sdk(), \
            mock.patch.dict(os.environ, {"SAGEMAKER_VALIDATE_ROLE": "false"}), mock_aws(), \
            mock.patch("boto3.s3.inject.upload_file", _recording_upload(uploads, buckets)):
        from sagemaker.core.helper.session_helper import Session

        boto_session = _boto3_session(spec.aws_region)
        s3 = boto_session.client("s3")
        _create_bucket(s3, bucket, spec.aws_region)
        for uri in [spec.output_path, spec.checkpoint_s3_uri, *spec.inputs.values()]:
            if uri and str(uri).startswith("s3://"):
                _create_bucket(s3, str(uri)[5:].split("/")[0], spec.aws_region)
        buckets.update(_buckets(s3))
        boto_session.events.register(CREATE_EVENT, lambda params, **_: captured.update(params))
        session = Session(boto_session=boto_session, default_bucket=bucket)
        trainer = build_trainer(spec, session, stage_source(spec, Path(tmp) / "source"), bucket, role)
        trainer.train(wait=False, logs=False)
        for name in _buckets(s3):  # what the SDK wrote by other calls than upload_file
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
                for obj in page.get("Contents", []):
                    if "/__pycache__/" not in obj["Key"]:
                        uploads[f"s3://{name}/{obj['Key']}"] = s3.get_object(Bucket=name, Key=obj["Key"])["Body"].read()
    if not captured:
        raise RuntimeError("ModelTrainer.train() made no CreateTrainingJob call: the SDK changed how it launches jobs")
    return CapturedRequest(captured, uploads)


def _boto3_session(region: str):
    """A fresh boto3 session whose service models are read through one loader per process: parsing the
    SageMaker and S3 models again for every captured request cost about 0.3 s each time."""
    import boto3
    import botocore.session

    core = botocore.session.get_session()
    loader = _shared_loader()
    core.register_component("data_loader", loader)
    session = boto3.Session(botocore_session=core, region_name=region)
    loader.search_paths[:] = list(dict.fromkeys(loader.search_paths))  # boto3 appends its data path each time
    return session


@functools.cache
def _shared_loader():
    import botocore.loaders

    return botocore.loaders.create_loader()


def _recording_upload(uploads: dict[str, bytes], buckets: set[str]):
    """S3 upload_file, recorded: the SDK uploads the source directory file by file (about 190 files per job), and
    sending each through moto and reading it back cost about 0.6 s a capture (two botocore calls a file). The key
    and bytes are what the SDK asked to upload; a bucket that was not created fails as on S3."""
    def upload_file(self, Filename, Bucket, Key, ExtraArgs=None, Callback=None, Config=None):  # noqa: N803 (boto3's)
        if Bucket not in buckets:
            self.put_object(Bucket=Bucket, Key=Key, Body=b"")  # raises NoSuchBucket as S3 would
        if "/__pycache__/" not in Key:
            with open(Filename, "rb") as f:
                uploads[f"s3://{Bucket}/{Key}"] = f.read()
        if Callback:
            Callback(os.path.getsize(Filename))

    return upload_file


def _create_bucket(s3, name: str, region: str) -> None:
    kwargs = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
        s3.create_bucket(Bucket=name, **kwargs)


def _buckets(s3) -> list[str]:
    return [b["Name"] for b in s3.list_buckets().get("Buckets", [])]


def validation_hook(store: dict):
    """A botocore handler for CREATE_EVENT that runs preflight's account-free checks (fmlab.jobs.preflight: the
    API model, the service rules, the image against the script) on the very request the SDK is about to send, and
    prints its verdict; raising PreflightFailed stops the call. Keeps a copy of the request in `store`. (The SDK
    builds the request inside ModelTrainer.train: this hook is the one place it can be checked as sent.)"""
    from fmlab.jobs.preflight import refuse_unless_ok

    def hook(params, **_):
        store.update(params)
        report = refuse_unless_ok(params)
        print(f"preflight {report.job}: {report.verdict}")

    return hook


__all__ = ["CapturedRequest", "RequestInvalid", "build_trainer", "capture_request", "stage_source",
           "training_image", "validation_hook"]
