"""The planner's memory against measurements: the engine's peaks on one H100 (benchmarks/gpu_step.py) and on one
H200 (docs/measurements/h200-2026-11-26.md, an earlier engine), and a CPU run of the engine's own step, where autocast
keeps the same tensors and the profiler sees every allocation."""

from __future__ import annotations

import pytest

from fmlab.plan import compute, memory
from fmlab.plan.catalog import ModelPreset
from fmlab.plan.gpu_measurements import H100_MEMORY, H200_MEMORY
from fmlab.plan.parallelism import ParallelConfig

GiB = 2**30


def planned_gib(row, loss="full", grad_accum=None):
    cfg = ParallelConfig(activation_checkpointing=row.recompute)
    parts = memory.peak_bytes(row.model, cfg, 1, row.micro_batch, row.seq_len, loss=loss, grad_accum=grad_accum)
    return sum(parts.values()) / GiB


@pytest.mark.parametrize("row", H100_MEMORY, ids=lambda r: r.label)
def test_the_planner_predicts_the_engines_cuda_peak_within_5_percent(row):
    """The engine as it is, one micro-batch per step (as benchmarks/gpu_step.py ran it): 0.95-1.00 on every row
    (two shapes, micro-batch 1 to 16, with and without full recomputation)."""
    assert planned_gib(row, grad_accum=1) / row.peak_gib == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("row", H100_MEMORY, ids=lambda r: r.label)
def test_a_plan_that_does_not_say_its_accumulation_is_never_short(row):
    """Booking the gradients (gradient accumulation holds them through every forward) errs on the safe side:
    1.02-1.17 of the same peaks."""
    assert 1.0 < planned_gib(row) / row.peak_gib < 1.18


# Rows the planner holds within 15%; the m200 rows with full recomputation at micro-batch 4 and 16 measure more
# than it predicts (0.79 and 0.84): a CUDA-side term not seen on a CPU (the closing note of issue 41).
WITHIN_15 = [r for r in H200_MEMORY if not (r.model.name == "m200" and r.recompute == "full" and r.micro_batch > 1)]


@pytest.mark.parametrize("row", WITHIN_15, ids=lambda r: r.label)
def test_the_planner_predicts_the_h200_peak_within_15_percent(row):
    assert planned_gib(row) / row.peak_gib == pytest.approx(1.0, abs=0.15)


def test_every_h200_row_is_closer_than_the_published_formulas_were():
    """Before: 16 bytes per parameter plus Korthikanti's 34*s*b*h per layer gave 0.44-0.85 of every peak."""
    ratios = [planned_gib(r) / r.peak_gib for r in H200_MEMORY]
    assert min(ratios) > 0.78 and max(ratios) < 1.13
    assert sum(abs(1 - x) < 0.15 for x in ratios) == len(WITHIN_15) == 6


def test_the_chunked_loss_takes_the_logits_off_the_peak():
    row = H200_MEMORY[0]  # the Llama 3.2 1B shape, micro-batch 8: transformers' loss holds 12 bytes x 128,256 x 16,384
    full = memory.peak_bytes(row.model, ParallelConfig(), 1, 8, 2048, loss="full")
    chunked = memory.peak_bytes(row.model, ParallelConfig(), 1, 8, 2048, loss="chunked")
    assert full["activations_logits"] == 12 * 128256 * 16384
    assert chunked["activations_logits"] < full["activations_logits"] / 7  # 3.0 GiB against 23.5
    assert sum(full.values()) - sum(chunked.values()) > 20 * GiB


def test_layer_bytes_follow_the_tensors_autocast_keeps():
    """30h + 4kv + 8f + 4a + 8 per token under autocast: the Llama 3.2 1B shape keeps 129,160 bytes per token."""
    row = H200_MEMORY[0]
    assert memory.layer_bytes_per_token(row.model, "autocast") == 30 * 2048 + 4 * 512 + 8 * 8192 + 4 * 32 + 8
    assert memory.layer_bytes_per_token(row.model, "bf16") == 20 * 2048 + 4 * 512 + 8 * 8192 + 4 * 32 + 8


def test_an_unknown_loss_is_refused():
    with pytest.raises(compute.PlanError, match="loss must be one of chunked, full"):
        memory.peak_bytes(H200_MEMORY[0].model, ParallelConfig(), loss="fused")


# ---------------------------------------------------------------- measured here, on the CPU


