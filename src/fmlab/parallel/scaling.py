"""How a layout spends devices and network: global batch, pipeline bubble, 3-D layouts, hybrid-sharding
traffic. Pure arithmetic for notebooks 05 and 06.

    global_batch_tokens(2048, tp=8, micro_batch=1, seq_len=4096)   # TP shrinks the data-parallel degree
    bubble_fraction(stages=6, microbatches=24)                     # 0.208: idle time / ideal time
    hybrid_traffic(30e9, world=128, shard_degree=8)                # bytes each GPU sends per step

Sources:
- pipeline bubble, (p - 1) / m, and (p - 1) / (v * m) with v interleaved stages per device: Narayanan et al.
  2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", sections 2.2.1-2.2.2.
- ring collectives: an all-gather or reduce-scatter of S bytes over n ranks sends (n - 1) / n * S per rank,
  an all-reduce twice that (Patarasuk and Yuan 2009; the NCCL performance notes use the same factors).
- ZeRO-3 / FSDP traffic per step: all-gather in the forward, all-gather in the backward, reduce-scatter of the
  gradients: 3 x the parameters (Rajbhandari et al. 2020, section 7.2.2).
"""

from __future__ import annotations

from fmlab.plan.compute import PlanError
from fmlab.plan.layout import global_batch_tokens  # the one formula; module 7's layout rule uses it too

__all__ = ["bubble_fraction", "global_batch_tokens", "gpipe_schedule", "hybrid_traffic", "smallest_tp_for_batch",
           "three_d_layout"]


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
                   bytes_per_param: int = 2) -> dict[str, float]:
    """Bytes one GPU sends per training step under hybrid sharding, split into inside the node (NVLink) and
    between nodes (EFA), and the model-state bytes it keeps (16 per parameter / shard degree).

    Inside a shard group: all-gather (forward), all-gather (backward), reduce-scatter: 3 (D-1)/D x P x b.
    Across the R = world / D replicas: all-reduce of this rank's gradient shard: 2 (R-1)/R x P x b / D.
    A shard group that spans nodes sends its group traffic between nodes too.
    """
    if shard_degree < 1 or world % shard_degree:
        raise PlanError(f"shard degree {shard_degree} must divide the world of {world}")
    d, r, size = shard_degree, world // shard_degree, params * bytes_per_param
    group = 3 * (d - 1) / d * size
    replicas = 2 * (r - 1) / r * size / d
    within_node = d <= gpus_per_node and gpus_per_node % d == 0
    return {"state_bytes": 16 * params / d,
            "intra_node_bytes": group if within_node else 0.0,
            "inter_node_bytes": replicas + (0.0 if within_node else group)}
