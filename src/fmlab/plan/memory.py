"""Memory on one device as fmlab's engine really uses it: what a transformers model keeps under mixed precision.

    peak_bytes(model, ParallelConfig(), world=1, micro_batch=8, seq_len=2048, loss="full")   # {part: bytes}
    layer_bytes_per_token(model, "autocast")      # what one decoder layer keeps for backward, per token

The published formulas (ZeRO's 16 bytes per parameter, Korthikanti's 34*s*b*h per layer) assume every activation
is 16-bit and count each tensor once. A transformers Llama trained under torch.autocast keeps more, and the
difference was measured, not fitted (docs/measurements/h200-2026-11-26.md; tests/plan/test_memory.py re-measures
every term below on a CPU, where autocast keeps the same tensors, with autograd's saved-tensor hooks and the
profiler's allocation events):

- **The residual stream and the norms stay fp32.** The embedding is not autocast, so the residual stream is fp32;
  each RMSNorm keeps its fp32 input and its fp32 normalised output (8h bytes per token), plus the reciprocal RMS.
- **Every projection casts its input again.** Autocast caches the bf16 copies of weights, never of activations:
  q, k and v each keep their own bf16 copy of the norm's output (6h), the MLP's gate and up two more (4h).
- **The attention kernel** (SDPA: flash on a GPU) keeps q after rotation (2h, cast from fp32 because the rotary
  tables are fp32), k and v at their grouped width (2 x 2*kv_heads*head_dim), its output (2h) and the fp32
  log-sum-exp (4 bytes per head). SwiGLU keeps gate, its SiLU, up and their product (8f).
- **The weights are held twice**: the fp32 master copy and autocast's bf16 copy of every matrix (2 bytes per
  parameter, from the first forward use to its backward).
- **The loss** (transformers' causal-LM loss): bf16 logits, their fp32 upcast and the fp32 log-softmax in the
  forward (10 bytes per token per vocabulary entry); in the backward the saved log-softmax and two fp32 gradients
  (12). The engine's chunked loss (fmlab.train.loss) holds the head's two gradients instead (4*V*h + 2*h per token)
  and one chunk's logits at a time.
- **Gradients** (fp32) exist at the peak only when an earlier micro-batch left them: with gradient accumulation
  (grad_accum > 1) they are held through every forward. A single-micro-batch step frees them (set_to_none) and
  makes them in the backward, after the peak. grad_accum=None (a plan that does not say) books them.

Per token and decoder layer, with h hidden, f the MLP width, kv = kv_heads*head_dim and a heads:
  Llama under autocast            30h + 4kv + 8f + 4a + 8
  Llama with bf16 parameters      20h + 4kv + 8f + 4a + 8     (FSDP's MixedPrecisionPolicy: no casts, bf16 stream)
  OPT (GPT-3 layout), autocast    24h + 4f + 4a + 16;  with bf16 parameters 16h + 4f + 4a + 8
Families the engine does not train (Falcon, BLOOM) keep Korthikanti's 34h, as published.

**The compiled engine** (`--compile true`, the default on a GPU: each decoder layer under torch.compile) keeps
less. Inductor's partitioner saves what the backward needs at least cost and recomputes the element-wise work in
the fused backward kernels: one bf16 copy of each norm's output shared by the projections that read it (eager casts
it again for each), no fp32 norm outputs, no separate SiLU; only the layer's input stays fp32. Measured with the
same saved-tensor hooks on a CPU (tests/plan/test_memory.py compiles a Llama and an OPT layer and counts):
  Llama compiled, autocast        14h + 4kv + 6f + 4a + 8     (eager 30h + 4kv + 8f + 4a + 8)
  OPT compiled, autocast          18h + 4f + 4a + 16          (eager 24h + 4f + 4a + 16)
With bf16 parameters the one fp32 tensor, the layer's input, is bf16: 2h less (derived, not measured). Held
against the compiled rows of one H100 and one H200 (fmlab.plan.gpu_measurements.ENGINE_SPEED): 0.98-1.14 of the peaks, the
highest with selective recomputation, whose saved matmul outputs the planner books as eager keeps them.

Besides the model states, the peak is the largest of three moments: the end of the forward pass and the start
of the loss's backward (all kept activations, the bf16 weight copies and the loss's tensors); and, with activation
checkpointing, the backward of the first recomputed layer (every layer's input, one layer's full activations and
its bf16 weights). `peak_bytes` returns the parts at the largest.

Against CUDA (tests/plan/test_memory.py): on one H100 the engine's peaks at the Llama 3.2 1B shape and at m200,
micro-batch 1-16, with and without full recomputation, are 0.95-1.00 of this model with grad_accum=1 (booking the
gradients: 1.02-1.17). The first H200 measurement (fmlab at bce155c, docs/measurements/h200-2026-11-26.md) held a
gradient-sized tensor more at its peaks with full recomputation: 0.79-1.12 of the model with them booked.
"""

