"""The serving side of the plan: which instance and tensor-parallel degree hold a model's weights and KV cache,
how fast it decodes, and what an hour and a million tokens cost.

    from fmlab.plan import serving
    serving.serving_table("gpt-30b", context=2048, batch=16)      # one row per instance: fits? TP, tokens/s, $/M
    p = serving.plan_serving("gpt-30b", "ml.p4d.24xlarge", context=2048, batch=16)
    p.tp, p.copies, p.tokens_per_s, p.usd_per_million_tokens

Memory per device, for one copy of the model split over `tp` devices (tensor parallelism splits both):
    weights   = parameters x bytes per parameter (bf16: 2) / tp
    KV cache  = 2 (keys and values) x layers x key/value heads x head dim x bytes x context x batch / tp
and it must fit in `utilization` of the device's memory (vLLM's gpu_memory_utilization, default 0.9; the rest
is activations, CUDA graphs and the runtime). The smallest power-of-two tp that fits, divides the attention
heads and the devices of the instance is chosen; the instance runs devices / tp copies.

Speed: decoding is bound by memory bandwidth (each step reads every weight and the whole KV cache once, and
makes one token per sequence), so one copy decodes about batch x efficiency x tp x bandwidth / (weights + KV)
tokens/s. `efficiency` (0.5 by default) is an assumption: measure your own (module 10's benchmark does it
for the tiny model on a CPU); published vLLM figures on A100s reach 50-70% of peak bandwidth. Prefill is
compute-bound and left out: this is the steady decode rate of a full batch.

Facts (source and date beside each): device memory and bandwidth from the vendors' datasheets; prices are
on-demand us-east-1 SageMaker rates from fmlab.plan.catalog (its training prices, read 2024-06; real-time
inference is billed per instance-hour and assumed to cost the same: check the pricing page's Real-Time
Inference tab before budgeting). The inf2 price is not in the catalog: its cost columns stay empty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fmlab.plan import catalog, compute
from fmlab.plan.compute import PlanError

GB = 1e9
GIB = 2**30
BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp32": 4}
DEFAULT_UTILIZATION = 0.9  # vLLM's --gpu-memory-utilization default (vLLM engine arguments docs)
DEFAULT_EFFICIENCY = 0.5  # assumed share of peak memory bandwidth a decode step achieves


@dataclass(frozen=True)
class ServingInstance:
    """An instance type as a server sees it: devices, memory and bandwidth per device, price."""

    name: str
    accelerator: str
    devices: int  # GPUs, or NeuronCores for Inferentia2 (tensor parallelism splits over cores)
    device_memory_gb: float  # per device, decimal GB
    bandwidth_gb_per_s: float  # per device, decimal GB/s
    price_per_hour: float | None
    source: str = ""


_A10G = "NVIDIA A10 datasheet: 24 GB GDDR6, 600 GB/s (A10G, AWS G5 page)"
_A100_40 = "NVIDIA A100 datasheet via glennklockwood.com/garden/processors/A100 (read 2026-11-23): 40 GB HBM2, 1.555 TB/s"
_A100_80 = "NVIDIA A100 datasheet via glennklockwood.com/garden/processors/A100 (read 2026-11-23): 80 GB HBM2e, 2.039 TB/s"
_H100 = "NVIDIA H100 SXM datasheet: 80 GB HBM3, 3.35 TB/s"
_INF2 = ("AWS Neuron docs, Inferentia2 architecture (awsdocs-neuron.readthedocs-hosted.com, general/arch/neuron-hardware/"
         "inferentia2.html, read 2026-11-23): up to 12 Inferentia2 chips per Inf2 instance, each 2 NeuronCore-v2 and "
         "32 GiB HBM at 820 GiB/s; per NeuronCore: 16 GiB, 410 GiB/s")


def _price(name: str) -> float:
    return catalog.instance(name).price_per_hour


SERVING_INSTANCES: dict[str, ServingInstance] = {
    i.name: i
    for i in [
        ServingInstance("ml.g5.12xlarge", "A10G-24GB", 4, 24, 600, _price("ml.g5.12xlarge"), _A10G),
        ServingInstance("ml.g5.48xlarge", "A10G-24GB", 8, 24, 600, _price("ml.g5.48xlarge"), _A10G),
        ServingInstance("ml.p4d.24xlarge", "A100-40GB", 8, 40, 1555, _price("ml.p4d.24xlarge"),
                        _A100_40 + "; $37.69/h for a real-time endpoint per wring.co, 'SageMaker Inference' (2026-03-15)"),
        ServingInstance("ml.p4de.24xlarge", "A100-80GB", 8, 80, 2039, _price("ml.p4de.24xlarge"), _A100_80),
        ServingInstance("ml.p5.48xlarge", "H100-80GB", 8, 80, 3350, _price("ml.p5.48xlarge"), _H100),
        ServingInstance("ml.inf2.48xlarge", "Inferentia2 NeuronCore-v2", 24, 16 * GIB / GB, 410 * GIB / GB, None, _INF2),
    ]
}


@dataclass(frozen=True)
class ServingPlan:
    """One model on one instance type, for a context and a batch."""

    model: str
    instance: str
    context: int
    batch: int
    dtype: str
    weights_gb: float  # one copy, all devices
    kv_gb: float  # one copy's KV cache for `batch` sequences of `context` tokens
    tp: int | None  # None: does not fit on this instance
    copies: int
    per_device_gb: float  # weights + KV per device at that tp (at the largest tp when it does not fit)
    usable_gb: float
    tokens_per_s: float  # whole instance, steady decode
    price_per_hour: float | None
    why: str = ""

    @property
    def fits(self) -> bool:
        return self.tp is not None

    @property
    def usd_per_million_tokens(self) -> float | None:
        if not self.fits or not self.price_per_hour or not self.tokens_per_s:
            return None
        return self.price_per_hour / (self.tokens_per_s * 3600) * 1e6

    def row(self) -> dict:
        return {"instance": self.instance, "fits": self.fits, "tensor parallel": self.tp, "copies": self.copies,
                "weights GB": round(self.weights_gb, 1), "KV cache GB": round(self.kv_gb, 1),
                "GB per device": round(self.per_device_gb, 1), "usable GB per device": round(self.usable_gb, 1),
                "tokens/s": round(self.tokens_per_s), "$ per hour": self.price_per_hour,
                "$ per 1M tokens": None if self.usd_per_million_tokens is None else round(self.usd_per_million_tokens, 2),
                "why": self.why}


def kv_bytes_per_token(m: catalog.ModelPreset, dtype: str = "bf16") -> float:
    """Bytes of KV cache one token keeps: keys and values, every layer, every key/value head."""
    return 2 * m.layers * m.n_kv_heads * m.head_dim * BYTES[dtype]


def plan_serving(model: str | catalog.ModelPreset, instance: str, context: int, batch: int, dtype: str = "bf16",
                 utilization: float = DEFAULT_UTILIZATION, efficiency: float = DEFAULT_EFFICIENCY) -> ServingPlan:
    """The smallest tensor-parallel degree at which one copy fits, and what the instance then delivers."""
    m = catalog.model(model) if isinstance(model, str) else model
    if instance not in SERVING_INSTANCES:
        raise PlanError(f"no serving facts for {instance!r}: choose one of {', '.join(SERVING_INSTANCES)}")
    if dtype not in BYTES:
        raise PlanError(f"dtype must be one of {', '.join(BYTES)}, not {dtype!r}")
    if context < 1 or batch < 1:
        raise PlanError(f"context and batch must be at least 1 (got {context}, {batch})")
    if context > m.seq_len:
        raise PlanError(f"{m.name} was trained with a context of {m.seq_len} tokens; {context} is longer")
    if not 0 < utilization <= 1 or not 0 < efficiency <= 1:
        raise PlanError("utilization and efficiency are fractions in (0, 1]")
    inst = SERVING_INSTANCES[instance]
    weights = compute.param_count(m) * BYTES[dtype] / GB
    kv = kv_bytes_per_token(m, dtype) * context * batch / GB
    usable = utilization * inst.device_memory_gb
    degrees = [d for d in (1, 2, 4, 8, 16, 32) if d <= inst.devices and inst.devices % d == 0 and m.heads % d == 0]
    tp = next((d for d in degrees if (weights + kv) / d <= usable), None)
    shown = tp or degrees[-1]
    per_device = (weights + kv) / shown
    if tp is None:
        return ServingPlan(m.name, instance, context, batch, dtype, weights, kv, None, 0, per_device, usable, 0.0,
                           inst.price_per_hour, f"needs {per_device:.0f} GB per device even at tp {shown}, has "
                           f"{usable:.0f}: a larger instance, fp8 weights, a shorter context or a smaller batch")
    copies = inst.devices // tp
    step_s = (weights + kv) / (tp * inst.bandwidth_gb_per_s * efficiency)  # one decode step of one copy
    tokens = copies * batch / step_s
    return ServingPlan(m.name, instance, context, batch, dtype, weights, kv, tp, copies, per_device, usable, tokens,
                       inst.price_per_hour, f"tp {tp}: {per_device:.1f} of {usable:.1f} GB per device; "
                       f"{copies} cop{'y' if copies == 1 else 'ies'} per instance")


def serving_table(model: str = "gpt-30b", context: int = 2048, batch: int = 16, dtype: str = "bf16",
                  instances=None, **kwargs):
    """plan_serving on every serving instance, as a DataFrame (one row each)."""
    import pandas as pd

    names = list(instances or SERVING_INSTANCES)
    return pd.DataFrame([plan_serving(model, n, context, batch, dtype, **kwargs).row() for n in names]).set_index(
        "instance")


def cheapest(model: str = "gpt-30b", context: int = 2048, batch: int = 16, dtype: str = "bf16",
             **kwargs) -> ServingPlan:
    """The instance with the lowest cost per million tokens among those that fit and have a price."""
    plans = [plan_serving(model, n, context, batch, dtype, **kwargs) for n in SERVING_INSTANCES]
    priced = [p for p in plans if p.usd_per_million_tokens is not None]
    if not priced:
        raise PlanError(f"{model} fits on none of the priced instances at context {context}, batch {batch}")
    return min(priced, key=lambda p: p.usd_per_million_tokens)


def latency_bound_ms(p: ServingPlan, efficiency: float = DEFAULT_EFFICIENCY) -> float:
    """Time per output token of one sequence at this plan (the decode step), in ms: the inter-token latency."""
    if not p.fits:
        return math.nan
    inst = SERVING_INSTANCES[p.instance]
    return 1000 * (p.weights_gb + p.kv_gb) / (p.tp * inst.bandwidth_gb_per_s * efficiency)


__all__ = ["SERVING_INSTANCES", "ServingInstance", "ServingPlan", "cheapest", "kv_bytes_per_token",
           "latency_bound_ms", "plan_serving", "serving_table"]
