"""Planner formulas against exact parameter counts and published figures (sources cited per test)."""

from dataclasses import replace

import pytest

from fmlab.plan import catalog, compute
from fmlab.plan.compute import PlanError

A100 = catalog.ACCELERATOR_PEAK_TFLOPS["A100"]


def small_twin(m: catalog.ModelPreset) -> catalog.ModelPreset:
    """The same architecture (family, GQA, MLP shape) at a width a CPU instantiates in milliseconds."""
    return replace(m, hidden=64, heads=8 if m.heads % 8 == 0 else 4, layers=2, vocab=100, seq_len=32,
                   intermediate=176 if m.intermediate else 0, kv_heads=2 if m.kv_heads else 0)


@pytest.mark.parametrize("name", list(catalog.MODELS))
def test_param_formula_equals_transformers_num_parameters(name):
    from fmlab.models import build_model

    twin = small_twin(catalog.model(name))
    assert compute.param_count(twin) == build_model(twin).num_parameters()


@pytest.mark.parametrize("name, billions", [
    ("llama2-7b", 6.738), ("llama2-13b", 13.016), ("llama2-70b", 68.977),  # HF Llama-2 model cards / safetensors
    ("falcon-40b", 41.30),  # TII Falcon-40B: 41.3B parameters
    ("bloomberggpt-50b", 50.56),  # Wu et al. 2023: 50.6B parameters
    ("gpt3-175b", 174.6),  # Brown et al. 2020: 175.0B (reported rounded)
    ("gpt-30b", 29.97),
])
def test_full_size_param_counts_match_published(name, billions):
    assert compute.param_count(catalog.model(name)) / 1e9 == pytest.approx(billions, rel=2e-3)


@pytest.mark.parametrize("name, published", [
    # Exact totals of the released (untied-embedding) Llama 3.1 checkpoints, as transformers'
    # LlamaForCausalLM(config).num_parameters() gives them for the meta-llama/Llama-3.1-* config.json files.
    ("llama3.1-8b", 8_030_261_248), ("llama3.1-70b", 70_553_706_496), ("llama3.1-405b", 405_853_388_800),
])
def test_llama31_param_counts_are_exact(name, published):
    assert compute.param_count(catalog.model(name)) == published


def test_llama31_8b_count_matches_transformers_at_full_size():
    # The full 8B model, built on the meta device (no memory, no download) from its released config.json values.
    import torch
    import transformers

    m = catalog.model("llama3.1-8b")
    config = transformers.LlamaConfig(vocab_size=m.vocab, hidden_size=m.hidden, intermediate_size=m.ffn,
                                      num_hidden_layers=m.layers, num_attention_heads=m.heads,
                                      num_key_value_heads=m.n_kv_heads, tie_word_embeddings=False)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    assert sum(p.numel() for p in model.parameters()) == compute.param_count(m) == 8_030_261_248


def test_llama31_405b_training_flops_match_the_report():
    # Dubey et al. 2024, Llama 3, section 1: 405B trained with 3.8e25 FLOPs on 15.6T tokens; 6ND gives that.
    m = catalog.model("llama3.1-405b")
    assert 6 * compute.param_count(m) * 15.6e12 == pytest.approx(3.8e25, rel=0.01)


def test_llama31_405b_gpu_hours_imply_mfu_near_the_reported_38_to_43_percent():
    # Model card: 30.84M H100 GPU-hours (all training, long-context stage included); report Table 4: 38-43% MFU.
    # The card's hours include restarts and the 128K stage, so the implied figure sits a little below.
    run = catalog.PUBLISHED_RUNS["Llama 3.1 405B"]
    flops = compute.train_flops(catalog.model(run.model), run.tokens)
    mfu = compute.implied_mfu(flops, catalog.ACCELERATOR_PEAK_TFLOPS["H100"], device_hours=run.gpu_hours)
    assert 0.30 <= mfu <= 0.45


def test_flops_per_token_is_6n_plus_palm_attention_term():
    # PaLM, Appendix B: 6N + 12 L H Q T.
    m = catalog.model("llama2-7b")
    assert compute.flops_per_token(m) == 6 * compute.matmul_params(m) + 12 * 32 * 4096 * 4096
    assert compute.flops_per_token(m, seq_len=2048) < compute.flops_per_token(m)


def test_chinchilla_twenty_tokens_per_parameter():
    # Hoffmann et al. 2022: Chinchilla, 70B parameters on 1.4T tokens.
    assert compute.chinchilla_tokens(70e9) == pytest.approx(1.4e12)