from __future__ import annotations

from fmlab.plan import compute
from fmlab.plan.catalog import ModelPreset
from fmlab.plan.compute import PlanError
from fmlab.plan.parallelism import SHARDED_STATES, ParallelConfig

LOSSES = ("chunked", "full")
PRECISIONS = ("autocast", "bf16", "fp32")  # how the engine runs: autocast (single/DDP), bf16 params (FSDP), fp32
MASTER_BYTES, GRAD_BYTES, ADAM_BYTES, COPY_BYTES = 4, 4, 8, 2  # fp32 weights and grads, Adam m and v, bf16 copies
ZERO_GRAD_BYTES = 2  # ZeRO-1/2 (planned only): bf16 gradients, as the paper's mixed-precision engine keeps them
# The chunked loss's chunk (fmlab.train.loss): at least 256 MiB of fp32 logits (523 tokens of Llama 3's 128,256
# entries), and large enough that a micro-batch takes at most MAX_LOSS_CHUNKS chunks. Each chunk adds its product
# into the head's fp32 weight gradient (12 bytes per weight read and written), so fewer chunks are faster: on one
# H200 at the Llama 3.2 1B shape, micro-batch 8, the compiled engine made 58,565 tokens/s with 32 chunks of 512
# tokens and 64,543 with 8 of 2,048 (ENGINE_SPEED in fmlab.plan.gpu_measurements), for 0.4 GiB more. Held at once: at most
# an eighth of what the full loss holds.
CHUNK_LOGIT_BYTES = 256 * 2**20
MAX_LOSS_CHUNKS = 8


