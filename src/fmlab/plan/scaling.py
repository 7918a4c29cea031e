"""How a layout spends devices and network: global batch, pipeline bubble, 3-D layouts, hybrid-sharding
traffic. Pure arithmetic for notebooks 05 and 06.

    from fmlab.plan.scaling import bubble_fraction, global_batch_tokens, hybrid_traffic, step_communication
    global_batch_tokens(2048, tp=8, micro_batch=1, seq_len=4096)   # TP shrinks the data-parallel degree
    bubble_fraction(stages=6, microbatches=24)                     # 0.208: idle time / ideal time
    hybrid_traffic(30e9, world=128, shard_degree=8)                # bytes per step: NVLink per GPU, EFA per node
    step_communication(30e9, 128, 64, 2048, 1.9e11, 312, 400)      # EFA seconds against compute seconds

Sources:
- pipeline bubble, (p - 1) / m, and (p - 1) / (v * m) with v interleaved stages per device: Narayanan et al.
  2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", sections 2.2.1-2.2.2.
- ring collectives: an all-gather or reduce-scatter of S bytes over n ranks sends (n - 1) / n * S per rank,
  an all-reduce twice that (Patarasuk and Yuan 2009; the NCCL performance notes use the same factors).
- ZeRO-3 / FSDP traffic per step: all-gather in the forward, all-gather in the backward, reduce-scatter of the
  gradients: 3 x the parameters (Rajbhandari et al. 2020, section 7.2.2); fmlab's FSDP2 gathers bf16 and reduces
  in fp32 (fmlab.parallel.precision's MixedPrecisionPolicy), so 2 + 2 + 4 bytes per parameter.
- NCCL builds its rings through the GPUs of a node (NVLink) before crossing to the next node, so a ring leaves
  each node once: NVIDIA's NCCL documentation, "NCCL_CROSS_NIC" and the ring/tree topology notes, read 2026-11-26.
"""

from __future__ import annotations

from fmlab.plan import hardware
from fmlab.plan.compute import PlanError
from fmlab.plan.layout import global_batch_tokens  # the one formula; module 7's layout rule uses it too

__all__ = ["bubble_fraction", "global_batch_tokens", "gpipe_schedule", "hybrid_traffic", "smallest_tp_for_batch",
           "step_communication", "three_d_layout"]


def smallest_tp_for_batch(devices: int, max_tokens: int, seq_len: int = 4096, micro_batch: int = 1,
                          choices: tuple[int, ...] = (1, 2, 4, 8)) -> int:
    """The smallest tensor-parallel degree that keeps the global batch within `max_tokens`."""
    for tp in choices:
        if devices % tp == 0 and global_batch_tokens(devices, tp, 1, micro_batch, seq_len) <= max_tokens:
            return tp
    raise PlanError(f"even tp={choices[-1]} gives more than {max_tokens:,} tokens per step on {devices} devices: "
                    "add pipeline parallelism or use fewer devices")


def bubble_fraction(stages: int, microbatches: int, interleave: int = 1) -> float:
    """Pipeline idle time over ideal compute time, (p - 1) / (v * m) (Narayanan et al. 2021)."""
    if stages < 1 or microbatches < 1 or interleave < 1:
        raise PlanError("stages, microbatches and interleave must all be at least 1")
    return (stages - 1) / (interleave * microbatches)


def gpipe_schedule(stages: int, microbatches: int, backward_cost: int = 2) -> list[dict]:
    """Every (stage, microbatch) forward and backward slot of an all-forward-then-all-backward (GPipe)
    schedule: [{"stage", "microbatch", "kind": "F"|"B", "start", "length"}], times in forward units."""
    slots = []
    for s in range(stages):
        for m in range(microbatches):
            slots.append({"stage": s, "microbatch": m, "kind": "F", "start": s + m, "length": 1})
    forward_end = stages + microbatches - 1
    for s in reversed(range(stages)):
        for m in range(microbatches):
            start = forward_end + ((stages - 1 - s) + m) * backward_cost
            slots.append({"stage": s, "microbatch": m, "kind": "B", "start": start, "length": backward_cost})
    return slots


