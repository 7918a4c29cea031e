"""Memory per device and layout validation (ZeRO and Korthikanti et al. figures reproduced)."""

import pytest

from fmlab.plan import catalog
from fmlab.plan.catalog import GB
from fmlab.plan.compute import PlanError
from fmlab.plan.layout import activation_bytes_per_layer, make_plan, model_state_bytes
from fmlab.plan.parallelism import ParallelConfig


@pytest.mark.parametrize("sharding, expected_gb", [("none", 120), ("zero1", 31.4), ("zero2", 16.6), ("full", 1.9)])
def test_zero_paper_7_5b_on_64_gpus(sharding, expected_gb):
    # Rajbhandari et al. 2020 (ZeRO), Figure 1: 7.5B parameters, K=12, Nd=64 -> 120 / 31.4 / 16.6 / 1.9 GB.
    total = sum(model_state_bytes(7.5e9, ParallelConfig(sharding=sharding), 64).values()) / GB
    assert total == pytest.approx(expected_gb, abs=0.05)


def test_hybrid_shard_sits_between_ddp_and_full_shard():
    full = sum(model_state_bytes(7.5e9, ParallelConfig(sharding="full"), 64).values())
    hybrid = sum(model_state_bytes(7.5e9, ParallelConfig(sharding="hybrid", hybrid_shard_degree=8), 64).values())
    ddp = sum(model_state_bytes(7.5e9, ParallelConfig(sharding="none"), 64).values())
    assert full < hybrid < ddp
    assert hybrid == pytest.approx(16 * 7.5e9 / 8)


def test_tensor_and_pipeline_parallel_divide_model_states():
    one = sum(model_state_bytes(1e9, ParallelConfig(), 8).values())
    assert sum(model_state_bytes(1e9, ParallelConfig(tp=4, pp=2), 8).values()) == pytest.approx(one / 8)


def test_korthikanti_activation_per_layer_gpt3():
    # Korthikanti et al. 2022, Table 2 and section 4: per layer s*b*h*(34 + 5*a*s/h) with eager attention; a
    # fused kernel (FlashAttention) keeps no s x s scores, 34*s*b*h (the paper's "selective" figure); full
    # recomputation keeps only the 2*s*b*h input. GPT-3 175B: s=2048, h=12288, a=96, b=1.
    m = catalog.model("gpt3-175b")
    sbh = 2048 * 1 * 12288
    eager = activation_bytes_per_layer(m, 1, 2048, attention="eager")
    assert eager == pytest.approx(sbh * (34 + 5 * 96 * 2048 / 12288))
    assert activation_bytes_per_layer(m, 1, 2048) == pytest.approx(34 * sbh)  # flash is the default
    assert activation_bytes_per_layer(m, 1, 2048, tp=8, attention="eager") == pytest.approx(eager / 8)
    assert activation_bytes_per_layer(m, 1, 2048, recompute="full") == pytest.approx(2 * sbh)


def test_selective_keeps_the_input_and_every_matmul_output():
    # The engine's selective policy: q, k, v (3h), attention output (h), o_proj (h), fc1 (4h), fc2 (h) and the
    # layer input (h) in 16-bit: 2 * 11 * s*b*h for GPT-3's layout; SwiGLU keeps gate and up (2 x ffn).
    gpt3 = catalog.model("gpt3-175b")
    sbh = 2048 * 12288
    assert activation_bytes_per_layer(gpt3, 1, 2048, recompute="selective") == pytest.approx(22 * sbh)
    llama = catalog.model("llama2-7b")  # h 4096, ffn 11008, 32 KV heads
    widths = 4096 + 2 * 4096 + 4096 + 4096 + 2 * 11008 + 4096
    assert activation_bytes_per_layer(llama, 1, 4096, recompute="selective") == pytest.approx(2 * 4096 * (4096 + widths))


def test_recomputation_and_offload_reduce_memory_in_order():
    kw = dict(model="gpt-30b", tokens=1e9, instance="ml.p4d.24xlarge", instances=16)
    mem = [make_plan(**kw, parallel=ParallelConfig(sharding="full").with_recompute(r)).memory_gb_per_device
           for r in ("none", "selective", "full", "offload")]
    assert mem == sorted(mem, reverse=True)


def test_full_recomputation_costs_a_third_more_time_and_lowers_mfu_not_hfu():
    # PaLM (Chowdhery et al. 2022), Appendix B: MFU counts the model's FLOPs, HFU what the hardware runs;
    # full recomputation runs the forward (a third of forward + backward) again.
    kw = dict(model="gpt-30b", tokens=300e9, instance="ml.p4d.24xlarge", instances=16, mfu=0.4)
    none, selective, full = (make_plan(**kw, parallel=ParallelConfig(sharding="full", activation_checkpointing=r))
                             for r in ("none", "selective", "full"))
    assert full.days == pytest.approx(none.days * 4 / 3) and full.cost_usd == pytest.approx(none.cost_usd * 4 / 3)
    assert (full.hfu, full.mfu) == (0.4, pytest.approx(0.3))
    assert selective.days == none.days and none.mfu == none.hfu == 0.4


def test_gpt30b_on_16_p4d_fits_fully_sharded_with_flash_attention_only():
    kw = dict(model="gpt-30b", tokens=300e9, instance="ml.p4d.24xlarge", instances=16)
    fsdp = ParallelConfig(sharding="full")
    assert make_plan(**kw, parallel=fsdp).fits  # ~24 GB of activations + 3.7 GB of states
    assert not make_plan(**kw, parallel=fsdp, attention="eager").fits  # the scores: ~92 GB
    assert make_plan(**kw, parallel=ParallelConfig(sharding="full", activation_checkpointing="full"),
                     attention="eager").fits
    ddp = make_plan(**kw)
    assert not ddp.fits
    with pytest.raises(PlanError, match="--sharding full"):
        ddp.require_fit()


