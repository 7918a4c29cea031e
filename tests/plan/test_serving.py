"""The serving plan (fmlab.plan.serving): KV cache bytes, which instance fits, cost per million tokens."""

import pytest

from fmlab.plan import catalog, serving
from fmlab.plan.compute import PlanError


def test_kv_cache_per_token_reproduces_the_vllm_paper():
    # Kwon et al. 2023 (PagedAttention), section 3: OPT-13B keeps 800 KB of KV cache per token,
    # 2 (key and value) x 5120 (hidden) x 40 (layers) x 2 (bytes, FP16).
    opt13b = catalog.ModelPreset("opt-13b", "opt", hidden=5120, layers=40, heads=40, vocab=50272, seq_len=2048)
    assert serving.kv_bytes_per_token(opt13b, "fp16") == 2 * 5120 * 40 * 2 == 819_200


def test_grouped_query_attention_shrinks_the_cache():
    llama70 = catalog.model("llama2-70b")  # 8 KV heads of 64
    assert serving.kv_bytes_per_token(llama70) == 2 * 80 * 8 * 128 * 2


def test_gpt30b_needs_more_than_a_g5_12xlarge_and_fits_a_p4d_at_tp4():
    small = serving.plan_serving("gpt-30b", "ml.g5.12xlarge", context=2048, batch=16)
    assert not small.fits and "larger instance" in small.why and small.usd_per_million_tokens is None
    p4d = serving.plan_serving("gpt-30b", "ml.p4d.24xlarge", context=2048, batch=16)
    assert p4d.fits and p4d.tp == 4 and p4d.copies == 2
    assert p4d.per_device_gb <= p4d.usable_gb < (p4d.weights_gb + p4d.kv_gb) / 2
    # cost per million tokens = price per hour / tokens per hour
    assert p4d.usd_per_million_tokens == pytest.approx(37.688 / (p4d.tokens_per_s * 3600) * 1e6)


def test_a_shorter_context_needs_fewer_devices():
    long = serving.plan_serving("gpt-30b", "ml.p4d.24xlarge", context=2048, batch=16)
    short = serving.plan_serving("gpt-30b", "ml.p4d.24xlarge", context=256, batch=16)
    assert short.tp < long.tp and short.tokens_per_s > long.tokens_per_s


def test_the_cheapest_instance_has_a_price_and_fits():
    best = serving.cheapest("gpt-30b", 2048, 16)
    assert best.fits and best.price_per_hour and best.usd_per_million_tokens > 0
    table = serving.serving_table("gpt-30b", 2048, 16)
    assert best.usd_per_million_tokens == pytest.approx(table["$ per 1M tokens"].dropna().min(), rel=1e-2)


@pytest.mark.parametrize("kwargs, match", [({"instance": "ml.x9.huge"}, "no serving facts"),
                                           ({"context": 4096}, "context of 2048"),
                                           ({"dtype": "fp4"}, "dtype must be")])
def test_bad_input_is_named(kwargs, match):
    args = {"model": "gpt-30b", "instance": "ml.p4d.24xlarge", "context": 2048, "batch": 16, **kwargs}
    with pytest.raises(PlanError, match=match):
        serving.plan_serving(**args)