def _cpu_peak(model, x, steps_fn):
    """Bytes allocated above what existed before, at the peak of steps_fn (the profiler's allocation events)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        steps_fn()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    current = peak = 0
    for e in events:
        current += e.nbytes()
        peak = max(peak, current)
    return peak


@pytest.mark.parametrize("recompute,loss", [("none", "full"), ("full", "full"), ("none", "chunked")])
def test_the_planner_matches_the_engines_step_measured_on_a_cpu(recompute, loss):
    """One forward and backward of the engine's model (pretraining attention, autocast bf16, the chosen loss and
    checkpointing), the model states already in place: what it allocates at its peak is the planner's peak less
    the states (the fp32 weights, Adam's moments and the gradients) within 3%."""
    import torch

    from fmlab.models import build_model, use_pretraining_attention
    from fmlab.parallel.activations import apply_activation_checkpointing
    from fmlab.train.loss import use_chunked_loss

    m = ModelPreset("probe", "llama", hidden=256, layers=3, heads=4, vocab=8000, seq_len=512, intermediate=704,
                    kv_heads=1)
    model = build_model(m)
    use_pretraining_attention(model)
    if loss == "chunked":
        use_chunked_loss(model)
    apply_activation_checkpointing(model, recompute)
    x = torch.randint(0, m.vocab, (2, 512))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(input_ids=x, labels=x).loss
        out.backward()

    measured = _cpu_peak(model, x, step)
    parts = memory.peak_bytes(m, ParallelConfig(activation_checkpointing=recompute), 1, 2, 512, loss=loss,
                              precision="autocast")
    allocated_in_step = sum(parts.values()) - parts["weights"] - parts["optimizer"] - parts["gradients"]
    assert allocated_in_step / measured == pytest.approx(1.0, abs=0.03)


# ---------------------------------------------------------------- the compiled engine


def _saved_bytes_per_token(layer, call, batch: int, seq: int) -> float:
    """What a decoder layer saves for its backward (autograd's saved-tensor hooks), per token: every saved tensor
    with a batch or token dimension first (not the weights' bf16 copies, not the rotary tables shared by layers)."""
    import torch

    seen, total = set(), 0
    weights = {p.data_ptr() for p in layer.parameters()}

    def pack(t):
        nonlocal total
        key = (t.untyped_storage().data_ptr(), t.dtype)
        if key not in seen and t.data_ptr() not in weights and t.dim() and t.shape[0] in (batch, batch * seq):
            seen.add(key)
            total += t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = call()
    (out[0] if isinstance(out, tuple) else out).float().sum().backward()
    return total / (batch * seq)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "opt"])
def test_a_compiled_layer_keeps_what_the_planner_books(family):
    """torch.compile (inductor) on this CPU, each layer as the engine compiles it: the bytes it saves per token are
    memory.layer_bytes_per_token(..., compiled=True) within 2% (eager: the long-measured formula, within 2% too)."""
    import torch

    from fmlab.models import build_model, use_pretraining_attention

    m = (ModelPreset("probe", "llama", hidden=256, layers=1, heads=8, vocab=512, seq_len=256, intermediate=704,
                     kv_heads=2) if family == "llama"
         else ModelPreset("probe", "opt", hidden=256, layers=1, heads=8, vocab=512, seq_len=256))
    model = build_model(m)
    use_pretraining_attention(model)
    layer = model.model.layers[0] if family == "llama" else model.model.decoder.layers[0]
    batch, seq = 2, 256
    x = torch.randn(batch, seq, m.hidden, requires_grad=True)
    kwargs = {}
    if family == "llama":
        kwargs["position_embeddings"] = model.model.rotary_emb(x, torch.arange(seq).unsqueeze(0))
    torch.manual_seed(0)
    eager = _saved_bytes_per_token(layer, lambda: layer(x, **kwargs), batch, seq)
    compiled_layer = torch.compile(layer)
    compiled = _saved_bytes_per_token(layer, lambda: compiled_layer(x, **kwargs), batch, seq)
    assert eager == pytest.approx(memory.layer_bytes_per_token(m, "autocast"), rel=0.02)
    assert compiled == pytest.approx(memory.layer_bytes_per_token(m, "autocast", compiled=True), rel=0.02)
    assert compiled < 0.9 * eager


def test_the_planner_predicts_the_compiled_engines_gpu_peaks_within_15_percent():
    """The compiled rows of one H100 and one H200 (fmlab.plan.gpu_measurements.ENGINE_SPEED: the engine under --compile
    true, its chunked loss): with compiled=True the planner is within 15% of each; eager booking overstates them."""
    from fmlab.plan.gpu_measurements import ENGINE_SPEED, LLAMA_1B

    rows = [r for r in ENGINE_SPEED if r.contender.startswith("fmlab engine compiled, chunked loss")
            or r.contender.startswith("fmlab engine compiled, 256 MiB chunks")]
    assert len(rows) >= 5
    for r in rows:
        recompute = ("full" if "full recomputation" in r.contender
                     else "selective" if "selective" in r.contender else "none")
        cfg = ParallelConfig(activation_checkpointing=recompute)
        planned = sum(memory.peak_bytes(LLAMA_1B, cfg, 1, r.micro_batch, 2048, loss="chunked", grad_accum=1,
                                        compiled=True).values()) / GiB
        assert planned / r.peak_gib == pytest.approx(1.0, abs=0.15), (r.card, r.contender, planned, r.peak_gib)
        if recompute == "none":
            eager = sum(memory.peak_bytes(LLAMA_1B, cfg, 1, r.micro_batch, 2048, loss="chunked",
                                          grad_accum=1).values()) / GiB
            assert eager > 1.2 * r.peak_gib  # what the planner booked before it knew the compiled engine
