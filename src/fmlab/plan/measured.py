"""Measured peaks and speeds of fmlab's engine on real GPUs: the outside reference the planner is held against.

    from fmlab.plan.measured import H200_MEMORY, H200_THROUGHPUT
    [(r.label, r.micro_batch, r.recompute, r.peak_gib) for r in H200_MEMORY]

Each row is data with its source and the date it was measured, like the catalog's instance specs. The planner's
prediction for every memory row is checked in tests/plan/test_memory.py; notebooks 01, 05 and 07 show them side
by side. To add rows: run benchmarks/gpu_step.py on a GPU and copy its JSON rows here with the card, PyTorch
version and date.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmlab.plan.catalog import ModelPreset

SOURCE_H200 = ("fmlab at commit bce155c on one NVIDIA H200 (139 GiB), PyTorch 2.11.0+cu130, transformers 5.17.0, "
               "one process, autocast bf16, fp32 master weights, fused AdamW, eager; peak = "
               "torch.cuda.max_memory_allocated over the run: ../shared/gpu/h200-2026-11-26.md, measured 2026-11-26")

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
MATMUL_CEILING_MFU = 0.802  # an 8192^3 bf16 matmul on the same card: 793 TFLOP/s, the practical ceiling
