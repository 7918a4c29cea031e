"""Measured peaks and speeds of fmlab's engine on real GPUs: the outside reference the planner is held against.

    from fmlab.plan.gpu_measurements import H100_MEMORY, H200_MEMORY, ENGINE_SPEED
    [(r.label, r.micro_batch, r.recompute, r.peak_gib) for r in H100_MEMORY]

Each row is data with its source and the date it was measured, like the catalog's instance specs. The planner's
prediction for every memory row is checked in tests/plan/test_memory.py; notebooks 01, 05 and 07 show them side
by side. To add rows: run benchmarks/gpu_step.py on a GPU and copy its JSON rows here with the card, PyTorch
version and date.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmlab.plan import compute, speed
from fmlab.plan.catalog import ModelPreset
from fmlab.plan.layout import memory_per_device
from fmlab.plan.parallelism import ParallelConfig

SOURCE_H200 = ("fmlab at commit bce155c on one NVIDIA H200 (139 GiB), PyTorch 2.11.0+cu130, transformers 5.17.0, "
               "one process, autocast bf16, fp32 master weights, fused AdamW, eager; peak = "
               "torch.cuda.max_memory_allocated over the run: docs/measurements/h200-2026-11-26.md, measured 2026-11-26")

SOURCE_GPU_STEP = ("benchmarks/gpu_step.py (fmlab at commit c94e1cb, whose eager full-loss path is today's) "
                   "{card}, PyTorch 2.11.0+cu130, transformers 5.17.0: one process, autocast bf16, fp32 master "
                   "weights, fused AdamW, no checkpoint or export; peak = torch.cuda.max_memory_allocated; "
                   "benchmarks/README.md, measured 2026-11-26")
SOURCE_H100 = SOURCE_GPU_STEP.format(card="on one NVIDIA H100 80GB HBM3 (700 W)")
SOURCE_H200_COMPILED = SOURCE_GPU_STEP.format(card="on one NVIDIA H200 (700 W), after the compiled chunked loss")

# The shapes measured (untied head, as fmlab.models builds a Llama)
LLAMA_1B = ModelPreset("llama-3.2-1b-shape", "llama", hidden=2048, layers=16, heads=32, vocab=128256, seq_len=2048,
                       intermediate=8192, kv_heads=8, source=SOURCE_H200)
M200 = ModelPreset("m200", "llama", hidden=1024, layers=12, heads=16, vocab=32000, seq_len=2048, intermediate=2816,
                   kv_heads=4, source=SOURCE_H200)


@dataclass(frozen=True)
class MeasuredPeak:
    """The engine's peak device memory for one model, micro-batch and recompute mode (loss: transformers')."""

    model: ModelPreset
    micro_batch: int
    recompute: str  # none | full
    peak_gib: float  # 2^30 bytes, as torch.cuda reports
    seq_len: int = 2048
    loss: str = "full"  # the engine at bce155c had transformers' loss only
    card: str = "NVIDIA H200"
    source: str = SOURCE_H200

    @property
    def label(self) -> str:
        return f"{self.model.name} b={self.micro_batch} recompute={self.recompute}"


# The engine as it is (benchmarks/gpu_step.py --contenders engine --compile false --loss full --steps 3). Against
# the bce155c rows above, the rows with full recomputation are lower by 4 bytes per parameter exactly (5.58 GiB at
# the 1B shape, 0.6 at m200) and the rows without it are equal or lower: that run held a gradient-sized fp32
# tensor at its peak which this one does not (it ran 20 steps with the engine's defaults; this one 3 steps).
H100_MEMORY: tuple[MeasuredPeak, ...] = tuple(
    MeasuredPeak(model, b, recompute, gib, card="NVIDIA H100 80GB HBM3", source=SOURCE_H100)
    for model, b, recompute, gib in (
        (LLAMA_1B, 8, "none", 74.44), (LLAMA_1B, 8, "full", 43.10),
        (M200, 1, "none", 4.74), (M200, 1, "full", 3.45), (M200, 4, "none", 10.69), (M200, 4, "full", 5.79),
        (M200, 16, "none", 34.61), (M200, 16, "full", 15.94)))

H200_MEMORY: tuple[MeasuredPeak, ...] = (
    MeasuredPeak(LLAMA_1B, 8, "none", 74.44),
    MeasuredPeak(LLAMA_1B, 8, "full", 48.68),
    MeasuredPeak(M200, 1, "none", 4.74),
    MeasuredPeak(M200, 1, "full", 4.23),
    MeasuredPeak(M200, 4, "none", 12.25),
    MeasuredPeak(M200, 4, "full", 8.12),
    MeasuredPeak(M200, 16, "none", 37.73),
    MeasuredPeak(M200, 16, "full", 19.83),
)


@dataclass(frozen=True)
class MeasuredSpeed:
    """Tokens per second of one contender at the Llama 3.2 1B shape, micro-batch x 2,048 tokens."""

    contender: str
    micro_batch: int
    tokens_per_s: float
    mfu: float  # of 989 TFLOP/s, the H100/H200 dense bf16 peak
    peak_gib: float | None
    card: str = "NVIDIA H200"
    source: str = SOURCE_H200


H200_THROUGHPUT: tuple[MeasuredSpeed, ...] = (
    MeasuredSpeed("fmlab engine, eager", 8, 47579, 0.395, 74.4),
    MeasuredSpeed("fmlab engine, eager, full recomputation", 8, 39078, 0.325, 48.7),
    MeasuredSpeed("bare eager loop (transformers sdpa, autocast, fused AdamW)", 8, 46634, 0.388, 85.6),
    MeasuredSpeed("bare loop under torch.compile(model)", 8, 57198, 0.475, 53.1),
    MeasuredSpeed("bare loop compiled, matmul precision high", 8, 57762, 0.480, 53.1),
    MeasuredSpeed("bare loop compiled, matmul precision high", 16, 59857, 0.498, 87.0),
    MeasuredSpeed("fmlab engine, each layer compiled, matmul precision high", 8, 62426, 0.519, 62.4),
    MeasuredSpeed("fmlab engine, each layer compiled, matmul precision high", 16, 64258, 0.534, 111.4),
)

# The engine as it is, at the same shape (benchmarks/gpu_step.py; matmul precision "high"; recompute none unless
# named). The compiled engine is --compile true: each decoder layer compiled, and the chunked loss's softmax too.
ENGINE_SPEED: tuple[MeasuredSpeed, ...] = tuple(
    MeasuredSpeed(contender, b, tps, mfu, gib, card=card, source=SOURCE_H200_COMPILED if card == "NVIDIA H200"
                  else SOURCE_H100)
    for card, contender, b, tps, mfu, gib in (
        ("NVIDIA H200", "fmlab engine compiled, chunked loss (8 chunks: the default)", 8, 64543, 0.536, 41.11),
        ("NVIDIA H200", "fmlab engine compiled, chunked loss (16 chunks of 1 GiB)", 16, 67628, 0.562, 61.14),
        ("NVIDIA H200", "fmlab engine compiled, chunked loss (32 chunks of 256 MiB)", 8, 58565, 0.487, 40.74),
        ("NVIDIA H200", "fmlab engine compiled, transformers' loss", 8, 61622, 0.512, 62.44),
        ("NVIDIA H200", "bare loop under torch.compile(model)", 8, 58227, 0.484, 53.08),
        ("NVIDIA H200", "bare loop under torch.compile(model)", 16, 60245, 0.501, 87.04),
        ("NVIDIA H100 80GB HBM3", "fmlab engine eager, chunked loss (256 MiB chunks)", 8, 38369, 0.319, 52.74),
        ("NVIDIA H100 80GB HBM3", "fmlab engine eager, transformers' loss", 8, 43089, 0.358, 74.44),
        ("NVIDIA H100 80GB HBM3", "fmlab engine eager, transformers' loss, full recomputation", 8, 35496, 0.295,
         43.10),
        ("NVIDIA H100 80GB HBM3", "fmlab engine compiled, chunked loss (256 MiB chunks)", 8, 48988, 0.407, 40.74),
        ("NVIDIA H100 80GB HBM3", "fmlab engine compiled, 256 MiB chunks, selective recomputation", 8, 47576,
         0.395, 31.89),
        ("NVIDIA H100 80GB HBM3", "fmlab engine compiled, 256 MiB chunks, full recomputation", 8, 42860, 0.356,
         23.43),
        ("NVIDIA H100 80GB HBM3", "bare eager loop (transformers sdpa, autocast, fused AdamW)", 8, 42699, 0.355,
         74.44),
        ("NVIDIA H100 80GB HBM3", "bare loop under torch.compile(model)", 8, 55277, 0.459, 53.08),
    ))
MATMUL_CEILING_MFU = 0.802  # an 8192^3 bf16 matmul on the same card: 793 TFLOP/s, the practical ceiling


# ---------------------------------------------------------------- side by side, for the notebooks


def textbook_bytes(row: MeasuredPeak) -> float:
    """What the published formulas give for a measured row: ZeRO's 16 bytes per parameter, Korthikanti's 34*s*b*h
    bytes per layer (full recomputation: each layer's 2*s*b*h input and one layer's 34*s*b*h) and the logits once
    in fp32 (4*s*b*V): the course's planner before it was held against a GPU."""
    m, tokens = row.model, row.micro_batch * row.seq_len
    per_layer = 34 * tokens * m.hidden
    acts = per_layer * m.layers if row.recompute == "none" else 2 * tokens * m.hidden * m.layers + per_layer
    return 16 * compute.param_count(m) + acts + 4 * tokens * m.vocab


