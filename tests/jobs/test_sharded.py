"""Module 7's job: the GPT-30B plan against the published shape, and its CreateTrainingJob request (SMP v2 image,
SMP settings, EFA environment, FastFile data, checkpoints, stopping condition), checked without AWS."""

import json

import pytest

from fmlab.jobs.request import capture_request
from fmlab.jobs.sharded import EFA_ENVIRONMENT, OMITTED_SEED_VARIABLES, ShardedRun, environment
from fmlab.plan import catalog, compute, layout
from fmlab.plan.parallelism import ParallelConfig
from fmlab.service.api_model import problems_in

ROLE = "arn:aws:iam::111122223333:role/fmlab-course"


def test_gpt30b_has_thirty_billion_parameters():
    """SageMaker's GPT-30B example shape: hidden 7168, 48 layers, 64 heads, context 2048, GPT-2 vocabulary."""
    m = catalog.model("gpt-30b")
    assert (m.hidden, m.layers, m.heads, m.seq_len, m.vocab) == (7168, 48, 64, 2048, 50257)
    assert compute.param_count(m) == pytest.approx(30e9, rel=0.002)  # 29,974,432,768


def test_flash_attention_drops_the_stored_scores():
    """Korthikanti et al. 2022 keep s*b*h*(34 + 5as/h) bytes per layer; FlashAttention never stores the a*s*s
    scores, leaving 34*s*b*h: for GPT-30B at 2048 tokens, 96.6 GB per GPU becomes 32.2 GB (full sharding, 128;
    fmlab.plan.memory's peak, the engine's bf16 activations and chunked loss)."""
    m = catalog.model("gpt-30b")
    s, b, h = 2048, 1, 7168
    assert layout.activation_bytes_per_layer(m, b, s) == 34 * s * b * h  # flash is the planner's default
    assert layout.activation_bytes_per_layer(m, b, s, attention="eager") == s * b * h * (34 + 5 * 64 * s / h)
    eager = layout.make_plan(m, 300e9, "ml.p4d.24xlarge", 16, parallel=ParallelConfig(sharding="full"),
                             attention="eager")
    flash = layout.make_plan(m, 300e9, "ml.p4d.24xlarge", 16, parallel=ParallelConfig(sharding="full"))
    assert round(eager.memory_gb_per_device, 1) == 96.6 and not eager.fits
    assert round(flash.memory_gb_per_device, 1) == 32.2 and flash.fits
    with pytest.raises(compute.PlanError, match="attention must be one of"):
        layout.activation_bytes_per_layer(m, b, s, attention="sparse")


def test_the_chosen_layout_is_the_fastest_that_fits_with_headroom():
    rows = layout.candidates("gpt-30b", 300e9, "ml.p4d.24xlarge", 16)
    hybrid8 = [r for r in rows if r["sharding"] == "hybrid" and r["shard degree"] == 8 and r["tp"] == 1]
    assert hybrid8 and not any(r["fits"] for r in hybrid8)  # 16 B x 30B / 8 = 60 GB of states alone
    no_recompute = [r for r in rows if r["recompute"] == "none" and r["tp"] == 1 and r["fits"]]
    # groups of 64 need 36.0 GB of the 34.2 a plan may fill (36 usable less 5% headroom): only all 128 GPUs
    assert sorted(r["shard degree"] for r in no_recompute) == [128]
    choice = layout.choose(rows)
    assert (choice["sharding"], choice["shard degree"], choice["tp"], choice["recompute"]) == ("hybrid", 32, 1, "full")
    assert choice["tokens/s per device"] >= 0.99 * max(r["tokens/s per device"] for r in rows if r["fits"])
    assert choice["parallel"] == ParallelConfig(sharding="hybrid", hybrid_shard_degree=32,
                                                activation_checkpointing="full")  # what the job takes
    # Adam's fp32 master and moments (12 bytes a parameter) and the 16-bit weights and gradients, sharded over 32; with
    # eight sequences in one pass no gradient is held across micro-batches (layout's memory model books 12 then)
    assert choice["grad accum"] == 1
    assert choice["states GB"] == pytest.approx(12 * compute.param_count(catalog.model("gpt-30b")) / 32 / 1e9)
    with pytest.raises(compute.PlanError, match="no candidate layout fits"):
        layout.choose(layout.candidates("gpt-30b", 300e9, "ml.p4d.24xlarge", 1, hybrid_degrees=(8,),
                                        tps=(1,), recomputes=("none",)))


@pytest.fixture(scope="module")
def request_30b():
    run = ShardedRun().shrink(sharding="hybrid", hybrid_shard_degree=64, activation_checkpointing="none",
                              max_steps=5000)
    spec = run.job_spec("s3://course-bucket/data/gpt2", "s3://course-bucket/checkpoints/gpt30b", role=ROLE,
                        region="us-west-2")
    return run, capture_request(spec).request


