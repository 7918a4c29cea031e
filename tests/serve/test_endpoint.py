"""The SageMaker endpoint requests: made by SDK v3, validated against botocore's model, never sent."""

import pytest

from fmlab.serve import endpoint


def test_the_three_requests_validate_and_carry_the_lmi_settings():
    spec = endpoint.EndpointSpec("fmlab-tiny", "s3://bucket/fmlab/export", instance_type="ml.g5.12xlarge",
                                 tensor_parallel_degree=4, max_model_len=2048, max_batch=32)
    got = endpoint.endpoint_requests(spec)
    assert list(got) == ["CreateModel", "CreateEndpointConfig", "CreateEndpoint"]
    container = got["CreateModel"]["PrimaryContainer"]
    assert "/djl-inference:" in container["Image"] and "-lmi" in container["Image"]
    assert container["Environment"] == {"HF_MODEL_ID": "/opt/ml/model", "OPTION_ASYNC_MODE": "true",
                                        "OPTION_ROLLING_BATCH": "disable",
                                        "OPTION_ENTRYPOINT": "djl_python.lmi_vllm.vllm_async_service",
                                        "TENSOR_PARALLEL_DEGREE": "4", "OPTION_MAX_ROLLING_BATCH_SIZE": "32",
                                        "OPTION_MAX_MODEL_LEN": "2048"}
    assert container["ModelDataSource"]["S3DataSource"] == {"S3Uri": "s3://bucket/fmlab/export/",
                                                            "S3DataType": "S3Prefix", "CompressionType": "None"}
    variant = got["CreateEndpointConfig"]["ProductionVariants"][0]
    assert variant["InstanceType"] == "ml.g5.12xlarge" and variant["ModelName"] == "fmlab-tiny"
    assert got["CreateEndpoint"] == {"EndpointName": "fmlab-tiny", "EndpointConfigName": "fmlab-tiny"}


def test_vllm_runs_in_lmi_async_mode_not_the_legacy_rolling_batch():
    env = endpoint.EndpointSpec("fmlab-tiny", "s3://bucket/x/").environment()
    assert env["OPTION_ASYNC_MODE"] == "true" and env["OPTION_ROLLING_BATCH"] != "vllm"
    assert env["OPTION_ENTRYPOINT"] == "djl_python.lmi_vllm.vllm_async_service"
    assert "LMI V17" in endpoint.LMI_SOURCE
    # the default image is an LMI release in which async mode is already the default (v17 and later)
    from fmlab.jobs.images import lmi_image_uri

    assert int(lmi_image_uri().split("-lmi")[1].split(".")[0]) >= 17


def test_a_bad_name_is_named():
    with pytest.raises(endpoint.RequestInvalid) as e:
        endpoint.endpoint_requests(endpoint.EndpointSpec("fmlab_tiny", "s3://bucket/x/"))
    assert e.value.fields == ["ModelName"]


def test_a_bad_instance_type_is_named():
    with pytest.raises(endpoint.RequestInvalid, match="CreateEndpointConfig") as e:
        endpoint.endpoint_requests(endpoint.EndpointSpec("fmlab-tiny", "s3://bucket/x/", instance_type="ml.g5.huge"))
    assert e.value.fields == ["ProductionVariants[0].InstanceType"] and "ml.g5" in str(e.value)


def test_model_data_must_be_an_s3_prefix():
    with pytest.raises(ValueError, match="s3:// prefix"):
        endpoint.endpoint_requests(endpoint.EndpointSpec("fmlab-tiny", "runs/export"))


def test_nothing_is_sent_without_credentials(tmp_path, monkeypatch):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(PermissionError, match="nothing was sent"):
        endpoint.deploy(endpoint.EndpointSpec("fmlab-tiny", "s3://bucket/x/"))


def test_the_lmi_images_come_from_the_sdk_table():
    from fmlab.jobs.images import ImageError, lmi_image_uri, lmi_versions

    assert lmi_image_uri("us-east-1", "0.33.0") == \
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"
    assert "neuronx-sdk" in lmi_image_uri("us-west-2", accelerator="neuron")
    assert lmi_versions()[-1] in lmi_image_uri()
    with pytest.raises(ImageError, match="no djl-lmi image 9.9.9"):
        lmi_image_uri(version="9.9.9")
