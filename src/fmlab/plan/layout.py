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
import math
from dataclasses import asdict, dataclass, field

from fmlab.plan import catalog, compute, hardware, memory, parallelism, speed
from fmlab.plan.catalog import GB, Instance, ModelPreset
from fmlab.plan.compute import PlanError, RunEstimate
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
USABLE_FRACTION = 0.9  # leave ~10% of device memory for the CUDA context, NCCL's buffers and the framework
# A plan fits only if it also leaves HEADROOM_FRACTION of the usable memory free: the memory model's measured error
# (its predictions are 0.95-1.00 of the engine's CUDA peaks on an H100, fmlab.plan.gpu_measurements: up to 5% under) and the
# caching allocator's fragmentation would otherwise turn a plan at 35.97 of 36 GB into an out-of-memory error.
HEADROOM_FRACTION = 0.05
# The global batch a plan trains with, unless told: GPT-3's batch for the nearest model size (Brown et al. 2020,
# Table 2.1: 0.5M tokens up to 760M parameters, 1M at 1.3B and 2.7B, 2M at 6.7B and 13B, 3.2M at 175B), rounded up
# to whole micro-batches on every data-parallel rank; gradient accumulation makes up the difference.
GPT3_BATCH_TOKENS = ((125e6, 0.5e6), (350e6, 0.5e6), (760e6, 0.5e6), (1.3e9, 1e6), (2.7e9, 1e6), (6.7e9, 2e6),
                     (13e9, 2e6), (175e9, 3.2e6))
PLANNER_MICRO_BATCHES = (1, 2, 4, 8)  # the micro-batches the planner chooses from (candidates' default)
DEFAULT_MFU = 0.4  # only where no speed model exists (Trainium, A10G): a "what if", and the plan says so


# ---------------------------------------------------------------- memory


def model_state_bytes(params: float, cfg: ParallelConfig, world: int) -> dict[str, float]:
    """Weights, gradients and optimizer state on ONE of `world` devices, in bytes (ZeRO paper, section 3)."""
    local = params / (cfg.tp * cfg.pp)
    s = cfg.shard_degree(world)
    split = parallelism.SHARDED_STATES[cfg.sharding]
    parts = {"weights": WEIGHT_BYTES * local, "gradients": GRAD_BYTES * local, "optimizer": OPTIMIZER_BYTES * local}
    return {name: value / s if name in split else value for name, value in parts.items()}


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
    """Everything `fmlab plan` prints: the run's size, time and cost (`run`, compute.estimate_run at the layout's
    predicted HFU), and the layout's memory per device. The run's fields read through: plan.days is plan.run.days,
    and to_dict() gives them flat, beside the plan's own."""

    run: RunEstimate  # model, params, tokens, train_flops, instance, instances, devices, mfu, hfu, days, cost_usd
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
    memory_limit_gb: float = 0.0  # usable memory less the headroom: what a plan may use (HEADROOM_FRACTION)
    global_batch: int = 0  # sequences per optimizer step
    grad_accum: int = 1  # micro-batches per data-parallel rank per step
    step: dict | None = None  # the predicted step (fmlab.plan.speed.StepTime.to_dict()), None for a "what if"
    speed_basis: str = ""  # where the days come from: the prediction, or an MFU the caller gave

    model = property(lambda self: self.run.model)
    params = property(lambda self: self.run.params)
    tokens = property(lambda self: self.run.tokens)
    train_flops = property(lambda self: self.run.train_flops)
    instance = property(lambda self: self.run.instance)
    instances = property(lambda self: self.run.instances)
    devices = property(lambda self: self.run.devices)
    mfu = property(lambda self: self.run.mfu, doc="model FLOPs / (time x peak): below hfu when layers recompute")
    hfu = property(lambda self: self.run.hfu, doc="hardware FLOPs / (time x peak): what the devices sustain")
    days = property(lambda self: self.run.days)
    cost_usd = property(lambda self: self.run.cost_usd)

    def to_dict(self) -> dict:
        run = {k: v for k, v in asdict(self.run).items() if k != "recompute"}  # the layout says what recomputes
        return {**run, **{k: v for k, v in asdict(self).items() if k != "run"}}

    def require_fit(self) -> TrainingPlan:
        """Raise PlanError with the changes that would make it fit, unless it fits."""
        if not self.fits:
            fixes = "; ".join(self.suggestions) or "use a larger-memory instance or a smaller model"
            raise PlanError(
                f"{self.model} needs {self.memory_gb_per_device:.1f} GB per device but {self.instance} offers "
                f"{self.usable_memory_gb:.1f} usable GB, {self.memory_limit_gb:.1f} with the planner's "
                f"{HEADROOM_FRACTION:.0%} headroom: {fixes}")
        return self


