"""Parallel layouts and the memory each device needs: will this run fit?

A layout (fmlab.plan.parallelism.ParallelConfig, the one the engine and the jobs read too) splits the world of
devices into tensor-parallel groups (T), pipeline stages (P) and data-parallel replicas (the rest), and says how
the data-parallel replicas shard the model states (nothing, ZeRO-1/2, full FSDP sharding, or hybrid sharding
within groups of D), and what each layer recomputes.

    >>> from fmlab.plan.layout import make_plan
    >>> from fmlab.plan.parallelism import ParallelConfig
    >>> p = make_plan("gpt-30b", tokens=300e9, instance="ml.p4d.24xlarge", instances=16,
    ...               parallel=ParallelConfig(sharding="full", activation_checkpointing="full"))
    >>> p.fits
    True

Sources:
- model states, 2 + 2 + 12 bytes per parameter for mixed-precision Adam, and ZeRO stages 1-3:
  Rajbhandari et al. 2020 (ZeRO), section 3 and Figure 1.
- activation memory per layer, s*b*h*(34 + 5*a*s/h) bytes with eager attention, 34*s*b*h with a fused kernel,
  and full recomputation's 2*s*b*h: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models", Table 2; the fused kernel's O(s) memory: Dao et al. 2022 (FlashAttention), section 3.
- time: recomputation adds hardware FLOPs (`compute.hardware_flops_per_token`), so at the same hardware
  utilisation (HFU) the run takes longer and its MFU falls: Chowdhery et al. 2022 (PaLM), Appendix B.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field

from fmlab.plan import catalog, compute, memory, parallelism
from fmlab.plan.catalog import GB, Instance, ModelPreset
from fmlab.plan.compute import PlanError
from fmlab.plan.parallelism import ParallelConfig

SHARDING_CHOICES = parallelism.SHARDINGS  # none | zero1 | zero2 | full | hybrid (with hybrid_shard_degree)
RECOMPUTE_CHOICES = compute.RECOMPUTE_CHOICES  # none | selective (keep matmul outputs) | full | offload
# "eager": attention materialises the a x s x s score and softmax tensors and keeps them for backward (the
# Korthikanti formula); "flash": a fused kernel (FlashAttention, PyTorch SDPA) recomputes them in its backward
# and keeps only O(s) statistics, so the 5as/h term disappears (Dao et al. 2022, FlashAttention, section 3).
ATTENTION_CHOICES = ("eager", "flash")
WEIGHT_BYTES, GRAD_BYTES, OPTIMIZER_BYTES = 2, 2, 12  # bf16 weights and grads; fp32 master + Adam m, v
# The largest global batch the layout rule accepts, in tokens per optimizer step: Llama 2 trained with 4M
# (Touvron et al. 2023, "Llama 2", section 2.2), module 6's `max_batch_tokens`. Sharded data parallelism puts at
# least one sequence on every replica, so its smallest global batch grows with the cluster.
GLOBAL_BATCH_LIMIT_TOKENS = 4 * 2**20
USABLE_FRACTION = 0.9  # leave ~10% of device memory for the framework, allocator slack and buffers


# ---------------------------------------------------------------- memory


def model_state_bytes(params: float, cfg: ParallelConfig, world: int) -> dict[str, float]:
    """Weights, gradients and optimizer state on ONE of `world` devices, in bytes (ZeRO paper, section 3)."""
    local = params / (cfg.tp * cfg.pp)
    s = cfg.shard_degree(world)
    w, g, o = WEIGHT_BYTES * local, GRAD_BYTES * local, OPTIMIZER_BYTES * local
    if cfg.sharding == "zero1":
        o /= s
    elif cfg.sharding == "zero2":
        g, o = g / s, o / s
    elif cfg.sharding in ("full", "hybrid"):
        w, g, o = w / s, g / s, o / s
    return {"weights": w, "gradients": g, "optimizer": o}


def saved_matmul_width(m: ModelPreset) -> int:
    """Per token, the widths of the outputs selective checkpointing keeps in one layer: every matrix multiply
    (q, k, v, attention's output projection, the MLP's) and the attention kernel's output."""
    head_dim = m.hidden // m.heads
    kv = 2 * m.n_kv_heads * head_dim
    mlp = 2 * m.ffn + m.hidden if m.family == "llama" else m.ffn + m.hidden  # SwiGLU: gate and up, then down
    return m.hidden + kv + m.hidden + m.hidden + mlp  # q, k and v, attention output, o_proj, MLP


