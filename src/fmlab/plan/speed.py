"""How long one training step takes, from the layout and the network: MFU is the model's output, not its input.

    from fmlab.plan.speed import Workload, Hardware, step_time
    w = Workload(catalog.model("gpt-30b"), Hardware("A100-40GB", gpus=128, inter_node_gbps=400),
                 ParallelConfig(sharding="hybrid", hybrid_shard_degree=64), micro_batch=1, global_batch=128)
    s = step_time(w)
    s.step_s, s.mfu, s.breakdown()      # seconds, model FLOPs utilisation, where the time goes

A step, on one GPU of the slowest pipeline stage, is the sum of:
- compute: the linear layers at the GPU's measured matmul rate, attention at its fused kernel's rate (causal: half
  the square; FlashAttention's backward re-runs its forward), and the element-wise work (norms, activations,
  residuals, the loss, the optimizer) at its memory bandwidth; `recompute_s` is what activation checkpointing adds
  (full: every layer's forward; torchtitan's per-op policy: every second matmul of a layer, MATMUL_ORDER);
- communication that nothing hides: tensor parallelism's all-reduces (or reduce-scatter/all-gather with sequence
  parallelism) inside every layer; FSDP's per-layer all-gathers and reduce-scatters, of which only what exceeds the
  compute of the layer beside them shows (FSDP prefetches the next layer); DDP's all-reduce, bucketed behind the
  last micro-batch's backward; the distributed optimizer's (ZeRO-1) reduce-scatter behind the backward and
  all-gather behind the next forward; hybrid sharding's replica all-reduce; pipeline sends between stages;
- what the hidden communication costs the compute beside it (OVERLAP_SLOWDOWN of its time: NCCL's kernels take SMs
  and memory bandwidth);
- the pipeline bubble, (p - 1) / (v m) of the pipelined work;
- the optimizer step (memory-bound) and a fixed cost per step.
Each collective runs over the links it crosses: inside a node at NVLink's bus bandwidth, across nodes at the node's
network share divided among the groups that cross it at once (NCCL's rings leave a node once per group), plus
NCCL's latency per ring step. The constants are in fmlab.plan.hardware, one per GPU type and link type.

Sources: Narayanan et al. 2021 (the bubble (p-1)/(v m), pipeline sends, Megatron's TP all-reduces, section 3);
Korthikanti et al. 2022 (sequence parallelism's reduce-scatter/all-gather; what is replicated without it);
Rajbhandari et al. 2020 (ZeRO-3's gathers per layer, forward and backward); Zhao et al. 2023 (PyTorch FSDP: the
prefetch that overlaps the next layer's gather with this layer's compute); Li et al. 2020 (PyTorch DDP: bucketed
all-reduce overlapping the backward); Dao 2023 (FlashAttention-2's backward = 2.5 forwards).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from fmlab.plan import compute, hardware, memory
from fmlab.plan.catalog import ModelPreset
from fmlab.plan.compute import PlanError
from fmlab.plan.parallelism import ParallelConfig

# FlashAttention's backward runs 2.5 forwards' FLOPs (it recomputes the scores): Dao 2023, section 4.
FLASH_BACKWARD_FORWARDS = 2.5
# Element-wise memory traffic per layer: each tensor a layer keeps for backward is written in the forward, read in
# the backward, and has its gradient written once (3 passes over fmlab.plan.memory's bf16 layer bytes: 32h bytes
# per token for a GPT layer, about Korthikanti's 34h).
ELEMENTWISE_PASSES = 3
# Unfused attention (scores materialised): per score element, the forward writes it, softmax reads and writes it,
# dropout reads it and writes it with its mask, the value product reads it (13 bytes in 16-bit); the backward about
# twice that: 40 bytes per score, a x s scores per token.
UNFUSED_SCORE_BYTES = 40
# The loss: fp32 logits, their softmax and gradient, read and written: 16 bytes per vocabulary entry per token.
LOSS_BYTES_PER_VOCAB = 16
# The optimizer step per parameter it owns: Adam reads fp32 master, m, v and gradient (16 bytes), writes master, m
# and v (12) and the 16-bit copy (2).
OPTIMIZER_BYTES = 30
# What a whole training step's kernels reach of the ideal above (every matmul at MAMF, attention at its kernel's
# rate, element-wise work at full memory bandwidth): measured on the course's own GPU rows, not fitted to a published
# run. At the Llama 3.2 1B shape, micro-batch 8 (fmlab.plan.gpu_measurements), the bare loop under torch.compile made 55,277
# tokens/s on one H100 and 58,227 on one H200, the same loop eager 42,699 and 46,634: this model's ideal step is
# 0.76 and 0.75 of the compiled steps, 0.59 and 0.60 of the eager ones (fmlab.plan.gpu_measurements.kernel_efficiency_measured() recomputes them;
# a test holds the constants to them). "fused": kernels fused by a compiler or by hand (torch.compile, Megatron's
# fused kernels, Meta's); "eager": PyTorch running one kernel per operation. Launch gaps, GEMM shapes below the best
# one, unfused small ops: they all live here.
KERNEL_EFFICIENCY = {"fused": 0.76, "eager": 0.59}
# torchtitan's per-op selective checkpointing (activation_checkpoint.mode "selective", selective_ac_option "op", its
# default; torchtitan/distributed/activation_checkpoint.py): "Saves output of all compute ops, except every second
# mm", counting a layer's matmuls in the order its forward runs them, afresh in every layer; the attention kernel's and
# the reduce-scatters' outputs are kept. So the backward re-runs the 2nd, 4th, ... matmul of each layer, the
# element-wise ops, and the sequence-parallel all-gathers that feed them. A layer's matmuls, in forward order, as
# functions of the model's shape (the parameters each multiplies by):
MATMUL_ORDER = {
    "llama": ("q", "k", "v", "out", "gate", "up", "down"),  # torchtitan's w2(silu(w1(x)) * w3(x)): w1 (gate) first
    "opt": ("q", "k", "v", "out", "up", "down"),
}
RECOMPUTES = ("none", "selective", "per_op", "full", "offload")
# Compute that runs while a collective runs beside it is slower: NCCL's kernels hold SMs (16 of an H100's 132 for its
# NVLS all-reduce, NCCL src/transport/nvls.cc NVLS_NCHANNELS_SM90, one block a channel) and compete for memory
# bandwidth ("Very likely, they're competing for memory bandwidth": NCCL's maintainer, NVIDIA/nccl issue #1428).
# Lee et al. 2025 ("Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning",
# arXiv 2507.03114, abstract, GPT and Llama models on 4 A100, H100, MI250 and MI210): "overlapping computation and
# communication can result in an average computational slowdown of 18.9%, with a maximum of 40.0%". Read
# 2026-11-29. The step pays that share of every second of communication it hides behind compute.
OVERLAP_SLOWDOWN = 0.189
FIXED_STEP_S = 0.005  # host work per step (logging, the data loader's hand-off, a sync): an estimate, a few ms
DDP_BUCKET_BYTES = 25 * 2**20  # PyTorch DDP's default bucket_cap_mb: the last bucket cannot overlap anything
GATHER_BYTES = 2  # FSDP/ZeRO-3 gather 16-bit parameters
ATTENTIONS = ("flash", "unfused")


@dataclass(frozen=True)
class Hardware:
    """The cluster, as the published-runs format describes it (hardware.* in RUNS.json)."""

    gpu: str  # a key of fmlab.plan.hardware.GPUS
    gpus: int
    gpus_per_node: int = 8
    inter_node_gbps: float = 400.0  # the node's total inter-node line rate
    intra_node: str = ""  # NVLink generation; "" = the GPU's own
    gpu_power_watts: float | None = None  # a cap below the rated board power, where the run set one


@dataclass(frozen=True)
class Workload:
    """One training step to time: model, cluster, layout, batch (sequences of model.seq_len tokens)."""

    model: ModelPreset
    hardware: Hardware
    parallel: ParallelConfig
    micro_batch: int = 1
    global_batch: int = 0  # 0: one micro-batch per data-parallel rank (no accumulation)
    virtual_stages: int = 1  # interleaved pipeline chunks per device
    sequence_parallel: bool = False
    attention: str = "flash"  # flash (fused kernel) | unfused (scores materialised, as before 2022)
    gradient_bytes: int = 4  # gradients reduced in fp32 (PyTorch's FSDP2/DDP defaults, fmlab's engine, Megatron bf16)
    kernels: str = "fused"  # fused (torch.compile, Megatron's kernels) | eager (PyTorch, an op at a time)
    kernel_efficiency: float = 0.0  # 0: KERNEL_EFFICIENCY[kernels]; 1: the ideal step (every kernel at its best)
    recompute: str = ""  # "": the layout's (parallel.recompute); "per_op": torchtitan's per-op policy (timed only)

    def __post_init__(self) -> None:
        if self.recompute and self.recompute not in RECOMPUTES:
            raise PlanError(f"recompute must be one of {', '.join(RECOMPUTES)}, not {self.recompute!r}")
        if self.kernels not in KERNEL_EFFICIENCY:
            raise PlanError(f"kernels must be one of {', '.join(KERNEL_EFFICIENCY)}, not {self.kernels!r}")
        if not self.kernel_efficiency:
            object.__setattr__(self, "kernel_efficiency", KERNEL_EFFICIENCY[self.kernels])


@dataclass
class StepTime:
    """Where one step's time goes, in seconds on the slowest GPU, and what it makes."""

    compute_s: float  # model FLOPs and element-wise work, without recomputation
    recompute_s: float  # what activation checkpointing re-runs
    exposed_communication_s: float
    bubble_s: float
    optimizer_s: float
    fixed_s: float
    step_s: float
    tokens_per_second_per_gpu: float
    mfu: float
    hfu: float
    micro_batches: int  # per data-parallel rank per step (gradient accumulation x pipeline micro-batches)
    global_batch: int
    communication: dict = field(default_factory=dict)  # exposed seconds by collective
    hidden_communication_s: float = 0.0  # what overlapped with compute
    overlap_slowdown_s: float = 0.0  # what the compute beside it lost: OVERLAP_SLOWDOWN x hidden_communication_s

    def breakdown(self) -> dict[str, float]:
        return {"compute_s": self.compute_s, "recompute_s": self.recompute_s,
                "exposed_communication_s": self.exposed_communication_s, "overlap_slowdown_s": self.overlap_slowdown_s,
                "bubble_s": self.bubble_s, "optimizer_s": self.optimizer_s, "fixed_s": self.fixed_s,
                "step_s": self.step_s}

    def to_dict(self) -> dict:
        return asdict(self)


