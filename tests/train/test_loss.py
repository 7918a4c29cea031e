"""The chunked loss (fmlab.train.loss) against transformers' full loss: same loss, same gradients, no logits held;
and the engine's --loss and --compile flags."""

from __future__ import annotations

import copy

import pytest
import torch

from fmlab.models import build_model, use_pretraining_attention
from fmlab.plan.catalog import ModelPreset
from fmlab.train.loss import linear_cross_entropy, use_chunked_loss

SMALL = ModelPreset("loss-probe", "llama", hidden=64, layers=2, heads=4, vocab=512, seq_len=64, intermediate=176,
                    kv_heads=2)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["eager", "compiled"])
def test_linear_cross_entropy_in_chunks_equals_the_full_cross_entropy(compiled):
    torch.manual_seed(0)
    hidden = torch.randn(3, 20, 16, requires_grad=True)
    weight = torch.randn(50, 16, requires_grad=True)
    labels = torch.randint(0, 50, (3, 20))
    labels[0, :5] = -100  # tokens that count for nothing
    full = torch.nn.functional.cross_entropy((hidden @ weight.T)[:, :-1].reshape(-1, 50), labels[:, 1:].reshape(-1))
    full.backward()
    expected = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    chunked = linear_cross_entropy(hidden, weight, labels, chunk=7, compiled=compiled)  # 60 tokens: 9 chunks, the last of 4
    (chunked * 0.5).backward()  # the incoming gradient scales both
    assert chunked.item() == pytest.approx(full.item(), rel=1e-6)
    torch.testing.assert_close(hidden.grad, 0.5 * expected[0], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(weight.grad, 0.5 * expected[1], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "autocast-bf16"])
def test_the_engines_model_trains_the_same_with_the_chunked_loss(autocast):
    full = build_model(SMALL)
    chunked = copy.deepcopy(full)
    for model in (full, chunked):
        use_pretraining_attention(model)
    assert use_chunked_loss(chunked) == ""
    x = torch.randint(0, SMALL.vocab, (3, 64))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        a = full(input_ids=x, labels=x)
        b = chunked(input_ids=x, labels=x)
    assert b.logits is None  # never made whole
    a.loss.backward()
    b.loss.backward()
    assert b.loss.item() == pytest.approx(a.loss.item(), rel=1e-6)
    # under bf16 the head's weight gradient is summed in fp32 over chunks, not inside one bf16 matrix multiply
    tolerance = 1e-3 if autocast else 1e-5
    for (name, p), (_, q) in zip(full.named_parameters(), chunked.named_parameters(), strict=True):
        assert (q.grad - p.grad).norm() <= tolerance * p.grad.norm(), name
    with torch.no_grad():  # without labels the head makes logits as before (generation, evaluation by logits)
        torch.testing.assert_close(chunked(input_ids=x).logits, full(input_ids=x).logits)
    use_chunked_loss(chunked, False)
    assert chunked(input_ids=x, labels=x).logits is not None


def test_the_chunked_loss_is_refused_where_it_cannot_apply():
    assert use_chunked_loss(build_model("tiny-gpt")) == ""  # OPT's tied head, no bias: it applies
    model = build_model(SMALL)
    model.lm_head = torch.nn.Linear(SMALL.hidden, SMALL.vocab, bias=True)
    assert "bias" in use_chunked_loss(model)


def test_the_flags_are_checked():
    from fmlab.train import TrainConfigError, parse_config

    assert (parse_config([]).loss, parse_config([]).compile) == ("chunked", "auto")
    with pytest.raises(TrainConfigError, match="--loss must be one of chunked, full"):
        parse_config(["--loss", "fused"]).check()
    with pytest.raises(TrainConfigError, match="--compile must be one of auto, true, false"):
        parse_config(["--compile", "yes"]).check()


@pytest.mark.slow
def test_fmlab_train_compiled_matches_eager_and_the_full_loss(tmp_path):
    """--compile true compiles each decoder layer (inductor on this CPU: ~25 s for the tiny model); the losses of
    4 steps equal eager's, and the chunked loss's equal the full loss's."""
    from fmlab.train import TrainConfig, train

    def losses(**kw):
        cfg = TrainConfig(model="tiny", max_steps=4, log_every=1, micro_batch=4, tensorboard=False, **kw)
        return train(cfg).losses

    eager = losses(compile="false")
    compiled = losses(compile="true")
    full = losses(compile="false", loss="full")
    for step in eager:
        assert compiled[step] == pytest.approx(eager[step], rel=2e-4)
        assert full[step] == pytest.approx(eager[step], rel=2e-5)
