"""The SMP v2 path (torch.sagemaker), exercised with a stand-in module on a one-process gloo world.

SMP v2 only exists in SageMaker's GPU containers; the stand-in records that fmlab calls tsm.init with the
layout's settings and tsm.transform on the model, and the FSDP-wrapped result must still train correctly.
"""

import importlib.machinery
import sys
import types

import pytest
import torch


@pytest.fixture
def fake_smp(monkeypatch):
    calls = {}
    tsm = types.ModuleType("torch.sagemaker")
    tsm.__spec__ = importlib.machinery.ModuleSpec("torch.sagemaker", None)
    tsm.init = lambda config=None: calls.setdefault("init", config)

    def transform(model, **kwargs):
        calls["transform"] = type(model).__name__
        return model

    tsm.transform = transform
    monkeypatch.setitem(sys.modules, "torch.sagemaker", tsm)
    monkeypatch.setattr(torch, "sagemaker", tsm, raising=False)
    return calls


@pytest.fixture
def one_process_world(monkeypatch):
    import torch.distributed as dist

    from fmlab.environment import free_port

    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_smp_path_calls_init_and_transform_and_trains(fake_smp, one_process_world):
    from fmlab.measure.parity import make_tokens, reference_step
    from fmlab.models import build_model
    from fmlab.parallel import from_mp_parameters, init_distributed, parallelize, smp_available

    assert smp_available()
    cfg = from_mp_parameters('{"hybrid_shard_degree": 1, "sm_activation_offloading": false}')
    dist = init_distributed(cfg)
    assert fake_smp["init"] == {"hybrid_shard_degree": 1, "tensor_parallel_degree": 1}
    model = parallelize(build_model("tiny"), cfg, dist)
    assert fake_smp["transform"] == "LlamaForCausalLM"
    assert type(model).__name__ == "FullyShardedDataParallel"
    tokens = make_tokens(512, 2, 16)
    loss = model(input_ids=tokens, labels=tokens).loss
    assert loss.item() == pytest.approx(reference_step("tiny", tokens)["loss"], abs=1e-5)