def per_op_matmul_share(m: ModelPreset) -> float:
    """The share of a decoder layer's matmul FLOPs that per-op selective checkpointing re-runs: its 2nd, 4th, ...
    matmuls in forward order (MATMUL_ORDER). Llama 3 8B: k, out and up (wk, wo, w3), 0.37 of the layer's matmuls."""
    h, f, kv = m.hidden, m.ffn, m.n_kv_heads * m.head_dim
    width = {"q": h * h, "k": h * kv, "v": h * kv, "out": h * h, "gate": h * f, "up": h * f, "down": f * h}
    try:
        order = MATMUL_ORDER[m.family]
    except KeyError:
        raise PlanError(f"per-op checkpointing is timed for {', '.join(MATMUL_ORDER)} layers, not {m.family!r}") from None
    return sum(width[name] for name in order[1::2]) / sum(width[name] for name in order)


# ---------------------------------------------------------------- collectives


def collective_seconds(kind: str, nbytes: float, ranks: int, per_node: int, hw: Hardware) -> float:
    """One ring collective of `nbytes` (the full buffer: gathered output, reduced input) over `ranks` GPUs, `per_node`
    of them in each node, while every other group of the same kind runs beside it.

    Bytes each rank moves: (n-1)/n x S for all-gather and reduce-scatter, 2 (n-1)/n x S for all-reduce. Inside one
    node they move at NVLink's bus bandwidth. A group that spans nodes also sends those bytes out of each node once
    (the ring crosses it once), sharing the node's network with the node's other groups of the same collective
    (gpus_per_node / per_node of them); the slower of the two paths sets the time. Latency: NCCL's base plus a hop
    per ring step, network hops where the ring crosses nodes."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    factor = {"all_gather": 1.0, "reduce_scatter": 1.0, "all_reduce": 2.0}[kind] * (ranks - 1) / ranks
    intra = hardware.INTRA_NODE[hw.intra_node or hardware.gpu(hw.gpu).intra_node]
    per_node = max(1, min(per_node, ranks))
    nodes = -(-ranks // per_node)
    seconds = factor * nbytes / (intra.busbw_gbs * 1e9)
    steps = (ranks - 1) * (2 if kind == "all_reduce" else 1)
    if nodes > 1:
        net = hardware.network(hw.inter_node_gbps)
        groups_sharing = max(1, hw.gpus_per_node // per_node)
        seconds = max(seconds, factor * nbytes * groups_sharing / (net.achievable_gbs * 1e9))
        net_hops = steps * nodes / ranks
        latency = net_hops * net.hop_latency_us + (steps - net_hops) * intra.hop_latency_us
    else:
        latency = steps * intra.hop_latency_us
    return seconds + (hardware.NCCL_BASE_LATENCY_US + latency) * 1e-6


def _behind(seconds: float, nbytes: float, compute_s: float) -> float:
    """What shows of a bucketed collective of `seconds` and `nbytes` that runs beside `compute_s` of compute: what the
    compute cannot cover, and never less than its last bucket (DDP_BUCKET_BYTES), which has nothing left beside it."""
    return max(seconds * min(1.0, DDP_BUCKET_BYTES / nbytes), seconds - compute_s)


def _p2p_seconds(nbytes: float, hw: Hardware, crosses_nodes: bool) -> float:
    """A pipeline send of `nbytes` from every GPU of a stage to the next stage's, at once."""
    if not crosses_nodes:
        link = hardware.INTRA_NODE[hw.intra_node or hardware.gpu(hw.gpu).intra_node]
        return nbytes / (link.busbw_gbs * 1e9) + (hardware.NCCL_BASE_LATENCY_US + link.hop_latency_us) * 1e-6
    net = hardware.network(hw.inter_node_gbps)
    per_gpu = net.achievable_gbs * 1e9 / hw.gpus_per_node
    return nbytes / per_gpu + (hardware.NCCL_BASE_LATENCY_US + net.hop_latency_us) * 1e-6