@pytest.mark.parametrize("change, says", [
    ({"tokens": -5}, "tokens must be a positive number"),
    ({"tokens": float("nan")}, "tokens must be a positive number"),
    ({"instances": 0}, "instances must be a whole number of at least 1"),
    ({"mfu": 1.5}, "MFU must be a fraction in"),
    ({"mfu": 0}, "MFU must be a fraction in"),
    ({"micro_batch": 0}, "micro_batch must be"),
    ({"seq_len": -1}, "seq_len must be"),
    ({"parallel": ParallelConfig(tp=0)}, "tp must be"),
    ({"parallel": ParallelConfig(activation_checkpointing="some")}, "activation_checkpointing must be one of"),
    ({"parallel": {"sharding": "full"}}, "parallel must be a ParallelConfig"),
    ({"sharding": "full"}, "unexpected keyword"),
    ({"attention": "fast"}, "attention must be one of"),
])
def test_out_of_range_inputs_get_a_clear_error(change, says):
    kw = {**dict(model="gpt-30b", tokens=1e9, instance="ml.p4d.24xlarge", instances=2), **change}
    with pytest.raises((PlanError, TypeError), match=says):  # TypeError: the layout's old loose keywords
        make_plan(**kw)


def test_impossible_degrees_name_the_fix():
    with pytest.raises(PlanError, match="does not divide the 128 devices"):
        make_plan("gpt-30b", 1e9, "ml.p4d.24xlarge", 16, parallel=ParallelConfig(tp=3))
    with pytest.raises(PlanError, match="must divide llama2-13b's 40 attention heads"):
        make_plan("llama2-13b", 1e9, "ml.p4d.24xlarge", 2, parallel=ParallelConfig(tp=16))
    with pytest.raises(PlanError, match="must divide gpt-30b's 48 layers"):
        make_plan("gpt-30b", 1e9, "ml.p4d.24xlarge", 4, parallel=ParallelConfig(pp=32))
    with pytest.raises(PlanError, match="hybrid_shard_degree=3 must divide the 16 data-parallel ranks"):
        make_plan("gpt-30b", 1e9, "ml.p4d.24xlarge", 2, parallel=ParallelConfig(sharding="hybrid", hybrid_shard_degree=3))
    with pytest.raises(PlanError, match="sharding must be one of"):
        make_plan("gpt-30b", 1e9, "ml.p4d.24xlarge", 2, parallel=ParallelConfig(sharding="zero4"))


def test_the_planner_refuses_what_the_engine_cannot_split():
    # llama2-70b has 8 KV heads: the engine splits whole KV heads (it does not replicate them, as Megatron can),
    # so the planner refuses tp 16 too and names the largest degree that works.
    ParallelConfig(tp=8).check(64, catalog.model("llama2-70b"))
    with pytest.raises(PlanError, match="tp=16 must divide llama2-70b's 8 key/value heads.*use tp=8"):
        ParallelConfig(tp=16).check(64, catalog.model("llama2-70b"))
    with pytest.raises(PlanError, match="MLP width"):  # tiny: 4 heads, 2 KV heads, 176 MLP, 64 hidden
        ParallelConfig(tp=2).check(2, catalog.ModelPreset("odd", "llama", hidden=64, layers=2, heads=4, vocab=512,
                                                         seq_len=128, intermediate=175, kv_heads=2, source="test"))


def test_plan_dict_has_the_cli_keys():
    d = make_plan("llama2-7b", 2e12, "ml.p5.48xlarge", 8,
                  parallel=ParallelConfig(sharding="full", activation_checkpointing="full")).to_dict()
    for key in ("params", "train_flops", "days", "cost_usd", "memory_gb_per_device", "memory_breakdown_gb", "fits"):
        assert key in d
    assert d["fits"] is True
    assert d["checkpoint_gb"]["training"] == pytest.approx(d["params"] * 12 / 1e9)


@pytest.mark.parametrize("sharding", ["zero1", "zero2"])
def test_the_planner_books_zero_1_and_2_as_the_paper_does(sharding):
    """Issue 64 (N01-2): the planner's memory booked ZeRO-1/2 as stage 3 (32.2 GB for 30B on 128 GPUs, "fits"). The
    paper's section 5.1: ZeRO-1 keeps (4 + 12/N) bytes per parameter, ZeRO-2 (2 + 14/N): 123 and 63 GB here, the
    same as model_state_bytes (one fact, read from parallelism.SHARDED_STATES by both)."""
    from fmlab.plan import compute, memory

    m = catalog.model("gpt-30b")
    psi, n = compute.param_count(m), 128
    cfg = ParallelConfig(sharding=sharding)
    parts = memory.peak_bytes(m, cfg, world=n)
    states = sum(parts[k] for k in ("weights", "gradients", "optimizer", "compute_weights"))
    paper = psi * ((4 + 12 / n) if sharding == "zero1" else (2 + 14 / n))
    assert states == pytest.approx(paper, rel=1e-9) == sum(model_state_bytes(psi, cfg, n).values())
    assert states / GB == pytest.approx(123.0 if sharding == "zero1" else 62.9, abs=0.5)
    assert not make_plan("gpt-30b", 300e9, "ml.p4d.24xlarge", 16, parallel=cfg).fits  # a 40 GB A100 holds neither
