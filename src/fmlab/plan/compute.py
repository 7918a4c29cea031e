"""Pure arithmetic for planning a pretraining run: parameters, FLOPs, time, cost.

Memory per device lives in `fmlab.memory`; `fmlab.plan` puts both together. Nothing here touches a GPU:
these are the numbers you work out before you rent one.

    >>> from fmlab import planning
    >>> round(planning.param_count(planning.catalog.model("llama2-7b")) / 1e9, 2)
    6.74

Sources for the formulas:
- FLOPs per token, 6N + 12*L*H*Q*T: Chowdhery et al. 2022 (PaLM), Appendix B.
- Chinchilla-optimal data, about 20 tokens per parameter: Hoffmann et al. 2022, Table 3.
- Training time with full activation recomputation, 8*T*P / (n*X): Narayanan et al. 2021, section 5.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from fmlab.plan import catalog
from fmlab.plan.catalog import Instance, ModelPreset

SECONDS_PER_DAY = 86_400
CHINCHILLA_TOKENS_PER_PARAM = 20


class PlanError(ValueError):
    """A plan that cannot work, with the change that would fix it in the message."""


# ---------------------------------------------------------------- parameters


def param_breakdown(m: ModelPreset) -> dict[str, int]:
    """Parameters by role, exactly as the `transformers` implementation of `m.family` allocates them.

    Keys: embedding (token table), positions (learned position table), layers (all decoder layers),
    final_norm, lm_head (0 when tied to the embedding).
    """
    h, L, V, f = m.hidden, m.layers, m.vocab, m.ffn
    kv = m.n_kv_heads * m.head_dim
    if m.family == "llama":
        attn = h * h + 2 * h * kv + h * h
        layer = attn + 3 * h * f + 2 * h
        return dict(embedding=V * h, positions=0, layers=L * layer, final_norm=h, lm_head=V * h)
    if m.family == "opt":
        attn = 4 * (h * h + h)
        layer = attn + (h * f + f) + (f * h + h) + 2 * (2 * h)
        # OPT keeps 2 spare rows in its learned position table (a historical offset).
        return dict(embedding=V * h, positions=(m.seq_len + 2) * h, layers=L * layer, final_norm=2 * h, lm_head=0)
    if m.family == "falcon":
        layer = h * (h + 2 * kv) + h * h + 2 * h * f + 2 * (2 * h)
        return dict(embedding=V * h, positions=0, layers=L * layer, final_norm=2 * h, lm_head=0)
    if m.family == "bloom":
        layer = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * f + f) + (f * h + h)
        # BLOOM normalises the embeddings too; count that LayerNorm with them.
        return dict(embedding=V * h + 2 * h, positions=0, layers=L * layer, final_norm=2 * h, lm_head=0)
    raise ValueError(f"unknown model family {m.family!r}: expected llama, opt, falcon or bloom")


def param_count(m: ModelPreset) -> int:
    """Total distinct parameters (a tied LM head counted once), as `model.num_parameters()` reports."""
    return sum(param_breakdown(m).values())


def matmul_params(m: ModelPreset) -> int:
    """Parameters that take part in a matrix multiply for every token: N in PaLM's 6N.

    The input embedding and position tables are lookups, not matmuls, so they are left out; the LM head
    is a matmul, so it counts, whether or not it shares its weights with the embedding.
    """
    b = param_breakdown(m)
    head = b["lm_head"] or m.vocab * m.hidden
    return b["layers"] + b["final_norm"] + head


# ---------------------------------------------------------------- FLOPs


def flops_per_token(m: ModelPreset, seq_len: int | None = None) -> float:
    """Training FLOPs per token (forward + backward) by PaLM's Appendix B: 6N + 12*L*H*Q*T.

    H*Q is the attention width (heads x head dim = hidden); T the sequence length.
    """
    t = seq_len or m.seq_len
    return 6 * matmul_params(m) + 12 * m.layers * m.hidden * t


RECOMPUTE_CHOICES = ("none", "selective", "full", "offload")


def forward_flops_per_token(m: ModelPreset, seq_len: int | None = None) -> float:
    """One forward pass per token, a third of `flops_per_token`: 2N + 4*L*H*T."""
    return flops_per_token(m, seq_len) / 3


def hardware_flops_per_token(m: ModelPreset, seq_len: int | None = None, recompute: str = "none") -> float:
    """FLOPs the hardware really executes per token. Full recomputation (and offloading, which recomputes
    like it) runs every layer's forward twice: 8N, not 6N. Selective recomputation re-runs only element-wise
    ops (norms, activations, dropout): no matrix multiplies, so no FLOPs worth counting, only memory traffic."""
    model_flops = flops_per_token(m, seq_len)
    if recompute in ("full", "offload"):
        return model_flops + forward_flops_per_token(m, seq_len)
    if recompute in ("none", "selective"):
        return model_flops
    raise PlanError(f"recompute must be one of {', '.join(RECOMPUTE_CHOICES)}, not {recompute!r}")


def recompute_overhead(m: ModelPreset, recompute: str, seq_len: int | None = None) -> float:
    """Extra hardware FLOPs over model FLOPs: 0 for none and selective, 1/3 for full and offload."""
    return hardware_flops_per_token(m, seq_len, recompute) / flops_per_token(m, seq_len) - 1


def train_flops(m: ModelPreset, tokens: float, seq_len: int | None = None) -> float:
    """Total model FLOPs to train `m` on `tokens` tokens."""
    return flops_per_token(m, seq_len) * tokens


def chinchilla_tokens(params: float) -> float:
    """Compute-optimal training tokens: about 20 per parameter (Hoffmann et al. 2022)."""
    return CHINCHILLA_TOKENS_PER_PARAM * params


# ---------------------------------------------------------------- time and cost


def training_seconds(total_flops: float, devices: int, peak_tflops: float, mfu: float) -> float:
    """Wall-clock seconds to execute `total_flops` on `devices` at `mfu` of their peak."""
    if isinstance(mfu, bool) or not isinstance(mfu, int | float) or not 0 < mfu <= 1:
        raise PlanError(f"MFU must be a fraction in (0, 1], got {mfu!r}; 0.35-0.5 is typical for large runs")
    if devices < 1:
        raise PlanError(f"need at least one device, got {devices}")
    return total_flops / (devices * peak_tflops * 1e12 * mfu)


def implied_mfu(total_flops: float, peak_tflops: float, *, devices: int = 0, days: float = 0.0,
                device_hours: float = 0.0) -> float:
    """The MFU a published run must have had: its FLOPs over what its devices could do in its time.

    Give either `devices` and `days`, or `device_hours` (e.g. the GPU-hours of the Llama 2 paper).
    """
    if device_hours <= 0:
        if devices <= 0 or days <= 0:
            raise PlanError("give device_hours, or both devices and days")
        device_hours = devices * days * 24
    return total_flops / (device_hours * 3600 * peak_tflops * 1e12)


@dataclass(frozen=True)
class RunEstimate:
    """Time and money for one model, one data size, one cluster.

    `hfu` is the fraction of peak the devices sustain on the FLOPs they execute; `mfu` counts only the model's
    FLOPs (6N + attention per token), so with recomputation mfu = hfu x model / hardware FLOPs."""

    model: str
    params: int
    tokens: float
    train_flops: float
    instance: str
    instances: int
    devices: int
    mfu: float
    days: float
    cost_usd: float
    hfu: float = 0.0
    recompute: str = "none"

    @property
    def device_hours(self) -> float:
        return self.days * 24 * self.devices


def one_price_kind(*instances: Instance | str) -> str:
    """The price kind the instances share (catalog.Instance.price_kind), so that their costs may be compared; a
    PlanError names the kinds when they differ (a SageMaker training price against an EC2 price compares two
    products), or when one has no price."""
    kinds = {(i if isinstance(i, Instance) else catalog.instance(i)).price_kind: i for i in instances}
    if "none published" in kinds:
        raise PlanError(f"{kinds['none published']}: no published price to compare; pass your own price")
    if len(kinds) > 1:
        listed = "; ".join(f"{getattr(v, 'name', v)}: {k}" for k, v in kinds.items())
        raise PlanError(f"prices of different kinds cannot be compared ({listed}): compare within one kind, or "
                        "label each cost with its kind")
    return next(iter(kinds))


def check_positive(name: str, value: float, hint: str = "", infinite_ok: bool = False) -> float:
    """`value` if it is a number above 0 (finite unless infinite_ok); PlanError naming the input otherwise."""
    if (isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) or value <= 0
            or (math.isinf(value) and not infinite_ok)):
        raise PlanError(f"{name} must be a positive number, got {value!r}{': ' + hint if hint else ''}")
    return value


def estimate_run(m: ModelPreset | str, tokens: float, inst: Instance | str, instances: int,
                 mfu: float, recompute: str = "none") -> RunEstimate:
    """Days and on-demand cost to train `m` on `tokens` tokens with `instances` x `inst` at an MFU you give: the
    arithmetic of module 1, a "what if". The planner predicts the MFU from the layout (fmlab.plan.layout.make_plan,
    fmlab.plan.speed) and calls this with the prediction.

    `mfu` is the utilisation the cluster reaches without recomputation (then MFU = HFU). Recomputation keeps
    the hardware as busy (HFU = mfu) but spends part of it on FLOPs the model did not need: the days grow by
    the recomputed share and the run's MFU falls by it."""
    m = catalog.model(m) if isinstance(m, str) else m
    inst = catalog.instance(inst) if isinstance(inst, str) else inst
    check_positive("tokens", tokens, "the number of training tokens, e.g. 300e9")
    if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
        raise PlanError(f"instance count must be a whole number of at least 1, got {instances!r}")
    flops = train_flops(m, tokens)
    hardware = flops * (1 + recompute_overhead(m, recompute))
    devices = instances * inst.accelerators
    seconds = training_seconds(hardware, devices, inst.peak_tflops_bf16, mfu)
    days = seconds / SECONDS_PER_DAY
    cost = seconds / 3600 * inst.price_per_hour * instances
    return RunEstimate(m.name, param_count(m), tokens, flops, inst.name, instances, devices, mfu * flops / hardware,
                       days, cost, hfu=mfu, recompute=recompute)