# ---------------------------------------------------------------- the step


def _check(w: Workload) -> tuple[int, int, int]:
    """(dp, micro-batches per step, global batch) of a valid workload; PlanError naming the fix otherwise."""
    cfg, hw = w.parallel, w.hardware
    hardware.gpu(hw.gpu)
    if w.attention not in ATTENTIONS:
        raise PlanError(f"attention must be one of {', '.join(ATTENTIONS)}, not {w.attention!r}")
    for name, value in (("micro_batch", w.micro_batch), ("virtual_stages", w.virtual_stages),
                        ("gpus_per_node", hw.gpus_per_node), ("global_batch", w.global_batch or 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PlanError(f"{name} must be a whole number of at least 1, got {value!r}")
    cfg.check(hw.gpus)
    m = w.model
    for what, n in (("attention heads", m.heads), ("key/value heads", m.n_kv_heads), ("MLP width", m.ffn)):
        if n % cfg.tp:
            raise PlanError(f"tp={cfg.tp} must divide {m.name}'s {n} {what}")
    if cfg.pp * w.virtual_stages > m.layers:
        raise PlanError(f"pp x virtual_stages = {cfg.pp * w.virtual_stages} is more than {m.name}'s {m.layers} layers")
    dp = cfg.dp(hw.gpus)
    global_batch = w.global_batch or dp * w.micro_batch
    if global_batch % (dp * w.micro_batch):
        raise PlanError(f"the global batch of {global_batch} sequences must be a multiple of data-parallel ranks x "
                        f"micro-batch = {dp} x {w.micro_batch}: use {max(1, round(global_batch / (dp * w.micro_batch))) * dp * w.micro_batch}")
    if w.virtual_stages > 1 and cfg.pp == 1:
        raise PlanError(f"virtual_stages={w.virtual_stages} interleaves pipeline stages: it needs pp > 1")
    return dp, global_batch // (dp * w.micro_batch), global_batch


def step_time(w: Workload) -> StepTime:
    """The predicted step of `w`: its parts in seconds, tokens per second per GPU, MFU and HFU."""
    dp, micro_batches, global_batch = _check(w)
    m, cfg, hw = w.model, w.parallel, w.hardware
    gpu = hardware.gpu(hw.gpu)
    matmul_rate, attention_rate = (r * 1e12 for r in gpu.rates(hw.gpu_power_watts))
    hbm = gpu.hbm_gbs * 1e9
    t, p, s = cfg.tp, cfg.pp, m.seq_len
    tokens = w.micro_batch * s  # per micro-batch, per data-parallel rank
    layers = math.ceil(m.layers / p)  # on the busiest stage (a pipeline whose stages differ waits for it)
    breakdown = compute.param_breakdown(m)
    layer_params = breakdown["layers"] / m.layers
    head_params = m.vocab * m.hidden

    # compute per micro-batch on one GPU of a stage: forward = 1 unit, backward = 2
    matmul_fwd = 2 * tokens * (layer_params * layers + head_params / p) / t
    if w.attention == "flash":
        attn_fwd = 2 * tokens * s * m.hidden * layers / t  # 4 s h per token per layer, halved by the causal mask
        attn_s = attn_fwd * (1 + FLASH_BACKWARD_FORWARDS) / attention_rate
        attn_recompute_s = attn_fwd / attention_rate
        score_bytes = 0.0
    else:
        attn_fwd = 4 * tokens * s * m.hidden * layers / t  # the whole square, at the matmul rate
        attn_s = 3 * attn_fwd / matmul_rate
        attn_recompute_s = attn_fwd / matmul_rate
        score_bytes = UNFUSED_SCORE_BYTES * m.heads * s * tokens * layers / t
    replicated = 1 if (w.sequence_parallel or t == 1) else t  # without SP, norms and dropout run on every TP rank
    layer_bytes = memory.layer_bytes_per_token(m, "bf16")
    elementwise = ELEMENTWISE_PASSES * layer_bytes * tokens * layers * (replicated / t) + score_bytes
    elementwise += LOSS_BYTES_PER_VOCAB * m.vocab * tokens / t / p
    compute_mb = (3 * matmul_fwd / matmul_rate + attn_s + elementwise / hbm) / w.kernel_efficiency
    recompute = w.recompute or cfg.recompute
    share = per_op_matmul_share(m) if recompute == "per_op" else 0.0
    if recompute in ("full", "offload"):
        recompute_mb = (matmul_fwd / matmul_rate + attn_recompute_s + elementwise / 3 / hbm) / w.kernel_efficiency
    elif recompute == "selective" and w.attention == "unfused":  # Korthikanti's selective: the attention core again
        recompute_mb = (attn_recompute_s + score_bytes / 3 / hbm) / w.kernel_efficiency
    elif recompute == "per_op":  # every second matmul of each layer and the element-wise ops; attention is kept
        layer_matmul_fwd = 2 * tokens * layer_params * layers / t
        recompute_mb = (share * layer_matmul_fwd / matmul_rate + elementwise / 3 / hbm) / w.kernel_efficiency
    else:
        recompute_mb = 0.0  # fmlab's selective re-runs element-wise ops only; flash recomputes inside its kernel
    work_mb = compute_mb + recompute_mb
    # the recomputed forward runs in the backward pass, layer by layer, just before that layer's backward: the
    # forward pass is a third of the compute, the backward pass the rest and the recomputation
    bwd_mb = compute_mb * 2 / 3 + recompute_mb

    comm: dict[str, float] = {}
    hidden = 0.0
    # tensor parallelism: 2 all-reduces (or RS+AG pairs) per layer forward, 2 backward, 2 more re-running a forward
    if t > 1:
        per_node_tp = min(t, hw.gpus_per_node)
        act = 2 * tokens * m.hidden
        # per-op checkpointing keeps the reduce-scatters' outputs and re-runs the two all-gathers (one all-reduce's
        # bytes) that feed the matmuls it recomputes
        passes = 4 + {"full": 2, "offload": 2, "per_op": 1}.get(recompute, 0)
        tp_s = passes * layers * collective_seconds("all_reduce", act, t, per_node_tp, hw)
        comm["tensor_parallel"] = tp_s * micro_batches
    # the data-parallel side
    shard = cfg.shard_degree(hw.gpus)
    dp_per_node = min(dp, max(1, hw.gpus_per_node // t))  # ranks run tp innermost, then dp, then pp (Megatron's order)
    local_params = compute.param_count(m) / (t * p)
    if cfg.sharding in ("full", "hybrid") and shard > 1:
        units = layers + 1  # the decoder layers of a stage and the embedding/head as one more unit
        unit_params = local_params / units
        gather = collective_seconds("all_gather", GATHER_BYTES * unit_params, shard, min(shard, dp_per_node), hw)
        scatter = collective_seconds("reduce_scatter", w.gradient_bytes * unit_params, shard,
                                     min(shard, dp_per_node), hw)
        fwd_unit, bwd_unit = (work_mb - bwd_mb) / units, bwd_mb / units
        fwd_exposed = gather + (units - 1) * max(0.0, gather - fwd_unit)  # the first gather has nothing to hide behind
        bwd_comm = gather + scatter
        bwd_exposed = scatter + (units - 1) * max(0.0, bwd_comm - bwd_unit)
        if p > 1:
            # With pipeline stages FSDP keeps the gathered weights through the step's micro-batches and
            # reduce-scatters once (reshard_after_forward=False: Llama 3, torchtitan's pipeline recipes): one gather
            # forward, no gather backward, one reduce-scatter, per step.
            bwd_exposed = scatter + (units - 1) * max(0.0, scatter - bwd_unit)
            rounds, bwd_comm = 1, scatter
        else:
            rounds = micro_batches
        comm["fsdp_all_gather_forward"] = fwd_exposed * rounds
        comm["fsdp_backward"] = bwd_exposed * rounds
        hidden += (units * (gather + bwd_comm) - fwd_exposed - bwd_exposed) * rounds
        replicas = dp // shard
        if replicas > 1:
            per_node = 1 if shard >= dp_per_node else dp_per_node // shard
            ar = collective_seconds("all_reduce", w.gradient_bytes * local_params / shard, replicas, per_node, hw)
            exposed = max(ar / units, ar - bwd_mb)  # beside the last micro-batch's backward, layer by layer
            comm["replica_all_reduce"] = exposed
            hidden += ar - exposed
    elif dp > 1 and cfg.sharding in ("zero1", "zero2"):
        # ZeRO-1/2 as Megatron's distributed optimizer runs it: the gradients reduce-scattered bucket by bucket behind
        # the last micro-batch's backward (--overlap-grad-reduce), each rank's updated 16-bit parameters all-gathered
        # behind the next step's forward (--overlap-param-gather; both NeMo's defaults): DDP's bytes in two halves,
        # each with compute beside it (Megatron-LM docs/source/api-guide/dist_optimizer.md and its arguments)
        per_node_dp = min(dp, dp_per_node)
        rs = collective_seconds("reduce_scatter", w.gradient_bytes * local_params, dp, per_node_dp, hw)
        ag = collective_seconds("all_gather", GATHER_BYTES * local_params, dp, per_node_dp, hw)
        rs_exposed = _behind(rs, w.gradient_bytes * local_params, bwd_mb)
        ag_exposed = _behind(ag, GATHER_BYTES * local_params, work_mb - bwd_mb)
        comm["gradient_reduce_scatter"] = rs_exposed
        comm["parameter_all_gather"] = ag_exposed
        hidden += rs + ag - rs_exposed - ag_exposed
    elif dp > 1:  # DDP: the gradients' all-reduce, bucketed behind the last micro-batch's backward
        ar = collective_seconds("all_reduce", w.gradient_bytes * local_params, dp, min(dp, dp_per_node), hw)
        exposed = _behind(ar, w.gradient_bytes * local_params, bwd_mb)
        comm["data_parallel_all_reduce"] = exposed
        hidden += ar - exposed
    # pipeline: a send forward and one backward per micro-batch and chunk boundary
    bubble = 0.0
    if p > 1:
        v = w.virtual_stages
        act = 2 * tokens * m.hidden / t  # each TP rank sends its slice (Megatron's scatter-gather, or SP's)
        send = _p2p_seconds(act, hw, crosses_nodes=dp * t >= hw.gpus_per_node)  # a stage fills whole nodes
        comm["pipeline_send"] = 2 * send * (micro_batches * v + p - 1)
        pipelined = micro_batches * (work_mb + comm.get("tensor_parallel", 0.0) / micro_batches)
        bubble = (p - 1) / (v * micro_batches) * pipelined
    exposed_comm = sum(comm.values())

    optimizer_owned = local_params / (shard if cfg.sharding != "none" else 1)
    optimizer = OPTIMIZER_BYTES * optimizer_owned / hbm
    compute_s = compute_mb * micro_batches
    recompute_s = recompute_mb * micro_batches
    slowdown = OVERLAP_SLOWDOWN * hidden
    step = compute_s + recompute_s + exposed_comm + slowdown + bubble + optimizer + FIXED_STEP_S
    step_tokens = global_batch * s
    model_flops = compute.flops_per_token(m, s) * step_tokens
    if recompute == "per_op":
        hardware_flops = model_flops + share * 2 * breakdown["layers"] * step_tokens
    else:
        hardware_flops = model_flops * (1 + compute.recompute_overhead(m, recompute, s))
    peak = gpu.peak_tflops * 1e12 * hw.gpus
    return StepTime(compute_s, recompute_s, exposed_comm, bubble, optimizer, FIXED_STEP_S, step,
                    step_tokens / step / hw.gpus, model_flops / (step * peak), hardware_flops / (step * peak),
                    micro_batches, global_batch, comm, hidden, slowdown)