def checkpoint_gb(params: float) -> dict:
    """Size of a full training checkpoint (fp32 master weights + Adam moments) and of a bf16 export."""
    return {"training": params * OPTIMIZER_BYTES / GB, "bf16_weights": params * WEIGHT_BYTES / GB}


def memory_per_device(m: ModelPreset, cfg: ParallelConfig, world: int, micro_batch: int = 1,
                      seq_len: int | None = None, attention: str = "flash", loss: str = "chunked",
                      precision: str | None = None, grad_accum: int | None = None,
                      compiled: bool = False) -> dict[str, float]:
    """Bytes on one of `world` devices at the training step's peak, by part, as fmlab's engine keeps them
    (fmlab.plan.memory: fp32 master weights, gradients and Adam, autocast's bf16 copies, DDP's buckets, the
    activations a transformers model really keeps, the loss's logits). `loss`: the engine's "chunked" (default)
    or transformers' "full"; `precision`: autocast | bf16 (FSDP's parameters) | fp32, default as the engine runs
    the layout on a GPU; `grad_accum`: micro-batches per step (1: the gradients are made after the peak; more, or
    None, books them). attention="eager" adds the a x s x s tensors eager attention keeps (Korthikanti's 5as/h).
    `compiled`: each decoder layer under torch.compile, which keeps less (fmlab.plan.memory's docstring)."""
    if attention not in ATTENTION_CHOICES:
        raise PlanError(f"attention must be one of {', '.join(ATTENTION_CHOICES)}, not {attention!r}")
    seq_len = seq_len or m.seq_len
    parts = memory.peak_bytes(m, cfg, world, micro_batch, seq_len, loss=loss, precision=precision,
                              grad_accum=grad_accum, compiled=compiled)
    if attention == "eager" and cfg.recompute in ("none", "selective"):
        parts["activations_stored"] += 5 * m.heads * seq_len * seq_len * micro_batch * m.layers / (cfg.tp * cfg.pp)
    return parts


def default_global_batch(m: ModelPreset, dp: int, micro_batch: int, seq_len: int) -> int:
    """Sequences per step when the plan is not told: GPT-3's batch in tokens for the nearest model size (by the
    ratio of parameters), rounded up to a whole number of micro-batches on each of the `dp` ranks."""
    params = compute.param_count(m)
    tokens = min(GPT3_BATCH_TOKENS, key=lambda row: abs(math.log(row[0] / params)))[1]
    per_step = dp * micro_batch
    return max(1, math.ceil(tokens / seq_len / per_step)) * per_step


def predict_step(m: ModelPreset, inst: Instance, instances: int, parallel: ParallelConfig, micro_batch: int,
                 seq_len: int, global_batch: int, attention: str = "flash") -> speed.StepTime | None:
    """The step-time model's prediction for this plan (fmlab.plan.speed), or None where it has no GPU type for the
    instance (Trainium, A10G)."""
    gpu = hardware.ACCELERATOR_GPU.get(inst.accelerator)
    if gpu is None:
        return None
    shaped = dataclasses.replace(m, seq_len=seq_len)
    hw = speed.Hardware(gpu, instances * inst.accelerators, inst.accelerators, inst.network_gbps)
    return speed.step_time(speed.Workload(shaped, hw, parallel, micro_batch, global_batch,
                                          attention="flash" if attention == "flash" else "unfused"))