def activation_bytes_per_layer(m: ModelPreset, micro_batch: int, seq_len: int, tp: int = 1,
                               recompute: str = "none", attention: str = "flash") -> float:
    """Activations one transformer layer keeps for backward, 16-bit, with sequence parallelism when tp > 1.

    - "none": Korthikanti et al. 2022, Table 2, s*b*h*(34 + 5as/h)/t. The 5as/h term is the a x s x s scores,
      softmax and dropout that eager attention keeps; a fused kernel (attention="flash": FlashAttention,
      PyTorch SDPA) recomputes them in its backward, so it keeps 34*s*b*h/t. (That recomputation of the
      attention core is what Korthikanti et al. call "selective"; under a fused kernel it comes for free.)
    - "selective": the engine's op-level policy (fmlab.parallel.activations, torchtitan's): keep the layer's
      input and the outputs of its matrix multiplies and attention kernel, recompute the element-wise ops
      (norms, activations, residual adds, dropout): 2*s*b*(h + saved_matmul_width)/t.
    - "full": only the layer input, 2*s*b*h/t; "offload" moves even that input to host memory.
    """
    if attention not in ATTENTION_CHOICES:
        raise PlanError(f"attention must be one of {', '.join(ATTENTION_CHOICES)}, not {attention!r}")
    s, b, h, a = seq_len, micro_batch, m.hidden, m.heads
    if recompute == "none":
        scores = 5 * a * s / h if attention == "eager" else 0.0
        return s * b * h * (34 + scores) / tp
    if recompute == "selective":
        scores = 5 * a * s / h if attention == "eager" else 0.0  # eager attention's scores are matmul outputs too
        return s * b * (2 * (h + saved_matmul_width(m)) + h * scores) / tp
    if recompute in ("full", "offload"):
        return 2 * s * b * h / tp
    raise PlanError(f"recompute must be one of {', '.join(RECOMPUTE_CHOICES)}, not {recompute!r}")


def activation_bytes(m: ModelPreset, micro_batch: int, seq_len: int, tp: int = 1, recompute: str = "none",
                     offload_horizon: int = 2, attention: str = "flash") -> dict[str, float]:
    """Activation memory on the busiest device (the first pipeline stage, which holds p micro-batches of
    L/p layers under 1F1B: the same as L layers of one micro-batch)."""
    per_layer = activation_bytes_per_layer(m, micro_batch, seq_len, tp, recompute, attention)
    full_layer = activation_bytes_per_layer(m, micro_batch, seq_len, tp, "none", attention)
    if recompute == "offload":
        stored = per_layer * min(offload_horizon, m.layers)  # only the prefetch window stays on device
    else:
        stored = per_layer * m.layers
    # While a recomputed layer runs its backward, its full activations exist for that one layer.
    working = full_layer if recompute in ("full", "offload", "selective") else 0.0
    logits = 4 * seq_len * micro_batch * m.vocab / tp  # fp32 logits for the cross-entropy
    return {"stored": stored, "working": working, "logits": logits}


@dataclass
class TrainingPlan:
    """Everything `fmlab plan` prints: size, compute, time, cost and memory per device."""

    model: str
    params: int
    tokens: float
    train_flops: float
    instance: str
    instances: int
    devices: int
    mfu: float  # model FLOPs / (time x peak): lower than hfu when recomputation re-runs the forward
    hfu: float  # hardware FLOPs / (time x peak): what the devices sustain, the planner's `mfu` input
    days: float
    cost_usd: float
    parallel: ParallelConfig  # the layout, as the engine and the jobs take it (plan.parallel.dp(plan.devices), ...)
    micro_batch: int
    seq_len: int
    memory_gb_per_device: float
    memory_breakdown_gb: dict
    device_memory_gb: float
    usable_memory_gb: float
    fits: bool
    checkpoint_gb: dict
    price_note: str
    suggestions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def require_fit(self) -> TrainingPlan:
        """Raise PlanError with the changes that would make it fit, unless it fits."""
        if not self.fits:
            fixes = "; ".join(self.suggestions) or "use a larger-memory instance or a smaller model"
            raise PlanError(
                f"{self.model} needs {self.memory_gb_per_device:.1f} GB per device but {self.instance} offers "
                f"{self.usable_memory_gb:.1f} usable GB: {fixes}")
        return self


