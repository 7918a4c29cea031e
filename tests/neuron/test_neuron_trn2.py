"""The native trn2 job (fmlab.neuron.native): the course's own training script on ml.trn2.48xlarge with TorchNeuron;
its CreateTrainingJob request validates against botocore's SageMaker model, and trn2_problems names what does not fit.

Run: .venv/bin/pytest tests/neuron/test_neuron_trn2.py -q   (a few seconds: moto captures the request)

Facts checked (read 2026-11-23): 64 ranks per trn2.48xlarge (Neuron docs, "Tutorial: Train with DDP, FSDP2, and
DTensor on Neuron": "Each job uses 64 workers" on a full trn2.48xlarge); TorchNeuron runs on Trn2 and Trn3 only and
pairs torch-neuronx 2.13.3.0.* with PyTorch 2.13.0 (release notes TorchNeuron, Neuron 2.33.0).
"""

import dataclasses

import pytest

from fmlab.jobs.images import image_uri, torchneuron_image_uri, torchneuron_requirements
from fmlab.jobs.request import capture_request
from fmlab.jobs.spec import Cluster
from fmlab.neuron.native import COURSE_TORCH, LLAMA2_70B_TRN2, NeuronLayoutError, trn2_job_spec, trn2_problems
from fmlab.plan.parallelism import ParallelConfig
from fmlab.service.api_model import problems_in
from fmlab.train.config import TrainConfig

IMAGE = torchneuron_image_uri("111122223333", "us-east-2")
URIS = dict(data_uri="s3://my-bucket/data", checkpoint_uri="s3://my-bucket/trn2/checkpoints")
ROLE = "arn:aws:iam::111122223333:role/fmlab-course"


def spec(**changes):
    return trn2_job_spec(LLAMA2_70B_TRN2, image_uri=IMAGE, region="us-east-2", role=ROLE, **URIS).with_(**changes)


def test_settings_are_consistent():
    s = LLAMA2_70B_TRN2
    s.check()
    assert s.processes_per_host == 64 and s.world_size == 256  # 16 Trainium2 chips x 4 logical cores, x 4 instances
    assert (s.config.parallel.tp, s.data_parallel, s.config.grad_accum) == (4, 64, 8)
    assert s.global_batch == 512  # 64 replicas x micro-batch 1 x 8 passes, the trn1 NxD example's batch
    assert s.tokens_per_step == 512 * 4096  # the same step as the trn1 NxD example
    assert s.torch_version == COURSE_TORCH == "2.13.0"
    assert torchneuron_requirements() == ("torch==2.13.0", "torch-neuronx==2.13.3.0.*", "neuronx-cc==2.*", "nki")


def test_the_trn2_request_validates_against_botocore():
    captured = capture_request(spec(), backend="sagemaker")
    request = captured.request
    assert problems_in(request) == []
    assert request["ResourceConfig"]["InstanceType"] == "ml.trn2.48xlarge"
    assert request["ResourceConfig"]["InstanceCount"] == 4
    assert request["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    hyper = request["HyperParameters"]
    assert (hyper["sharding"], hyper["tp"], hyper["backend"], hyper["mixed_precision"]) == ("full", "4", "auto", "bf16")
    distributed = next(v for k, v in captured.uploads.items() if k.endswith("sm_drivers/distributed.json"))
    assert b'"process_count_per_node": 64' in distributed
    assert request["Environment"]["FI_PROVIDER"] == "efa"
    assert any(k.endswith("/train.py") for k in captured.uploads)  # the course's own script, not the NxD one


def test_a_good_spec_has_no_problems():
    assert trn2_problems(spec()) == []


@pytest.mark.parametrize("changes,says", [
    ({"instance_type": "ml.trn1.32xlarge"}, "device: ml.trn1.32xlarge has Trainium1"),
    ({"instance_type": "ml.p5.48xlarge"}, "needs Trainium2"),
    ({"hyperparameters": {**LLAMA2_70B_TRN2.hyperparameters(), "backend": "nccl"}}, "backend 'nccl' cannot drive"),
    ({"image": image_uri("neuron", "us-east-2")}, "PyTorch/XLA (NxD) container"),
    ({"image": image_uri("pytorch", "us-east-2")}, "CUDA image"),
    ({"image": "neuron"}, "not a full ECR image URI"),
    ({"image": torchneuron_image_uri("111122223333", "us-west-2")}, "in us-west-2 but the job runs in us-east-2"),
    ({"processes_per_host": 32}, "run one per logical NeuronCore: processes_per_host=64"),
    ({"distribution": "mpi"}, "started with torchrun"),
    ({"hyperparameters": {**LLAMA2_70B_TRN2.hyperparameters(), "tp": 128}}, "tp=128 must divide the 64"),
    ({"hyperparameters": {**LLAMA2_70B_TRN2.hyperparameters(), "tp": 16}}, "tp=16 must divide"),  # 8 KV heads
])
def test_what_does_not_fit_is_named(changes, says):
    problems = trn2_problems(spec(**changes))
    assert any(says in p for p in problems), problems


@pytest.mark.parametrize("change,message", [
    ({"cluster": Cluster("ml.trn1.32xlarge", 4)}, "TorchNeuron runs on Trainium2 and Trainium3 only"),
    ({"config": TrainConfig(model="llama2-70b", parallel=ParallelConfig(sharding="full", tp=3))},
     "tp=3 must divide the 64"),
    ({"config": TrainConfig(model="llama2-70b", parallel=ParallelConfig(sharding="full", pp=2))},
     "pipeline stages are planned"),
    ({"config": TrainConfig(model="llama2-70b", seq_len=8192)}, "exceeds llama2-70b's context"),
    ({"config": TrainConfig(model="llama2-70b", micro_batch=0)}, "must each be at least 1"),
    ({"torch_version": "2.14.0"}, "is not the course's PyTorch"),
    ({"torch_version": "2.9.0"}, "published for PyTorch 2.13.0, 2.14.0 only"),
])
def test_settings_that_cannot_run_say_why(change, message):
    with pytest.raises(NeuronLayoutError, match=message):
        dataclasses.replace(LLAMA2_70B_TRN2, **change).check()
