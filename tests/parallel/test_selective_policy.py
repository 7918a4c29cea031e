"""Selective checkpointing's policy on every PyTorch the course's images carry (issue 41): it must not need
SelectiveCheckpointContext.op_output, which PyTorch has only from 2.12 (2.5.1, the SMDDP and SMP images, and 2.11
build the context with is_recompute only). Without op_output the kept bytes are still counted, from meta shapes."""

import warnings

import pytest
import torch
from torch.utils.checkpoint import CheckpointPolicy

from fmlab.measure.parity import make_tokens
from fmlab.models import build_model
from fmlab.parallel import activations
from fmlab.parallel.activations import (
    apply_activation_checkpointing,
    count_saved_bytes,
    saved_bytes_for_backward,
)

aten = torch.ops.aten


class OldContext:
    """SelectiveCheckpointContext as PyTorch 2.5 to 2.11 build it: is_recompute, and no op_output."""

    __slots__ = ("is_recompute",)

    def __init__(self, is_recompute: bool) -> None:
        self.is_recompute = is_recompute


@pytest.mark.parametrize("is_recompute", [False, True])
def test_the_policy_needs_no_op_output(is_recompute):
    ctx = OldContext(is_recompute)
    assert not hasattr(ctx, "op_output")
    a, b, bias = torch.randn(5, 6), torch.randn(6, 7), torch.randn(7)
    assert activations._selective_policy(ctx, aten.mm.default, a, b) is CheckpointPolicy.MUST_SAVE
    assert activations._selective_policy(ctx, aten.addmm.default, bias, a, b) is CheckpointPolicy.MUST_SAVE
    assert activations._selective_policy(ctx, aten.mul.Tensor, a, a) is CheckpointPolicy.PREFER_RECOMPUTE
    assert activations._selective_policy(ctx, aten.gelu.default, a) is CheckpointPolicy.PREFER_RECOMPUTE
    with count_saved_bytes() as counted:  # with a counter open too (the only time it looks at outputs)
        assert activations._selective_policy(ctx, aten.mm.default, a, b) is CheckpointPolicy.MUST_SAVE
        assert activations._selective_policy(ctx, aten.add.Tensor, a, a) is CheckpointPolicy.PREFER_RECOMPUTE
    # the forward's kept 5x7 fp32 output, sized on meta; the recompute keeps nothing new
    assert counted["on_device"] == (0 if is_recompute else 5 * 7 * 4)


def _run(preset, tokens):
    model = build_model(preset)
    apply_activation_checkpointing(model, "selective")
    batch = {"input_ids": tokens, "labels": tokens}
    saved = saved_bytes_for_backward(model, batch)
    loss = model(**batch).loss
    loss.backward()
    return loss.item(), {n: p.grad for n, p in model.named_parameters()}, saved


@pytest.mark.parametrize("preset", ["tiny", "tiny-gpt"])
def test_selective_checkpointing_as_on_pytorch_2_5_counts_and_trains_the_same(preset, monkeypatch):
    """The real torch.utils.checkpoint, with the policy handed the context old PyTorch builds."""
    tokens = make_tokens(512, 2, 32)
    new = _run(preset, tokens)

    policy = activations._selective_policy
    monkeypatch.setattr(activations, "_selective_policy",
                        lambda ctx, op, *a, **k: policy(OldContext(ctx.is_recompute), op, *a, **k))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every kept output sized: no "could not be sized" warning
        old = _run(preset, tokens)

    assert old[0] == new[0]
    assert all(torch.equal(old[1][n], g) for n, g in new[1].items())
    assert old[2] == new[2]  # meta shapes size the kept outputs exactly as op_output does
    assert old[2]["on_device"] > 0


def test_an_output_that_cannot_be_sized_is_said_not_counted(monkeypatch):
    def unsizable(tree):
        raise TypeError("no meta kernel")

    monkeypatch.setattr(activations, "_as_meta", unsizable)
    a, b = torch.randn(5, 6), torch.randn(6, 7)
    with pytest.warns(UserWarning, match="outputs of 1 ops kept by selective checkpointing .* lower bound"):
        with count_saved_bytes() as counted:
            assert activations._selective_policy(OldContext(False), aten.mm.default, a, b) is \
                CheckpointPolicy.MUST_SAVE
    assert counted["on_device"] == 0