def smallest_cluster(m: ModelPreset | str, tokens: float, inst: Instance | str, *, deadline_days: float,
                     budget_usd: float = math.inf, mfu: float, max_instances: int = 4096) -> RunEstimate:
    """The fewest instances that finish within the deadline and the budget.

    At a fixed MFU the cost does not depend on the instance count (more instances, fewer days), so the
    budget either holds for every cluster or for none; the deadline sets the size.
    """
    m = catalog.model(m) if isinstance(m, str) else m
    check_positive("deadline_days", deadline_days, "days the run may take")
    check_positive("budget_usd", budget_usd, "dollars the run may cost", infinite_ok=True)
    one = estimate_run(m, tokens, inst, 1, mfu)
    if one.cost_usd > budget_usd:
        raise PlanError(
            f"{m.name} on {tokens:.3g} tokens costs ${one.cost_usd:,.0f} at MFU {mfu:.0%} whatever the cluster "
            f"size, above the ${budget_usd:,.0f} budget: raise the budget, train on fewer tokens, pick a smaller "
            f"model, or a cheaper instance per FLOP")
    needed = math.ceil(one.days / deadline_days)
    if needed > max_instances:
        raise PlanError(f"{needed} instances would be needed to finish in {deadline_days} days; "
                        f"at most {max_instances} are allowed: extend the deadline or shrink the run")
    return estimate_run(m, tokens, inst, max(1, needed), mfu)


