"""fmlab.models' pretraining attention: the numbers of transformers' "sdpa", without the mask it builds.

Run: .venv/bin/pytest tests/test_models.py -q   (about 4 s)
"""

from unittest import mock

import pytest
import torch

from fmlab.models import PretrainingAttentionError, build_model, use_pretraining_attention


def _loss_and_grads(model, x):
    model.zero_grad(set_to_none=True)
    loss = model(input_ids=x, labels=x).loss
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("preset", ["tiny", "tiny-gpt"])  # Llama with 2 key/value heads for 4 queries; OPT
def test_same_loss_and_gradients_as_sdpa_and_no_mask_is_built(preset):
    x = torch.randint(0, 512, (4, 128), generator=torch.Generator().manual_seed(0))
    reference = build_model(preset, seed=0)
    assert reference.config._attn_implementation == "sdpa"
    loss, grads = _loss_and_grads(reference, x)
    model = build_model(preset, seed=0)
    use_pretraining_attention(model)
    with mock.patch("transformers.masking_utils.find_packed_sequence_indices",
                    side_effect=AssertionError("a mask was prepared")):
        ours, our_grads = _loss_and_grads(model, x)
    assert torch.equal(ours, loss)
    for name, grad in grads.items():
        assert torch.equal(our_grads[name], grad), name


def test_sdpa_prepares_a_mask_on_every_forward():
    """The cost the pretraining attention removes (if transformers stops paying it, the reason is gone)."""
    model = build_model("tiny", seed=0)
    with mock.patch("transformers.masking_utils.find_packed_sequence_indices", return_value=None) as prepared:
        model(input_ids=torch.zeros(2, 16, dtype=torch.long))
    assert prepared.call_count == 1


def test_generation_is_refused_until_the_model_gets_sdpa_back_and_an_export_attends_with_sdpa(tmp_path):
    prompt = torch.randint(0, 512, (1, 4), generator=torch.Generator().manual_seed(1))
    reference = build_model("tiny", seed=0)
    reference.config.use_cache = True
    expected = reference.generate(prompt, max_new_tokens=4, do_sample=False)
    for preset in ("tiny", "tiny-gpt"):
        model = build_model(preset, seed=0)
        use_pretraining_attention(model)
        model.config.use_cache = True
        with pytest.raises(PretrainingAttentionError, match=r"use_pretraining_attention\(model, False\)"):
            model.generate(prompt, max_new_tokens=4, do_sample=False)
    model = build_model("tiny", seed=0)
    use_pretraining_attention(model)
    model.save_pretrained(tmp_path)
    use_pretraining_attention(model, False)
    model.config.use_cache = True
    assert model.config._attn_implementation == "sdpa"
    assert torch.equal(model.generate(prompt, max_new_tokens=4, do_sample=False), expected)
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(tmp_path).config._attn_implementation == "sdpa"