def make_plan(model: ModelPreset | str, tokens: float, instance: Instance | str, instances: int, *,
              parallel: ParallelConfig | None = None, mfu: float | None = None, micro_batch: int = 1,
              seq_len: int | None = None, suggest: bool = True, attention: str = "flash",
              global_batch: int | None = None, compiled: bool | None = None) -> TrainingPlan:
    """Plan one run; raises PlanError for an impossible layout, returns fits=False for one too big.

    The layout is `parallel`, the ParallelConfig the engine and the jobs take (None: plain data parallelism);
    its activation_checkpointing and activation_offloading say how the activations are saved. The days and the
    cost come from the predicted step (fmlab.plan.speed: compute, exposed communication, bubble) at `global_batch`
    sequences per step (None: default_global_batch); `mfu` overrides it as a "what if" (the fraction of peak the
    devices sustain, the HFU with recomputation), and the plan's speed_basis says which it is. `compiled`: whether
    the engine compiles its decoder layers, which keeps less memory (None: its default, on a GPU yes, on Trainium
    no: fmlab.train's --compile auto)."""
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
    dp = parallel.dp(world)
    if global_batch is None:
        global_batch = default_global_batch(m, dp, micro_batch, seq_len)
    elif (isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < dp * micro_batch
          or global_batch % (dp * micro_batch)):
        raise PlanError(f"global_batch must be a whole number of micro-batches on each of the {dp} data-parallel "
                        f"ranks (a multiple of {dp} x {micro_batch}), got {global_batch!r}")
    step = None
    if mfu is None:
        step = predict_step(m, inst, instances, parallel, micro_batch, seq_len, global_batch, attention)
        basis = (f"predicted step (fmlab.plan.speed): {step.step_s:.2f} s for {global_batch} sequences"
                 if step else f"no speed model for {inst.accelerator}: MFU {DEFAULT_MFU:.0%} assumed (a what if)")
        hfu = step.hfu if step else DEFAULT_MFU
    else:
        basis, hfu = f"what if: HFU {mfu!r} given instead of the predicted step", mfu
    run = compute.estimate_run(m, tokens, inst, instances, hfu, parallel.recompute)
    if compiled is None:
        compiled = inst.accelerator not in catalog.PROCESSES_PER_DEVICE  # a GPU: the engine compiles by default
    parts = memory_per_device(m, parallel, world, micro_batch, seq_len, attention=attention,
                              grad_accum=global_batch // (dp * micro_batch), compiled=compiled)
    total_gb = sum(parts.values()) / GB
    usable = inst.device_memory_gb * USABLE_FRACTION
    limit = usable * (1 - HEADROOM_FRACTION)
    plan = TrainingPlan(
        run=run, parallel=parallel, micro_batch=micro_batch, seq_len=seq_len, memory_gb_per_device=total_gb,
        memory_breakdown_gb={k: v / GB for k, v in parts.items()}, device_memory_gb=inst.device_memory_gb,
        usable_memory_gb=usable, fits=total_gb <= limit, checkpoint_gb=checkpoint_gb(run.params),
        price_note=(f"${inst.price_per_hour}/h per instance, {inst.price_basis}, {inst.price_region}, read "
                    f"{inst.price_date}" if inst.price_known
                    else f"no cost: {inst.name} has no published price ({inst.price_basis})"),
        memory_limit_gb=limit, global_batch=global_batch, grad_accum=global_batch // (dp * micro_batch),
        step=step.to_dict() if step else None, speed_basis=basis,
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
               micro_batch: int | None = None, micro_batches: tuple[int, ...] | None = None, attention: str = "flash",
               mfu: float | None = None, global_batch_tokens: int | None = None) -> list[dict]:
    """Every buildable layout of the given choices as a table row: memory per device by part, whether it fits
    (with the planner's headroom), the predicted step (tokens/s per device, MFU, days) at the plan's global batch,
    and what it costs in extra compute (recomputation); "parallel" holds the row's ParallelConfig, ready for a job
    (the `parallel` of its TrainConfig: fmlab.jobs.sharded).
    `hybrid_degrees`: shard group sizes, 0 for full sharding (one group of every data-parallel rank).
    `micro_batches`: the micro-batch sizes to try (default: just `micro_batch` when given, else the planner's
    PLANNER_MICRO_BATCHES, the space fmlab.plan.planned.planned_run chooses from); the global batch is
    `global_batch_tokens` (default: default_global_batch), in whole micro-batches on every rank.
    Layouts the cluster cannot form (a degree that does not divide it) are left out."""
    m = catalog.model(model) if isinstance(model, str) else model
    rows = []
    for degree in hybrid_degrees:
        for tp in tps:
            for recompute in recomputes:
                for mb in micro_batches or ((micro_batch,) if micro_batch else PLANNER_MICRO_BATCHES):
                    try:
                        layout = ParallelConfig(sharding="hybrid" if degree else "full", hybrid_shard_degree=degree,
                                                tp=tp).with_recompute(recompute)
                        world = instances * (catalog.instance(instance) if isinstance(instance, str)
                                             else instance).accelerators
                        per_step = layout.check(world, m).dp(world) * mb
                        batch = (None if global_batch_tokens is None
                                 else max(1, math.ceil(global_batch_tokens / m.seq_len / per_step)) * per_step)
                        p = make_plan(m, tokens, instance, instances, parallel=layout, micro_batch=mb,
                                      attention=attention, mfu=mfu, suggest=False, global_batch=batch)
                    except PlanError:
                        continue
                    parts = p.memory_breakdown_gb
                    step = p.step or {}
                    rows.append({"sharding": p.parallel.sharding, "shard degree": p.parallel.shard_degree(p.devices),
                                 "tp": tp, "recompute": recompute, "micro-batch": mb,
                                 "states GB": parts["weights"] + parts["gradients"] + parts["optimizer"],
                                 "activations GB": sum(v for k, v in parts.items() if k.startswith("activations")),
                                 "GB per device": p.memory_gb_per_device, "usable GB": p.usable_memory_gb,
                                 "limit GB": p.memory_limit_gb, "fits": p.fits,
                                 "extra compute": compute.recompute_overhead(m, recompute),
                                 "global batch tokens": p.global_batch * p.seq_len, "grad accum": p.grad_accum,
                                 "smallest batch tokens": per_step * p.seq_len,
                                 "tokens/s per device": step.get("tokens_per_second_per_gpu"),
                                 "step s": step.get("step_s"), "exposed comm s": step.get("exposed_communication_s"),
                                 "MFU": p.mfu, "days": p.days, "parallel": p.parallel})
    return rows


def global_batch_tokens(devices: int, tp: int = 1, pp: int = 1, micro_batch: int = 1, seq_len: int = 4096,
                        grad_accum: int = 1) -> int:
    """Tokens per optimizer step: data-parallel replicas (devices / (tp x pp)) x micro-batch x accumulation x
    sequence length. The smallest a layout can have is with micro-batch 1 and no accumulation."""
    if devices < 1 or tp < 1 or pp < 1 or devices % (tp * pp):
        raise PlanError(f"tp x pp = {tp} x {pp} must divide the {devices} devices")
    return devices // (tp * pp) * micro_batch * grad_accum * seq_len


def choose(rows: list[dict], max_global_batch_tokens: int = GLOBAL_BATCH_LIMIT_TOKENS) -> dict:
    """The course's rule among layouts that fit (with the planner's headroom) and can keep the global batch within
    `max_global_batch_tokens` (module 6: sharded data parallelism puts at least one micro-batch on every replica,
    so the smallest batch grows with the cluster; tensor parallelism divides it): the fastest predicted step, in
    tokens per second per device (fmlab.plan.speed), so the fewest days and dollars. Between layouts within 1% of
    the fastest (the model cannot tell them apart):

    1. least recomputation (it costs compute on every step);
    2. then no tensor parallelism (it all-reduces activations inside every layer, twice each way);
    3. then the smallest shard degree: a ring over fewer GPUs has fewer latency steps, each layer waits for fewer
       stragglers, and the groups' collectives run side by side (the MiCS idea behind SMP's sharded data
       parallelism: shard over the smallest group that holds the states);
    4. then the smallest micro-batch (the least memory).

    Rows without a prediction (an instance with no speed model) are ranked by the tie-breaks alone. A row is held to
    the limit by its "smallest batch tokens" (one micro-batch per replica), else its "global batch tokens"; rows
    with neither are not held to it. Raises PlanError when nothing qualifies."""
    fitting = [r for r in rows if r["fits"]]
    if not fitting:
        raise PlanError("no candidate layout fits: add instances, use a larger-memory instance, or allow "
                        "recomputation, offloading or tensor parallelism")
    def smallest_batch(r: dict) -> int:
        return r.get("smallest batch tokens", r.get("global batch tokens", 0))

    within = [r for r in fitting if smallest_batch(r) <= max_global_batch_tokens]
    if not within:
        smallest = min(smallest_batch(r) for r in fitting)
        raise PlanError(f"every layout that fits has a global batch above {max_global_batch_tokens:,} tokens "
                        f"(the smallest: {smallest:,}): allow a larger tensor-parallel degree or pipeline "
                        "stages, which divide the data-parallel replicas, or use fewer devices")
    speeds = [r.get("tokens/s per device") or 0.0 for r in within]
    fastest = max(speeds)
    near = [r for r, v in zip(within, speeds, strict=True) if v >= 0.99 * fastest]
    return min(near, key=lambda r: (r["extra compute"], RECOMPUTE_CHOICES.index(r["recompute"]), r["tp"],
                                    r["shard degree"], r.get("micro-batch", 1)))
