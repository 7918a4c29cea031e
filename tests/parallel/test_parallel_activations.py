"""Activation checkpointing (full, selective) and offloading keep the loss and gradients, and change what
autograd keeps for backward as they should (counted with saved-tensor hooks; one process, no spawning)."""

import pytest
import torch

from fmlab.measure.parity import clean_name, make_tokens, reference_step
from fmlab.models import build_model
from fmlab.parallel.activations import (
    apply_activation_checkpointing,
    apply_activation_offloading,
    saved_bytes_for_backward,
)

TOL = 1e-6  # fp32; recomputation runs the same kernels on the same inputs, so differences are ~0


def run(preset, checkpointing, offloading, tokens):
    model = build_model(preset)
    apply_activation_checkpointing(model, checkpointing)
    if offloading:
        apply_activation_offloading(model)
    batch = {"input_ids": tokens, "labels": tokens}
    saved = saved_bytes_for_backward(model, batch)
    loss = model(**batch).loss
    loss.backward()
    grads = {clean_name(n): p.grad for n, p in model.named_parameters()}
    return loss.item(), grads, saved


@pytest.fixture(scope="module", params=["tiny", "tiny-gpt"])
def measured(request):
    tokens = make_tokens(512, 4, 64)
    ref = reference_step(request.param, tokens)
    runs = {(c, o): run(request.param, c, o, tokens)
            for c in ("none", "full", "selective") for o in (False, True)}
    return ref, runs


def test_loss_and_gradients_unchanged(measured):
    ref, runs = measured
    for (checkpointing, offloading), (loss, grads, _) in runs.items():
        assert loss == pytest.approx(ref["loss"], abs=TOL), (checkpointing, offloading)
        worst = max((grads[n] - g).abs().max().item() for n, g in ref["grads"].items())
        assert worst <= TOL, f"{checkpointing=} {offloading=}: max |grad difference| {worst:.2e}"


def test_checkpointing_keeps_fewer_bytes(measured):
    _, runs = measured
    kept = {c: runs[(c, False)][2]["on_device"] for c in ("none", "full", "selective")}
    assert kept["none"] > kept["selective"] > kept["full"] > 0
    assert kept["none"] > 3 * kept["full"]  # two layers' internals vs their inputs (+ the logits)
    assert all(runs[(c, False)][2]["offloaded"] == 0 for c in ("none", "full", "selective"))


def test_offloading_moves_bytes_without_changing_the_total(measured):
    _, runs = measured
    for c in ("none", "full"):
        plain, offloaded = runs[(c, False)][2], runs[(c, True)][2]
        assert offloaded["offloaded"] > 0
        assert offloaded["on_device"] < plain["on_device"]
        assert offloaded["on_device"] + offloaded["offloaded"] == plain["on_device"]
    # with full checkpointing, only the layers' inputs travel: far less than every activation
    assert runs[("full", True)][2]["offloaded"] < runs[("none", True)][2]["offloaded"] / 5


def test_unknown_checkpointing_mode_is_refused():
    with pytest.raises(ValueError, match="'none', 'full' or 'selective'"):
        apply_activation_checkpointing(build_model("tiny"), "every-other")
    with pytest.raises(ValueError, match="at least 1 layer"):
        apply_activation_offloading(build_model("tiny"), horizon=0)


def test_counter_ignores_weights():
    model = build_model("tiny")
    tokens = make_tokens(512, 1, 8)
    saved = saved_bytes_for_backward(model, {"input_ids": tokens, "labels": tokens})
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    assert 0 < saved["on_device"] < weights  # 8 tokens of activations are far smaller than the weights
    assert torch.is_grad_enabled()
