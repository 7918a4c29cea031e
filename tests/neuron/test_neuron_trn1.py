"""The trn1 job: settings consistent, sourced and checked; the ModelTrainer request it becomes is valid.

Run: .venv/bin/pytest tests/neuron/test_neuron_trn1.py -q

Figures from the Llama 2 70B continued-pretraining notebook of aws-samples/sagemaker-trainium-examples
(commit 36bfadd2ce6b369669c3f83543aa7454a5e3f273): TP 8, PP 8, 4,096-token sequences, global batch 512,
32 NeuronCores per ml.trn1.32xlarge. The sample's image was pytorch-training-neuronx:1.13.1 (SDK 2.15.0); the
course pins the LAST training container with NxD Training, 2.9.0 / Neuron 2.30.0 (aws-neuron/deep-learning-containers
README @ 2be9ed1d, read 2026-11-23; fmlab.jobs.images, the one place versions live; fmlab.neuron.status says why).
The request is captured under moto and validated; nothing runs (the job needs Trainium).
"""

import dataclasses
import json
import re

import pytest

from fmlab.jobs.request import capture_request
from fmlab.jobs.spec import JobSpecInvalid
from fmlab.neuron.job import LLAMA2_70B_TRN1, NeuronLayoutError, trn1_job_spec
from fmlab.neuron.sharding import LlamaShape, pipeline_stages
from fmlab.plan import catalog
from fmlab.service.api_model import problems_in


def test_llama2_70b_example_is_consistent():
    job = LLAMA2_70B_TRN1
    job.check()
    preset = catalog.model(job.model)
    assert (job.tensor_parallel, job.pipeline_parallel, job.seq_len, job.global_batch) == (8, 8, 4096, 512)
    assert job.instance_type == "ml.trn1.32xlarge" and job.instance_count == 8 and job.input_mode == "FastFile"
    assert job.neuron_cores == 8 * 32  # 16 Trainium chips x 2 NeuronCores per instance
    assert job.neuron_cores % (job.tensor_parallel * job.pipeline_parallel) == 0
    assert job.data_parallel == 4 and job.batch_per_replica == 128  # DP = 256 / 64; BS = GBS / DP
    assert preset.heads % job.tensor_parallel == 0 and preset.n_kv_heads % job.tensor_parallel == 0
    assert [len(s) for s in pipeline_stages(preset.layers, job.pipeline_parallel)] == [10] * 8
    hyper = job.hyperparameters()
    assert hyper["tensor_parallel_size"] == 8 and hyper["num_microbatches"] == 128
    assert hyper["pretrained_weight_dir"] == "/opt/ml/input/data/weights"  # the "weights" channel
    assert hyper["checkpoint_dir"].startswith("/opt/ml/checkpoints/")  # synced to the checkpoint URI
    assert job.tokens_per_step == 512 * 4096 == 2_097_152


def test_image_uri_and_environment():
    uri = LLAMA2_70B_TRN1.image_uri("us-west-2")
    assert uri == ("763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training-neuronx:"
                   "2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04")
    assert LLAMA2_70B_TRN1.neuron_sdk == "2.30.0"
    older = dataclasses.replace(LLAMA2_70B_TRN1, image_version="2.1.2")
    assert older.image_uri("us-west-2").endswith("pytorch-training-neuronx:2.1.2-neuronx-py310-sdk2.20.2-ubuntu20.04")
    sample = dataclasses.replace(LLAMA2_70B_TRN1, image_version="1.13.1")  # the 2024 sample's container
    assert sample.image_uri("us-west-2").endswith("pytorch-training-neuronx:1.13.1-neuronx-py310-sdk2.15.0-ubuntu20.04")
    assert re.fullmatch(r"\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com/[a-z-]+:[\w.-]+", uri)
    env = LLAMA2_70B_TRN1.env()
    # XLA_DOWNCAST_BF16: "Neuron Release 2.24 will be the last release to support" it (Neuron announcement, read
    # 2026-11-23): set for the 2.20.2 and 2.15.0 images only, not for the pinned 2.30.0 one
    assert "XLA_DOWNCAST_BF16" not in env and env["FI_PROVIDER"] == "efa"
    assert older.env()["XLA_DOWNCAST_BF16"] == sample.env()["XLA_DOWNCAST_BF16"] == "1"
    assert "--distribution-strategy=llm-training" in env["NEURON_CC_FLAGS"]
    assert "--cache_dir=/opt/ml/checkpoints/" in env["NEURON_CC_FLAGS"]  # compiled graphs sync to S3
    assert all(v.purpose for v in LLAMA2_70B_TRN1.environment) and len(env) == len(LLAMA2_70B_TRN1.environment)


def test_nxd_own_70b_script_setting_tp32_with_kv_replication_checks():
    # run_llama2_70B_tp_pp.sh in aws-neuron/neuronx-distributed: TP 32, PP 8, --qkv_linear 1 --kv_replicator 4
    job = dataclasses.replace(LLAMA2_70B_TRN1, tensor_parallel=32, qkv_linear=True, kv_size_multiplier=4)
    job.check()
    assert job.data_parallel == 1