def test_the_30b_request_validates_and_carries_the_plan(request_30b):
    run, r = request_30b
    assert problems_in(r) == []
    assert r["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge" and r["ResourceConfig"]["InstanceCount"] == 16
    assert r["AlgorithmSpecification"]["TrainingImage"] == (
        "658645717510.dkr.ecr.us-west-2.amazonaws.com/smdistributed-modelparallel:2.5.1-gpu-py311-cu124")
    assert json.loads(r["HyperParameters"]["mp_parameters"]) == {"hybrid_shard_degree": 64, "tensor_parallel_degree": 1}
    assert r["HyperParameters"]["model"] == "gpt-30b" and r["HyperParameters"]["activation_checkpointing"] == "none"
    assert "checkpoint_dir" not in r["HyperParameters"]  # the script takes /opt/ml/checkpoints from SageMaker
    assert r["Environment"].pop("FMLAB_SCRIPT") == "entrypoints/train.py"  # the course's script: its rules apply
    # the SMP image's aws-ofi-nccl version is in no source: the job keeps the settings of plug-ins <= 1.5.0
    assert r["Environment"] == {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_PROTO": "simple",
                                "NCCL_DEBUG": "INFO"} == environment(r["AlgorithmSpecification"]["TrainingImage"])
    train = next(c for c in r["InputDataConfig"] if c["ChannelName"] == "train")
    assert train["DataSource"]["S3DataSource"]["S3Uri"] == "s3://course-bucket/data/gpt2"
    assert train["InputMode"] == "FastFile"
    assert r["CheckpointConfig"] == {"S3Uri": "s3://course-bucket/checkpoints/gpt30b", "LocalPath": "/opt/ml/checkpoints"}
    assert r["StoppingCondition"]["MaxRuntimeInSeconds"] == 120 * 3600
    # room for 3 full training checkpoints (12 bytes/parameter: 360 GB each) on every instance
    assert r["ResourceConfig"]["VolumeSizeInGB"] == run.volume_gb() >= 3 * 360
    assert all(v.source for v in EFA_ENVIRONMENT)


def test_the_seeds_nccl_variables_are_left_out_with_reasons(request_30b):
    """NCCL_LAUNCH_MODE, NCCL_NET_SHARED_COMMS and NCCL_ALGO: the old examples set them, the course's jobs do not,
    and each says why with its sources (NCCL's env docs and aws-ofi-nccl at a commit)."""
    run, r = request_30b
    omitted = {v.name: v for v in OMITTED_SEED_VARIABLES}
    assert set(omitted) == {"NCCL_LAUNCH_MODE", "NCCL_NET_SHARED_COMMS", "NCCL_ALGO"}
    assert not set(omitted) & set(r.get("Environment", {}))  # not in the 30B job's request
    assert not set(omitted) & {v.name for v in EFA_ENVIRONMENT}
    for v in omitted.values():
        assert "NVIDIA/nccl" in v.source and "@" in v.source and v.purpose


def test_the_twin_keeps_everything_but_the_sizes(request_30b):
    run, _ = request_30b
    twin = run.shrink(model="small-gpt", instances=2, processes_per_host=2, hybrid_shard_degree=2, max_steps=60)
    spec = twin.job_spec("s3://fmlab-local/data", "s3://fmlab-local/ckpt")
    assert (spec.distribution, spec.input_mode) == ("smp", "FastFile")
    assert spec.environment == run.job_spec("s3://b/d", "s3://b/c").environment  # same image, same EFA settings
    assert spec.world_size() == 4 and spec.smp == {"hybrid_shard_degree": 2, "tensor_parallel_degree": 1}
    assert spec.volume_gb <= 31 and twin.tokens_per_step == 4 * run.config.micro_batch * 128  # no big disk
    assert twin.config.global_batch == 0 and run.config.global_batch == 1024  # the plan's batch is for 128 GPUs
    assert twin.config.seq_len == 128 and twin.config.lr == run.config.lr  # the new model's context; the rest kept
    with pytest.raises(TypeError, match="not a field of ShardedRun, Cluster, TrainConfig or ParallelConfig"):
        run.shrink(nodes=2)


def test_the_request_reads_the_held_out_loss_as_a_metric(request_30b):
    _, r = request_30b
    names = {m["Name"] for m in r["AlgorithmSpecification"]["MetricDefinitions"]}
    assert {"train:loss", "train:mfu", "validation:loss"} <= names


def test_the_published_smp_30b_figure_is_read_as_hardware_flops():
    """Issue 64 (N07-11): AWS's 141 TFLOP/s for SMP's GPT-30B count the recomputed forward (the example script's 8N
    FLOPs per token): 45.2% of the A100's 312 as HFU, 33.9% as MFU, not an MFU of 45%."""
    from fmlab.jobs import sharded

    published = sharded.SMP_2022_GPT30B
    assert published.hfu(312) == pytest.approx(141 / 312)
    assert published.mfu(312) == pytest.approx(141 / 312 * 0.75, rel=1e-3)  # 6N of 8N: model FLOPs of executed