# ---------------------------------------------------------------- phased scaling plan


def scale_model(m: ModelPreset, fraction: float, name: str) -> ModelPreset:
    """A smaller model of the same family with about `fraction` of the parameters.

    Depth and width shrink together (each by the cube root of the fraction, widths kept a multiple of
    the head size), which is how model ladders such as Llama 2 7B/13B/70B are laid out.
    """
    if fraction >= 1:
        return replace(m, name=name)
    shrink = fraction ** (1 / 3)
    kv_ratio = m.heads // m.n_kv_heads
    step = m.head_dim * kv_ratio
    hidden = max(step, round(m.hidden * shrink / step) * step)
    heads = hidden // m.head_dim
    layers = max(2, round(m.layers * shrink))
    ffn = 0 if not m.intermediate else max(8, round(m.intermediate * hidden / m.hidden / 8) * 8)
    return replace(m, name=name, hidden=hidden, heads=heads, layers=layers, intermediate=ffn,
                   kv_heads=0 if not m.kv_heads else heads // kv_ratio, published_params=0.0)


@dataclass(frozen=True)
class Phase:
    name: str
    data_fraction: float
    model: ModelPreset
    devices: int
    estimate: RunEstimate
    gate: str  # what must be true before moving to the next phase


# The AWS pretraining lesson's ladder: 1% / 5% / 50% / 100% of the data, base / medium / large / jumbo
# model, on 1 / 8 / 16 / all accelerators, validating checkpoints at every step.
PHASES = [
    ("base", 0.01, 0.01, 1, "the loss falls, the data pipeline and checkpoints round-trip on one device"),
    ("medium", 0.05, 0.05, 8, "one full node trains at the expected throughput; a resume from checkpoint matches"),
    ("large", 0.50, 0.10, 16, "two nodes scale near-linearly over EFA; evaluation beats the medium model"),
    ("jumbo", 1.00, 1.00, 0, "the full run: checkpoint every 1-3 hours, automatic restarts, watch for hangs"),
]


def phased_plan(m: ModelPreset | str, tokens: float, inst: Instance | str, max_instances: int,
                mfu: float) -> list[Phase]:
    """Four phases from a smoke test to the full run, each with its own time and cost, at `mfu` (the full run's
    predicted MFU, fmlab.plan.layout.make_plan's, or a "what if")."""
    m = catalog.model(m) if isinstance(m, str) else m
    inst = catalog.instance(inst) if isinstance(inst, str) else inst
    phases = []
    for name, data_frac, model_frac, devices, gate in PHASES:
        devices = devices or max_instances * inst.accelerators
        sub = scale_model(m, model_frac, f"{m.name}-{name}")
        flops = train_flops(sub, tokens * data_frac)
        seconds = training_seconds(flops, devices, inst.peak_tflops_bf16, mfu)
        instances = math.ceil(devices / inst.accelerators)
        cost = seconds / 3600 * inst.price_per_hour * instances
        est = RunEstimate(sub.name, param_count(sub), tokens * data_frac, flops, inst.name, instances, devices,
                          mfu, seconds / SECONDS_PER_DAY, cost)
        phases.append(Phase(name, data_frac, sub, devices, est, gate))
    return phases


# ---------------------------------------------------------------- published runs, re-planned


def what_it_takes(mfu: float) -> list[dict]:
    """The catalog's published runs beside the planner: device-hours published and planned, implied MFU."""
    rows = []
    for run in catalog.PUBLISHED_RUNS.values():
        published_hours = run.gpu_hours or run.devices * run.days * 24
        row = {"run": run.name, "params_b": run.params / 1e9, "data": run.dataset,
               "cluster": (f"{run.instances} x {run.instance}" if run.instances
                           else f"{run.devices:,} {run.accelerator} GPUs" if run.devices else f"{run.accelerator} GPUs"),
               "published_days": run.days or None, "published_device_hours": published_hours,
               "planned_device_hours": None, "implied_mfu": None, "source": run.source}
        if run.model:
            peak = catalog.ACCELERATOR_PEAK_TFLOPS[run.accelerator]
            flops = train_flops(catalog.model(run.model), run.tokens)
            row["planned_device_hours"] = training_seconds(flops, 1, peak, mfu) / 3600
            row["implied_mfu"] = implied_mfu(flops, peak, device_hours=published_hours)
        rows.append(row)
    return rows