def three_d_layout(replicas: int, pp: int = 6, tp: int = 4, layers: int = 6, gpus_per_node: int = 8) -> dict:
    """GPUs and nodes of a data x pipeline x tensor layout (the best-practices post's 6-layer example:
    DP k, PP 6, TP 4 on 8 * k * 3 GPUs)."""
    if layers % pp:
        raise PlanError(f"pp={pp} must divide the {layers} layers")
    gpus = replicas * pp * tp
    if gpus % gpus_per_node:
        raise PlanError(f"{gpus} GPUs do not fill whole {gpus_per_node}-GPU nodes")
    return {"dp": replicas, "pp": pp, "tp": tp, "gpus": gpus, "nodes": gpus // gpus_per_node,
            "layers_per_stage": layers // pp, "gpus_per_replica": pp * tp}


def hybrid_traffic(params: float, world: int, shard_degree: int, gpus_per_node: int = 8,
                   gather_bytes: int = 2, reduce_bytes: int = 4) -> dict[str, float]:
    """Bytes per training step under hybrid sharding as fmlab's engine runs it (FSDP2: bf16 all-gathers, fp32
    reduce-scatter and all-reduce): what each GPU sends inside its node (NVLink), what each node sends out of its
    EFA interfaces, and the model-state bytes each GPU keeps (16 per parameter / shard degree).

    Per GPU, inside a shard group of D: two all-gathers (forward, backward) and a reduce-scatter,
    (2 * gather + reduce) (D-1)/D x P bytes; across the R = world / D replicas, the all-reduce of its fp32 gradient
    shard, 2 (R-1)/R x P x reduce / D.
    Per node: NCCL's rings pass through a node's GPUs over NVLink and leave it once per ring, so a collective
    group with g of the node's GPUs in it sends one GPU's ring traffic out of the node for those g GPUs: a shard
    group that spans nodes (all 8 of a node's GPUs in it) sends one GPU's group traffic per node, not 8 times
    that; the replica all-reduce, whose groups take one GPU per shard group, leaves the node once per group the
    node's GPUs belong to.
    """
    if shard_degree < 1 or world % shard_degree:
        raise PlanError(f"shard degree {shard_degree} must divide the world of {world}")
    d, r = shard_degree, world // shard_degree
    group = (2 * gather_bytes + reduce_bytes) * (d - 1) / d * params
    replicas = 2 * (r - 1) / r * params * reduce_bytes / d
    within_node = d <= gpus_per_node and gpus_per_node % d == 0
    # replica groups: each holds one GPU of every shard group; a node's GPUs sit in gpus_per_node / g of them,
    # g = the node's GPUs in one replica group (gpus_per_node / D when the shard groups are smaller than a node)
    replica_groups_per_node = d if within_node else gpus_per_node
    spans_nodes = world > gpus_per_node
    return {"state_bytes": 16 * params / d,
            "group_bytes": group,  # what each GPU sends in its shard group's collectives, wherever they run
            "intra_node_bytes": group if within_node else 0.0,
            "node_efa_bytes": (0.0 if within_node else group) + (replicas * replica_groups_per_node
                                                                 if spans_nodes else 0.0)}


def step_communication(params: float, world: int, shard_degree: int, tokens_per_gpu: float, flops_per_token: float,
                       peak_tflops: float, network_gbps: float, mfu: float = 0.4, gpus_per_node: int = 8,
                       compute_seconds: float | None = None) -> dict:
    """A step's EFA time against its compute time: the node's bytes over the bandwidth NCCL achieves on that network
    (fmlab.plan.hardware.network: 41.8 GB/s of p4d's 50 GB/s line rate, the figure module 7's step model uses), and
    the GPU's
    model FLOPs at `mfu` of its peak, or `compute_seconds` where the caller has them (the predicted step's compute,
    fmlab.plan.speed). comms_bound when the network would take longer than the compute; how much of it FSDP's
    overlap hides is what fmlab.plan.speed works out layer by layer."""
    t = hybrid_traffic(params, world, shard_degree, gpus_per_node)
    efa = t["node_efa_bytes"] / (hardware.network(network_gbps).achievable_gbs * 1e9)
    compute = (compute_seconds if compute_seconds is not None
               else tokens_per_gpu * flops_per_token / (peak_tflops * 1e12 * mfu))
    return {"efa_seconds": efa, "compute_seconds": compute, "comms_bound": efa > compute, **t}
