"""benchmarks/train_throughput.py compares the engine with nanoGPT's step on the engine's own model: its NanoLlama,
loaded with the weights of the `tiny` preset's Hugging Face Llama, must compute the same loss and gradients.

    .venv/bin/python -m pytest tests/train/test_throughput_benchmark.py -q
"""

import importlib.util
import json

import pytest
import torch

from fmlab.environment import ROOT
from fmlab.models import build_model


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("train_throughput", ROOT / "benchmarks" / "train_throughput.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_nano_llama_is_the_tiny_llama(bench):
    hf = build_model("tiny", seed=3)
    nano = bench.nano_model("tiny")
    nano.load_state_dict(bench.llama_weights_from_hf(hf.state_dict()))  # strict: every name and shape matches
    x = torch.randint(0, 512, (2, 128), generator=torch.Generator().manual_seed(0))
    targets = torch.cat([x[:, 1:], torch.full((2, 1), -100)], dim=1)  # as HF's labels=x: the last predicts nothing
    hf_loss, nano_loss = hf(input_ids=x, labels=x).loss, nano(x, targets)
    assert nano_loss.item() == pytest.approx(hf_loss.item(), abs=1e-5)
    hf_loss.backward()
    nano_loss.backward()
    for hf_name, ours in [("model.layers.1.self_attn.q_proj.weight", "blocks.1.q_proj.weight"),
                          ("model.layers.0.self_attn.k_proj.weight", "blocks.0.k_proj.weight"),
                          ("model.layers.0.mlp.up_proj.weight", "blocks.0.up_proj.weight"),
                          ("model.norm.weight", "norm.weight")]:
        torch.testing.assert_close(nano.get_parameter(ours).grad, hf.get_parameter(hf_name).grad,
                                   rtol=1e-4, atol=1e-6)


def test_benchmark_runs_and_reports_its_ratios(bench, capsys):
    bench.main(["--rounds", "1", "--steps", "3", "--json"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["model"] == "tiny"
    for key in ("vs_nanogpt", "vs_bare", "vs_nanogpt_gpt", "fmlab_tokens_per_cpu_s"):
        assert result[key] > 0
