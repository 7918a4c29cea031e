"""The exported model on a SageMaker real-time endpoint: the LMI container (DJL Serving, vLLM backend), SDK v3.

    spec = EndpointSpec("fmlab-tiny", model_data="s3://bucket/fmlab/export/", instance_type="ml.g5.xlarge")
    captured = endpoint_requests(spec)       # the three requests SageMaker would receive, validated
    captured["CreateModel"]["PrimaryContainer"]["Environment"]   # HF_MODEL_ID=/opt/ml/model, OPTION_ASYNC_MODE=true ...

Three API calls make an endpoint: CreateModel (the container image and where the weights are), CreateEndpointConfig
(the production variant: instance type and count, timeouts) and CreateEndpoint. `endpoint_requests` makes them
with SageMaker SDK v3's resource classes (`sagemaker.core.resources.Model.create`, `EndpointConfig.create`,
`Endpoint.create`), records each request with a botocore event hook that stops it before it is signed or sent,
and checks it against the SageMaker API model botocore ships (`fmlab.service.api_model.problems_in`), as module 3
does for CreateTrainingJob: a bad field is named before anything is sent. Nothing reaches AWS here; `deploy`
sends the same calls, validated by the same hook, and refuses without credentials.

The container (fmlab.jobs.images.lmi_image_uri) reads an uncompressed Hugging Face folder from S3
(ModelDataSource, S3Prefix, CompressionType None) into /opt/ml/model and is configured by environment variables.
vLLM runs in LMI's **async mode** (ASYNC_MODE below): "Starting with LMI v17, the default mode for running vLLM is
async mode ... Async mode will become the default, and only supported mode, in an upcoming release"; the older
rolling-batch mode (OPTION_ROLLING_BATCH=vllm) is the legacy one. The settings (deepjavalibrary/djl-serving @d21927c4,
2026-06-24, read 2026-11-24: serving/docs/lmi/user_guides/vllm_user_guide.md, release_notes.md "LMI V17
(DJL-Serving 0.35.0) ... async mode is the default configuration for the vLLM handler", and the code that applies
them, wlm/.../LmiConfigRecommender.java and engines/python/.../PyModel.java): HF_MODEL_ID (a model id or the local
folder), OPTION_ASYNC_MODE=true with OPTION_ROLLING_BATCH=disable (what LMI itself sets for vLLM when neither is
given) and OPTION_ENTRYPOINT=djl_python.lmi_vllm.vllm_async_service (the handler LMI picks in async mode), written
out so the request says which mode it asks for on any LMI >= v15; TENSOR_PARALLEL_DEGREE (GPUs per model copy, or
"max"); OPTION_MAX_ROLLING_BATCH_SIZE (concurrent sequences: LMI passes it to vLLM as max_num_seqs, in both modes);
and vLLM engine arguments passed through as OPTION_<NAME> (OPTION_MAX_MODEL_LEN: the context). fmlab.plan.serving
chooses the instance and tensor-parallel degree for a 30B model.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from unittest import mock

import boto3

from fmlab.jobs.images import lmi_image_uri
from fmlab.jobs.request import quiet_sdk
from fmlab.service.api_model import RequestInvalid, problems_in

OPERATIONS = ("CreateModel", "CreateEndpointConfig", "CreateEndpoint")
# LMI's vLLM async mode, spelled out (djl-serving docs and code above); the legacy mode was OPTION_ROLLING_BATCH=vllm.
ASYNC_MODE = {"OPTION_ASYNC_MODE": "true", "OPTION_ROLLING_BATCH": "disable",
              "OPTION_ENTRYPOINT": "djl_python.lmi_vllm.vllm_async_service"}
LEGACY_MODE = {"OPTION_ROLLING_BATCH": "vllm"}
LMI_SOURCE = ("deepjavalibrary/djl-serving serving/docs/lmi/user_guides/vllm_user_guide.md and release_notes.md "
              "(LMI V17, DJL-Serving 0.35.0, 2025-09-30: async mode is the default for vLLM), @d21927c4, read 2026-11-24")
LOCAL_ROLE = "arn:aws:iam::111122223333:role/fmlab-sagemaker-execution"


@dataclass
class EndpointSpec:
    """One real-time endpoint serving an exported model folder with the LMI container."""

    name: str
    model_data: str  # s3:// prefix of the exported Hugging Face folder (ends with /)
    instance_type: str = "ml.g5.xlarge"
    instance_count: int = 1
    tensor_parallel_degree: int | str = 1  # GPUs (or NeuronCores) one copy of the model spans; "max": all
    max_model_len: int = 128  # context, prompt + generated tokens
    max_batch: int = 16  # OPTION_MAX_ROLLING_BATCH_SIZE: sequences decoded together
    region: str = "us-east-1"
    role: str = LOCAL_ROLE
    image: str = ""  # default: the newest LMI image of the SDK's table (fmlab.jobs.images.lmi_image_uri)
    startup_timeout_s: int = 900  # ContainerStartupHealthCheckTimeoutInSeconds
    download_timeout_s: int = 1200  # ModelDataDownloadTimeoutInSeconds
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def image_uri(self) -> str:
        return self.image or lmi_image_uri(self.region)

    def environment(self) -> dict[str, str]:
        """The LMI container's settings (strings, as SageMaker passes them)."""
        return {"HF_MODEL_ID": "/opt/ml/model", **ASYNC_MODE,
                "TENSOR_PARALLEL_DEGREE": str(self.tensor_parallel_degree),
                "OPTION_MAX_ROLLING_BATCH_SIZE": str(self.max_batch), "OPTION_MAX_MODEL_LEN": str(self.max_model_len),
                **self.extra_env}

    def check(self) -> None:
        if not self.model_data.startswith("s3://"):
            raise ValueError(f"model_data must be the s3:// prefix of the exported folder, not {self.model_data!r}: "
                             "upload the folder (aws s3 sync runs/export s3://bucket/prefix/) and pass that prefix")
        if self.max_model_len < 1 or self.max_batch < 1 or self.instance_count < 1:
            raise ValueError("max_model_len, max_batch and instance_count must each be at least 1")