@pytest.mark.parametrize("change,message", [
    ({"tensor_parallel": 16}, "use qkv_linear with kv_size_multiplier=2"),
    ({"instance_count": 3}, "does not divide the 96 NeuronCores"),
    ({"instance_type": "ml.p4d.24xlarge"}, "choose ml.trn1.32xlarge or ml.trn1n.32xlarge"),
    ({"tensor_parallel": 64, "pipeline_parallel": 1}, "spans nodes"),
    ({"pipeline_parallel": 128, "tensor_parallel": 1, "instance_count": 16}, "larger than the 80 layers"),
    ({"global_batch": 510}, "does not split over 4 data-parallel replicas"),
    ({"seq_len": 8192}, "exceeds llama2-70b's context"),
    ({"image_version": "9.9"}, "no Neuron training image for PyTorch 9.9"),
])
def test_settings_that_cannot_run_say_why(change, message):
    with pytest.raises(NeuronLayoutError, match=message):
        dataclasses.replace(LLAMA2_70B_TRN1, **change).check()


def test_trn1n_has_the_same_cores_and_twice_the_network():
    trn1, trn1n = catalog.instance("ml.trn1.32xlarge"), catalog.instance("ml.trn1n.32xlarge")
    assert trn1n.accelerators == trn1.accelerators and trn1n.network_gbps == 2 * trn1.network_gbps == 1600
    job = dataclasses.replace(LLAMA2_70B_TRN1, instance_type="ml.trn1n.32xlarge")
    job.check()
    assert job.neuron_cores == LLAMA2_70B_TRN1.neuron_cores
    assert LlamaShape.from_preset(catalog.model("llama2-70b")).kv_heads == 8


URIS = {"weights_uri": "s3://fmlab-demo/llama2-70b/nxd-tp8-pp8", "data_uri": "s3://fmlab-demo/data/llama2-4096",
        "checkpoint_uri": "s3://fmlab-demo/llama2-70b/checkpoints"}


@pytest.fixture(scope="module")
def captured():
    return capture_request(trn1_job_spec(LLAMA2_70B_TRN1, region="us-west-2", **URIS))


def test_the_captured_trn1_request_is_valid_and_says_what_was_intended(captured):
    request = captured.request
    assert problems_in(request) == []
    assert request["ResourceConfig"]["InstanceType"] == "ml.trn1.32xlarge"
    assert request["ResourceConfig"]["InstanceCount"] == 8
    assert request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 600
    algo = request["AlgorithmSpecification"]
    assert algo["TrainingImage"] == LLAMA2_70B_TRN1.image_uri("us-west-2")
    assert "sdk2.30.0" in algo["TrainingImage"] and algo["TrainingInputMode"] == "FastFile"
    env = request["Environment"]
    assert "XLA_DOWNCAST_BF16" not in env and "--cache_dir=/opt/ml/checkpoints/" in env["NEURON_CC_FLAGS"]
    assert request["CheckpointConfig"] == {"S3Uri": URIS["checkpoint_uri"], "LocalPath": "/opt/ml/checkpoints"}
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in request["InputDataConfig"]}
    assert channels["train"] == URIS["data_uri"] and channels["weights"] == URIS["weights_uri"]
    hyper = request["HyperParameters"]  # SageMaker passes hyperparameters as strings
    assert (hyper["tensor_parallel_size"], hyper["pipeline_parallel_size"], hyper["seq_len"]) == ("8", "8", "4096")
    assert hyper["train_batch_size"] == hyper["num_microbatches"] == "128"
    modes = {c["ChannelName"]: c["InputMode"] for c in request["InputDataConfig"]}
    assert modes["train"] == modes["weights"] == "FastFile"  # streamed, not copied; code and drivers stay File
    torchrun = [json.loads(v) for k, v in captured.uploads.items() if k.endswith("sm_drivers/distributed.json")]
    assert torchrun == [{"process_count_per_node": 32, "smp": None}]  # one process per NeuronCore
    assert any(k.endswith("/code/neuron_train.py") for k in captured.uploads)  # the entry script ...
    assert any(k.endswith("/code/fmlab/neuron/train.py") for k in captured.uploads)  # ... and its logic


def test_a_trn1_job_needs_s3_uris_and_a_possible_layout():
    with pytest.raises(NeuronLayoutError, match="give an s3:// URI"):
        trn1_job_spec(LLAMA2_70B_TRN1, **{**URIS, "weights_uri": "/tmp/nxd"})
    with pytest.raises(NeuronLayoutError, match="does not divide"):
        trn1_job_spec(dataclasses.replace(LLAMA2_70B_TRN1, instance_count=3), **URIS)
    spec = trn1_job_spec(LLAMA2_70B_TRN1, **URIS).with_(input_mode="Streaming")
    with pytest.raises(JobSpecInvalid, match="input_mode"):
        spec.validate()