def checkpoint_gb(params: float) -> dict:
    """Size of a full training checkpoint (fp32 master weights + Adam moments) and of a bf16 export."""
    return {"training": params * OPTIMIZER_BYTES / GB, "bf16_weights": params * WEIGHT_BYTES / GB}


def memory_per_device(m: ModelPreset, cfg: ParallelConfig, world: int, micro_batch: int = 1,
                      seq_len: int | None = None, attention: str = "flash", loss: str = "chunked",
                      precision: str | None = None, grad_accum: int | None = None) -> dict[str, float]:
    """Bytes on one of `world` devices at the training step's peak, by part, as fmlab's engine keeps them
    (fmlab.plan.memory: fp32 master weights, gradients and Adam, autocast's bf16 copies, DDP's buckets, the
    activations a transformers model really keeps, the loss's logits). `loss`: the engine's "chunked" (default)
    or transformers' "full"; `precision`: autocast | bf16 (FSDP's parameters) | fp32, default as the engine runs
    the layout on a GPU; `grad_accum`: micro-batches per step (1: the gradients are made after the peak; more, or
    None, books them). attention="eager" adds the a x s x s tensors eager attention keeps (Korthikanti's 5as/h)."""
    if attention not in ATTENTION_CHOICES:
        raise PlanError(f"attention must be one of {', '.join(ATTENTION_CHOICES)}, not {attention!r}")
    seq_len = seq_len or m.seq_len
    parts = memory.peak_bytes(m, cfg, world, micro_batch, seq_len, loss=loss, precision=precision,
                              grad_accum=grad_accum)
    if attention == "eager" and cfg.recompute in ("none", "selective"):
        parts["activations_stored"] += 5 * m.heads * seq_len * seq_len * micro_batch * m.layers / (cfg.tp * cfg.pp)
    return parts