def memory_check(rows: tuple[MeasuredPeak, ...] = H100_MEMORY) -> list[dict]:
    """Each measured peak beside the planner's prediction (fmlab.plan.layout.memory_per_device with the row's
    loss and one micro-batch per step, as measured; and without saying the accumulation, which books the
    gradients) and beside the published formulas (textbook_bytes). GiB = 2^30 bytes."""
    out = []
    for r in rows:
        cfg = ParallelConfig(activation_checkpointing=r.recompute)
        planned = sum(memory_per_device(r.model, cfg, 1, r.micro_batch, r.seq_len, loss=r.loss,
                                        grad_accum=1).values()) / 2**30
        booked = sum(memory_per_device(r.model, cfg, 1, r.micro_batch, r.seq_len, loss=r.loss).values()) / 2**30
        textbook = textbook_bytes(r) / 2**30
        out.append({"card": r.card, "model": r.model.name, "micro-batch": r.micro_batch, "recompute": r.recompute,
                    "measured GiB": r.peak_gib, "planner GiB": round(planned, 2),
                    "planner / measured": round(planned / r.peak_gib, 3),
                    "with gradients booked": round(booked / r.peak_gib, 3),
                    "textbook / measured": round(textbook / r.peak_gib, 3)})
    return out


def speed_table(rows: tuple[MeasuredSpeed, ...] = ENGINE_SPEED + H200_THROUGHPUT) -> list[dict]:
    """The measured speeds, one dict per row, the newest first."""
    return [{"card": r.card, "contender": r.contender, "micro-batch": r.micro_batch, "tokens/s": r.tokens_per_s,
             "MFU": r.mfu, "peak GiB": r.peak_gib,
             "measured": "2026-11-26, " + ("fmlab c94e1cb+" if r.source != SOURCE_H200 else "fmlab bce155c")}
            for r in rows]


def kernel_efficiency_measured() -> dict[tuple[str, str], float]:
    """KERNEL_EFFICIENCY's measurement: for each card's bare loop at the Llama 3.2 1B shape, micro-batch 8
    (fmlab.plan.gpu_measurements), compiled ("fused") and eager, the ideal step's time over the measured step's."""
    loops = {"bare loop under torch.compile(model)": "fused",
             "bare eager loop (transformers sdpa, autocast, fused AdamW)": "eager"}
    rows = {(r.card, loops[r.contender]): r for r in H200_THROUGHPUT + ENGINE_SPEED
            if r.contender in loops and r.micro_batch == 8}
    out = {}
    for (card, kernels), row in rows.items():
        gpu = "H200" if "H200" in card else "H100-SXM"
        ideal = speed.step_time(speed.Workload(LLAMA_1B, speed.Hardware(gpu, 1), ParallelConfig(), 8, 8,
                                               kernel_efficiency=1.0))
        measured_s = 8 * LLAMA_1B.seq_len / row.tokens_per_s
        out[(kernels, card)] = (ideal.step_s - ideal.fixed_s) / (measured_s - ideal.fixed_s)
    return out
