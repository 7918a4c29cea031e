"""Sharded data parallelism with FSDP2 (`fully_shard`): full sharding, and hybrid sharding on a 2-D mesh.

    apply_fsdp(model, mesh, "full", torch.float32)     # ZeRO-3: shard over every data-parallel rank
    apply_fsdp(model, mesh, "hybrid", torch.bfloat16)  # shard within groups of D, replicate across groups

Each decoder layer becomes one FSDP unit (its parameters are all-gathered just before it runs and freed just
after), then the root takes what is left (embeddings, final norm, LM head). Gradients are reduce-scattered
within the shard group and, for hybrid sharding, all-reduced across the replica groups.

Why FSDP2 and not FSDP1's ShardingStrategy.HYBRID_SHARD: on CPU/gloo, FSDP1 HYBRID_SHARD on a
(replicate=2, shard=1) mesh silently stops averaging gradients across the replicas, while FSDP2 is correct for
full and hybrid meshes. tests/parallel/test_parallel_2proc.py keeps an FSDP1 control that shows the difference.
"""

from __future__ import annotations

import torch
from torch.distributed.fsdp import fully_shard

from fmlab.models import decoder_layers
from fmlab.parallel.precision import fsdp_policy


def data_parallel_mesh(mesh, sharding: str):
    """The part of the (dp_replicate, dp_shard, tp) mesh that FSDP shards and replicates over."""
    if sharding == "full":
        return mesh["dp_shard"]
    return mesh["dp_replicate", "dp_shard"]  # hybrid, and plain replicas of a TP model (shard groups of 1)


def apply_fsdp(model: torch.nn.Module, mesh, sharding: str, dtype: torch.dtype) -> torch.nn.Module:
    dp_mesh = data_parallel_mesh(mesh, sharding)
    policy = fsdp_policy(dtype)
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=dp_mesh, mp_policy=policy)
    fully_shard(model, mesh=dp_mesh, mp_policy=policy)
    return model