def make_plan(model: ModelPreset | str, tokens: float, instance: Instance | str, instances: int, *,
              parallel: ParallelConfig | None = None, mfu: float = 0.4, micro_batch: int = 1,
              seq_len: int | None = None, suggest: bool = True, attention: str = "flash") -> TrainingPlan:
    """Plan one run; raises PlanError for an impossible layout, returns fits=False for one too big.

    The layout is `parallel`, the ParallelConfig the engine and the jobs take (None: plain data parallelism);
    its activation_checkpointing and activation_offloading say how the activations are saved."""
    m = catalog.model(model) if isinstance(model, str) else model
    inst = catalog.instance(instance) if isinstance(instance, str) else instance
    if parallel is None:
        parallel = ParallelConfig()
    elif not isinstance(parallel, ParallelConfig):
        raise PlanError(f"parallel must be a ParallelConfig (fmlab.plan.parallelism), got {type(parallel).__name__}")
    for name, value in (("instances", instances), ("micro_batch", micro_batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PlanError(f"{name} must be a whole number of at least 1, got {value!r}")
    if seq_len is not None and (isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1):
        raise PlanError(f"seq_len must be a whole number of tokens of at least 1 (or None: the preset's "
                        f"{m.seq_len}), got {seq_len!r}")
    world = instances * inst.accelerators
    parallel.check(world, m)
    seq_len = seq_len or m.seq_len
    run = compute.estimate_run(m, tokens, inst, instances, mfu, parallel.recompute)
    parts = memory_per_device(m, parallel, world, micro_batch, seq_len, attention=attention)
    total_gb = sum(parts.values()) / GB
    usable = inst.device_memory_gb * USABLE_FRACTION
    plan = TrainingPlan(
        model=m.name, params=run.params, tokens=tokens, train_flops=run.train_flops, instance=inst.name,
        instances=instances, devices=run.devices, mfu=run.mfu, hfu=run.hfu, days=run.days, cost_usd=run.cost_usd,
        parallel=parallel, micro_batch=micro_batch, seq_len=seq_len, memory_gb_per_device=total_gb,
        memory_breakdown_gb={k: v / GB for k, v in parts.items()}, device_memory_gb=inst.device_memory_gb,
        usable_memory_gb=usable, fits=total_gb <= usable, checkpoint_gb=checkpoint_gb(run.params),
        price_note=(f"${inst.price_per_hour}/h per instance, {inst.price_basis}, {inst.price_region}, read "
                    f"{inst.price_date}" if inst.price_known
                    else f"no cost: {inst.name} has no published price ({inst.price_basis})"),
    )
    if not plan.fits and suggest:
        plan.suggestions = suggest_fixes(m, tokens, inst, instances, parallel, mfu=mfu, micro_batch=micro_batch,
                                         seq_len=seq_len, attention=attention)
    return plan


def _with(cfg: ParallelConfig, recompute: str | None = None, **changes) -> ParallelConfig:
    """`cfg` with some fields changed; `recompute` as a planner table names it (ParallelConfig.with_recompute)."""
    out = dataclasses.replace(cfg, **changes)
    return out.with_recompute(recompute) if recompute is not None else out


def suggest_fixes(m: ModelPreset, tokens: float, inst: Instance, instances: int, cfg: ParallelConfig,
                  **settings) -> list[str]:
    """Single changes to the plan that make it fit, cheapest to try first."""
    tries: list[tuple[str, dict]] = []
    if cfg.sharding != "full":
        tries.append(("shard the model states across all data-parallel ranks (--sharding full)",
                      {"sharding": "full", "hybrid_shard_degree": 0}))
    for r in ("selective", "full", "offload"):
        if RECOMPUTE_CHOICES.index(r) > RECOMPUTE_CHOICES.index(cfg.recompute):
            tries.append((f"recompute activations ({_flags(r)})", {"recompute": r}))
    tp = cfg.tp
    while tp * 2 <= inst.accelerators:
        tp *= 2
        tries.append((f"tensor parallelism within the node (--tp {tp})", {"tp": tp}))
    for extra in (2, 4):
        tries.append((f"{instances * extra} instances instead of {instances}", {"instances": instances * extra}))
    out = []
    for text, change in tries:
        n = change.pop("instances", instances)
        try:
            if make_plan(m, tokens, inst, n, parallel=_with(cfg, **change), suggest=False, **settings).fits:
                out.append(text)
        except PlanError:
            continue
        if len(out) == 3:
            break
    if not out:
        out.extend(_combined_fix(m, tokens, inst, instances, _with(cfg, "full", sharding="full",
                                                                   hybrid_shard_degree=0), settings))
    return out


def _combined_fix(m: ModelPreset, tokens: float, inst: Instance, instances: int, both: ParallelConfig,
                  settings: dict) -> list[str]:
    """When no single change is enough: full sharding + full recompute, then the instance count that fits."""
    n = instances
    while n <= instances * 64:
        try:
            if make_plan(m, tokens, inst, n, parallel=both, suggest=False, **settings).fits:
                if n == instances:
                    return [f"shard and recompute together (--sharding full {_flags('full')})"]
                return [f"shard and recompute together on at least {n} instances "
                        f"(--sharding full {_flags('full')} --count {n})"]
        except PlanError:
            pass
        n *= 2
    return [f"{m.name} does not fit on {inst.name} even fully sharded with recomputation on {instances * 64} "
            f"instances: use a larger-memory instance or tensor/pipeline parallelism"]


def _flags(recompute: str) -> str:
    """The flags of `fmlab plan` and `fmlab.train` that save activations as a table's `recompute` word says."""
    cfg = ParallelConfig().with_recompute(recompute)
    return f"--activation-checkpointing {cfg.activation_checkpointing}" + (
        " --activation-offloading true" if cfg.activation_offloading else "")


def candidates(model: ModelPreset | str, tokens: float, instance: Instance | str, instances: int, *,
               hybrid_degrees=(0, 8, 16, 32, 64), tps=(1, 2, 4, 8), recomputes=RECOMPUTE_CHOICES,
               micro_batch: int = 1, attention: str = "flash", mfu: float = 0.4) -> list[dict]:
    """Every buildable layout of the given choices as a table row: memory per device by part, whether it
    fits, and what it costs in extra compute (recomputation) and communication (TP, shard degree); "parallel"
    holds the row's ParallelConfig, ready for a job (the `parallel` of its TrainConfig: fmlab.jobs.sharded).
    `hybrid_degrees`: shard group sizes, 0 for full sharding (one group of every data-parallel rank).
    Layouts the cluster cannot form (a degree that does not divide it) are left out."""
    m = catalog.model(model) if isinstance(model, str) else model
    rows = []
    for degree in hybrid_degrees:
        for tp in tps:
            for recompute in recomputes:
                try:
                    layout = ParallelConfig(sharding="hybrid" if degree else "full", hybrid_shard_degree=degree,
                                            tp=tp).with_recompute(recompute)
                    p = make_plan(m, tokens, instance, instances, parallel=layout, micro_batch=micro_batch,
                                  attention=attention, mfu=mfu, suggest=False)
                except PlanError:
                    continue
                parts = p.memory_breakdown_gb
                rows.append({"sharding": p.parallel.sharding, "shard degree": p.parallel.shard_degree(p.devices), "tp": tp,
                             "recompute": recompute, "states GB": parts["weights"] + parts["gradients"]
                             + parts["optimizer"], "activations GB": sum(v for k, v in parts.items()
                                                                         if k.startswith("activations")),
                             "GB per device": p.memory_gb_per_device, "usable GB": p.usable_memory_gb,
                             "fits": p.fits, "extra compute": compute.recompute_overhead(m, recompute),
                             "global batch tokens": global_batch_tokens(p.devices, tp, 1, micro_batch, p.seq_len),
                             "parallel": p.parallel})
    return rows


def global_batch_tokens(devices: int, tp: int = 1, pp: int = 1, micro_batch: int = 1, seq_len: int = 4096,
                        grad_accum: int = 1) -> int:
    """Tokens per optimizer step: data-parallel replicas (devices / (tp x pp)) x micro-batch x accumulation x
    sequence length. The smallest a layout can have is with micro-batch 1 and no accumulation."""
    if devices < 1 or tp < 1 or pp < 1 or devices % (tp * pp):
        raise PlanError(f"tp x pp = {tp} x {pp} must divide the {devices} devices")
    return devices // (tp * pp) * micro_batch * grad_accum * seq_len


def choose(rows: list[dict], max_global_batch_tokens: int = GLOBAL_BATCH_LIMIT_TOKENS) -> dict:
    """The course's rule among layouts that fit and keep the global batch within `max_global_batch_tokens`
    (module 6: sharded data parallelism grows the batch with the cluster; tensor parallelism divides it):

    1. least recomputation (it costs compute on every step);
    2. then no tensor parallelism (it all-reduces activations inside every layer, twice each way);
    3. then the smallest shard degree. Not for bytes: a group of D GPUs gathers and reduce-scatters (D-1)/D of
       every layer per GPU, so groups of 64 and 128 move about the same bytes (module 5's traffic model,
       `plan.scaling.hybrid_traffic`: per node, about one GPU's ring traffic), and hybrid sharding adds a
       cross-replica all-reduce. For the size
       of each collective group: a ring over fewer GPUs has fewer latency steps, each layer waits for fewer
       stragglers, and the groups' collectives run side by side (the MiCS idea behind SMP's sharded data
       parallelism: shard over the smallest group that holds the states).

    Rows without "global batch tokens" are not held to the limit. Raises PlanError when nothing qualifies."""
    fitting = [r for r in rows if r["fits"]]
    if not fitting:
        raise PlanError("no candidate layout fits: add instances, use a larger-memory instance, or allow "
                        "recomputation, offloading or tensor parallelism")
    within = [r for r in fitting if r.get("global batch tokens", 0) <= max_global_batch_tokens]
    if not within:
        smallest = min(r["global batch tokens"] for r in fitting)
        raise PlanError(f"every layout that fits has a global batch above {max_global_batch_tokens:,} tokens "
                        f"(the smallest: {smallest:,}): allow a larger tensor-parallel degree or pipeline "
                        "stages, which divide the data-parallel replicas, or use fewer devices")
    return min(within, key=lambda r: (r["extra compute"], RECOMPUTE_CHOICES.index(r["recompute"]), r["tp"],
                                      r["shard degree"]))