@pytest.mark.parametrize("name", ["Llama 2 7B", "Llama 2 13B", "Llama 2 70B"])
def test_llama2_gpu_hours_imply_mfu_between_30_and_50_percent(name):
    # Touvron et al. 2023, Llama 2, Table 2: 184,320 / 368,640 / 1,720,320 A100-80GB GPU-hours for 2T tokens.
    run = catalog.PUBLISHED_RUNS[name]
    flops = compute.train_flops(catalog.model(run.model), run.tokens)
    assert 0.30 <= compute.implied_mfu(flops, A100, device_hours=run.gpu_hours) <= 0.50


@pytest.mark.parametrize("name", ["Falcon-40B", "BloombergGPT"])
def test_falcon_and_bloomberggpt_imply_mfu_between_20_and_50_percent(name):
    # Falcon-40B: 1T tokens, 48 p4d (384 A100), about two months (AWS lesson; TII model card).
    # BloombergGPT: 569B tokens, 64 p4d (512 A100), 53 days (Wu et al. 2023).
    run = catalog.PUBLISHED_RUNS[name]
    flops = compute.train_flops(catalog.model(run.model), run.tokens)
    assert 0.20 <= compute.implied_mfu(flops, A100, devices=run.devices, days=run.days) <= 0.50


def test_megatron_175b_on_1024_a100_takes_about_34_days():
    # Narayanan et al. 2021, section 5.1: GPT-3 175B on 300B tokens, 1024 A100 at 140 TFLOP/s -> ~34 days
    # (with full activation recomputation, 8TP/(nX)).
    m = catalog.model("gpt3-175b")
    flops = compute.hardware_flops_per_token(m, recompute="full") * 300e9
    days = compute.training_seconds(flops, 1024, 140, mfu=1.0) / compute.SECONDS_PER_DAY
    assert days == pytest.approx(34, rel=0.05)


def test_time_halves_when_cluster_doubles_and_cost_stays():
    a = compute.estimate_run("llama2-7b", 1e12, "ml.p4d.24xlarge", 8, mfu=0.4)
    b = compute.estimate_run("llama2-7b", 1e12, "ml.p4d.24xlarge", 16, mfu=0.4)
    assert b.days == pytest.approx(a.days / 2)
    assert b.cost_usd == pytest.approx(a.cost_usd)
    # cost = hours x price x instances
    assert a.cost_usd == pytest.approx(a.days * 24 * 37.688 * 8)


def test_implied_mfu_inverts_estimate_run():
    est = compute.estimate_run("gpt-30b", 300e9, "ml.p4d.24xlarge", 16, mfu=0.37)
    assert compute.implied_mfu(est.train_flops, 312, devices=est.devices, days=est.days) == pytest.approx(0.37)


def test_smallest_cluster_meets_deadline_and_one_fewer_does_not():
    est = compute.smallest_cluster("llama2-7b", 1e12, "ml.p4d.24xlarge", deadline_days=30, mfu=0.4)
    assert est.days <= 30
    assert compute.estimate_run("llama2-7b", 1e12, "ml.p4d.24xlarge", est.instances - 1, mfu=0.4).days > 30


def test_smallest_cluster_over_budget_says_what_to_change():
    with pytest.raises(PlanError, match="raise the budget"):
        compute.smallest_cluster("llama2-70b", 2e12, "ml.p4d.24xlarge", deadline_days=30, budget_usd=1000, mfu=0.4)


def test_bad_mfu_is_a_clear_error():
    with pytest.raises(PlanError, match="MFU"):
        compute.estimate_run("tiny", 1e6, "ml.p4d.24xlarge", 1, mfu=40)


def test_phased_plan_grows_data_model_and_devices():
    phases = compute.phased_plan("llama2-7b", 2e12, "ml.p4d.24xlarge", max_instances=16, mfu=0.4)
    assert [p.name for p in phases] == ["base", "medium", "large", "jumbo"]
    assert [p.data_fraction for p in phases] == [0.01, 0.05, 0.5, 1.0]
    assert [p.devices for p in phases] == [1, 8, 16, 128]
    params = [p.estimate.params for p in phases]
    assert params == sorted(params) and params[-1] == compute.param_count(catalog.model("llama2-7b"))
    # about 1% of the parameters: the layers shrink by 100x, the vocabulary embedding only by width
    assert 0.005 < params[0] / params[-1] < 0.03


def test_scaled_models_can_be_built():
    from fmlab.models import build_model

    sub = compute.scale_model(small_twin(catalog.model("llama2-70b")), 0.3, "x")
    assert build_model(sub).num_parameters() == compute.param_count(sub)


def test_an_instance_without_a_published_price_costs_nan_and_the_launch_guard_refuses_it():
    est = compute.estimate_run("llama3.1-8b", 1e12, "ml.trn2.48xlarge", 4, mfu=0.4)
    assert est.days > 0 and est.cost_usd != est.cost_usd  # NaN: unknown, never a made-up number
    from fmlab.jobs.guards import OverBudget, price_per_hour

    with pytest.raises(OverBudget, match="price_per_hour"):
        price_per_hour("ml.trn2.48xlarge")