class _NotSent(Exception):
    """Raised by the capture hook: the request was recorded and validated, and is not sent."""


def _sdk_calls(spec: EndpointSpec, session, dry_run: bool = False) -> None:
    """The SDK v3 code: three resources, created in order. `dry_run`: each call stops in the capture hook,
    after its request was recorded and validated, before anything is signed or sent."""
    from sagemaker.core.resources import Endpoint, EndpointConfig, Model
    from sagemaker.core.shapes import (
        ContainerDefinition,
        ModelDataSource,
        ProductionVariant,
        S3ModelDataSource,
    )

    prefix = spec.model_data if spec.model_data.endswith("/") else spec.model_data + "/"
    container = ContainerDefinition(image=spec.image_uri, environment=spec.environment(),
                                    model_data_source=ModelDataSource(s3_data_source=S3ModelDataSource(
                                        s3_uri=prefix, s3_data_type="S3Prefix", compression_type="None")))
    variant = ProductionVariant(variant_name="AllTraffic", model_name=spec.name, instance_type=spec.instance_type,
                                initial_instance_count=spec.instance_count,
                                container_startup_health_check_timeout_in_seconds=spec.startup_timeout_s,
                                model_data_download_timeout_in_seconds=spec.download_timeout_s)
    where = {"session": session, "region": spec.region}
    calls = [lambda: Model.create(model_name=spec.name, execution_role_arn=spec.role, primary_container=container,
                                  **where),
             lambda: EndpointConfig.create(endpoint_config_name=spec.name, production_variants=[variant], **where),
             lambda: Endpoint.create(endpoint_name=spec.name, endpoint_config_name=spec.name, **where)]
    for call in calls:
        try:
            call()
        except _NotSent:
            if not dry_run:
                raise


def _hooks(boto_session, captured: dict, validate: bool, send: bool) -> None:
    for op in OPERATIONS:
        def hook(params, _op=op, **_):
            captured[_op] = dict(params)
            if validate:
                problems = problems_in(params, _op)
                if problems:
                    raise RequestInvalid(problems, _op)
            if not send:
                raise _NotSent(_op)

        boto_session.events.register(f"provide-client-params.sagemaker.{op}", hook)


def endpoint_requests(spec: EndpointSpec, validate: bool = True) -> dict[str, dict]:
    """CreateModel, CreateEndpointConfig and CreateEndpoint as SDK v3 makes them, recorded by a botocore hook
    that stops each call before it is signed or sent (placeholder credentials, no AWS); RequestInvalid names
    every field SageMaker would reject (the first invalid request stops the rest)."""
    spec.check()
    captured: dict[str, dict] = {}
    placeholder = {"AWS_ACCESS_KEY_ID": "not-sent", "AWS_SECRET_ACCESS_KEY": "not-sent", "AWS_SESSION_TOKEN": "not-sent",
                   "AWS_DEFAULT_REGION": spec.region}
    with quiet_sdk(logging.ERROR), mock.patch.dict(os.environ, placeholder):
        session = boto3.Session(region_name=spec.region)
        _hooks(session, captured, validate, send=False)
        _sdk_calls(spec, session, dry_run=True)
    missing = [op for op in OPERATIONS if op not in captured]
    if missing:
        raise RuntimeError(f"the SDK made no {', '.join(missing)} call: it changed how it creates endpoints")
    return captured


def deploy(spec: EndpointSpec) -> dict[str, dict]:
    """Create the endpoint on SageMaker for real (the same validated calls); refuses without AWS credentials."""
    spec.check()
    boto_session = boto3.Session(region_name=spec.region)
    if boto_session.get_credentials() is None:
        raise PermissionError("no AWS credentials: nothing was sent. endpoint_requests(spec) shows and validates the "
                              "requests without AWS; configure credentials (aws configure sso) to deploy")
    captured: dict[str, dict] = {}
    _hooks(boto_session, captured, True, send=True)
    _sdk_calls(spec, boto_session)
    return captured


__all__ = ["ASYNC_MODE", "EndpointSpec", "LEGACY_MODE", "LMI_SOURCE", "LOCAL_ROLE", "OPERATIONS", "RequestInvalid", "deploy", "endpoint_requests"]