def chunk_tokens(vocab: int, tokens: int) -> int:
    """Tokens per chunk of the chunked loss: CHUNK_LOGIT_BYTES of fp32 logits, or more where a micro-batch of
    `tokens` would otherwise take more than MAX_LOSS_CHUNKS chunks."""
    return max(1, min(tokens, max(CHUNK_LOGIT_BYTES // (4 * vocab), -(-tokens // MAX_LOSS_CHUNKS))))


def engine_precision(cfg: ParallelConfig, device_bf16: bool = True) -> str:
    """How fmlab.train runs a layout: FSDP (any sharding, or TP) with bf16 parameters, else autocast; fp32 when
    the device has no bf16 (a laptop CPU) or the layout asks for it."""
    if cfg.mixed_precision == "fp32" or (cfg.mixed_precision == "auto" and not device_bf16):
        return "fp32"
    return "bf16" if cfg.sharding != "none" or cfg.tp > 1 else "autocast"


def layer_bytes_per_token(m: ModelPreset, precision: str = "autocast", compiled: bool = False) -> float:
    """Bytes one decoder layer keeps for its backward, per token (no recomputation, a fused attention kernel);
    `compiled`: the layer under torch.compile (the module docstring's measured formulas)."""
    h, f, a = m.hidden, m.ffn, m.heads
    kv = m.n_kv_heads * m.head_dim
    if precision == "fp32":
        return 2 * layer_bytes_per_token(m, "bf16", compiled)  # every kept tensor in fp32 (an upper bound: a laptop's run)
    if compiled and m.family in ("llama", "opt"):
        kept = 14 * h + 4 * kv + 6 * f + 4 * a + 8 if m.family == "llama" else 18 * h + 4 * f + 4 * a + 16
        return kept - (2 * h if precision == "bf16" else 0)  # the layer's input, fp32 under autocast
    if m.family == "llama":
        return (30 * h if precision == "autocast" else 20 * h) + 4 * kv + 8 * f + 4 * a + 8
    if m.family == "opt":
        return (24 * h + 4 * f + 4 * a + 16) if precision == "autocast" else (16 * h + 4 * f + 4 * a + 8)
    return 34 * h  # Korthikanti et al. 2022, Table 2, with a fused attention kernel


def _stream_bytes(precision: str) -> int:
    """Bytes per element of the residual stream: fp32 under autocast (the embedding is not cast) and in fp32."""
    return 2 if precision == "bf16" else 4


def stored_bytes_per_token(m: ModelPreset, recompute: str, precision: str = "autocast", compiled: bool = False) -> float:
    """What one layer keeps between its forward and its backward, per token, as each recompute mode leaves it."""
    stream = _stream_bytes(precision) * m.hidden  # the layer's input: what a checkpoint keeps
    if recompute == "none":
        return layer_bytes_per_token(m, precision, compiled)
    if recompute == "selective":  # fmlab.parallel.activations: the input, every matmul's and the kernel's outputs
        h, f, kv = m.hidden, m.ffn, m.n_kv_heads * m.head_dim
        mlp = 4 * f + 2 * h if m.family == "llama" else 2 * f + 2 * h
        return stream + 2 * h + 4 * kv + 2 * h + 4 * m.heads + 2 * h + mlp
    if recompute in ("full", "offload"):
        return stream
    raise PlanError(f"recompute must be one of {', '.join(compute.RECOMPUTE_CHOICES)}, not {recompute!r}")


def outside_layers_bytes_per_token(m: ModelPreset, precision: str, micro_batch: int) -> float:
    """The final norm, the head's input, the token ids and the rotary tables (shared by the batch)."""
    norm = 8 * m.hidden + 4 if precision != "bf16" else 6 * m.hidden + 4
    head_input = 2 * m.hidden if precision == "autocast" else 0
    return norm + head_input + 16 + 8 * m.head_dim / micro_batch


def loss_bytes(m: ModelPreset, tokens: int, loss: str, phase: str, tp: int = 1) -> float:
    """The loss's tensors at `phase` ("forward": its own peak; "backward": at the start of the backward pass)."""
    v = m.vocab / tp
    if loss == "full":
        return (10 if phase == "forward" else 12) * tokens * v
    if loss == "chunked":
        held = 4 * v * m.hidden + 2 * m.hidden * tokens  # the head's weight gradient (fp32), the hidden's (bf16)
        chunk = chunk_tokens(m.vocab, tokens)
        return held + (6 * chunk * v + 2 * v * m.hidden if phase == "forward" else 0)  # + the head's bf16 copy
    raise PlanError(f"loss must be one of {', '.join(LOSSES)}, not {loss!r}")


def _states(m: ModelPreset, cfg: ParallelConfig, world: int, precision: str, loss: str) -> dict[str, float]:
    """Weights (fp32 master), gradients, Adam, and the compute copies at the forward's peak, on one device."""
    params = compute.param_count(m) / (cfg.tp * cfg.pp)
    s = cfg.shard_degree(world)
    breakdown = compute.param_breakdown(m)
    layer = breakdown["layers"] / m.layers / (cfg.tp * cfg.pp)
    matmul = (compute.matmul_params(m) - breakdown.get("final_norm", 0)) / (cfg.tp * cfg.pp)
    if precision == "fp32":
        copies = 0.0
    elif precision == "autocast":
        copies = COPY_BYTES * matmul  # every matrix's bf16 copy, held from its forward use to its backward
        if loss == "chunked":  # the head's copy is the chunked loss's own, made and dropped inside it
            copies -= COPY_BYTES * m.vocab * m.hidden / (cfg.tp * cfg.pp)
    else:  # FSDP: bf16 parameters gathered for the layer at work and the one prefetched, and the root's
        root = params - layer * m.layers / cfg.pp
        copies = COPY_BYTES * (2 * layer + root)
    buckets = GRAD_BYTES * params if (cfg.sharding == "none" and cfg.dp(world) > 1 and cfg.tp == 1) else 0.0
    split = SHARDED_STATES[cfg.sharding]
    if cfg.sharding in ("zero1", "zero2"):  # planned only, as the ZeRO paper counts a bf16 engine (section 3.1):
        # bf16 weights and gradients beside the fp32 master weights, which belong to the sharded optimizer states
        return {"weights": MASTER_BYTES * params / s, "optimizer": ADAM_BYTES * params / s,
                "gradients": ZERO_GRAD_BYTES * params / (s if "gradients" in split else 1),
                "compute_weights": COPY_BYTES * params, "ddp_buckets": 0.0, "layer_params": layer}
    return {"weights": MASTER_BYTES * params / s if "weights" in split else MASTER_BYTES * params,
            "gradients": GRAD_BYTES * params / s if "gradients" in split else GRAD_BYTES * params,
            "optimizer": ADAM_BYTES * params / s if "optimizer" in split else ADAM_BYTES * params,
            "compute_weights": copies, "ddp_buckets": buckets, "layer_params": layer}


def peak_bytes(m: ModelPreset, cfg: ParallelConfig, world: int = 1, micro_batch: int = 1, seq_len: int | None = None,
               loss: str = "chunked", precision: str | None = None, grad_accum: int | None = None,
               compiled: bool = False) -> dict[str, float]:
    """Bytes on one of `world` devices at the step's peak, by part: weights, gradients, optimizer, compute_weights,
    ddp_buckets, activations_stored, activations_working, activations_logits. `precision`: as the engine runs
    `cfg` on a bf16 device (engine_precision) unless given. `grad_accum`: micro-batches per optimizer step; with 1
    the gradients are not yet made at the peak (0 in the dict), with more (or None: not said) they are booked.
    `compiled`: each decoder layer under torch.compile (the engine's default on a GPU), which keeps less."""
    if grad_accum is not None and grad_accum < 1:
        raise PlanError(f"grad_accum must be at least 1, not {grad_accum}")
    seq_len = seq_len or m.seq_len
    precision = precision or engine_precision(cfg)
    tokens = micro_batch * seq_len
    tp, layers = cfg.tp, m.layers / cfg.pp
    st = _states(m, cfg, world, precision, loss)
    per_layer = stored_bytes_per_token(m, cfg.recompute, precision, compiled) * tokens / tp
    if cfg.recompute == "offload":
        stored = per_layer * min(cfg.offload_horizon, layers)
    else:
        stored = per_layer * layers
    stored += outside_layers_bytes_per_token(m, precision, micro_batch) * tokens / tp
    full_layer = layer_bytes_per_token(m, precision, compiled) * tokens / tp
    # Gradients at the peak: an earlier micro-batch's, held through this one's forward (measured: a one-micro-batch
    # step's peak has none, tests/plan/test_memory.py)
    gradients = 0.0 if grad_accum == 1 else st["gradients"]
    base = {"weights": st["weights"], "gradients": gradients, "optimizer": st["optimizer"],
            "ddp_buckets": st["ddp_buckets"]}
    # A checkpointed layer's bf16 copies are not kept for backward (it casts them again when it is recomputed);
    # the head's copy is kept by the full loss's matmul.
    kept_copies = st["compute_weights"]
    if cfg.recompute != "none" and precision == "autocast":
        kept_copies = COPY_BYTES * m.vocab * m.hidden / tp if loss == "full" else 0.0
    moments = {
        "forward": {**base, "compute_weights": st["compute_weights"], "activations_stored": stored,
                    "activations_working": 0.0, "activations_logits": loss_bytes(m, tokens, loss, "forward", tp)},
        "loss_backward": {**base, "compute_weights": kept_copies, "activations_stored": stored,
                          "activations_working": 0.0,
                          "activations_logits": loss_bytes(m, tokens, loss, "backward", tp)},
    }
    if cfg.recompute != "none":  # the last layer's backward: its recomputed activations and its bf16 weights
        copies = COPY_BYTES * st["layer_params"] if precision != "fp32" else 0.0
        moments["recomputed_layer"] = {**base, "compute_weights": copies, "activations_stored": stored,
                                       "activations_working": full_layer, "activations_logits": 0.0}
    return max(moments.values(), key=lambda parts: sum(parts.values()))
