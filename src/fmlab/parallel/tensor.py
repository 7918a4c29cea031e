"""Tensor parallelism with torch.distributed.tensor.parallel (Megatron-style), and FSDP + TP on a 2-D mesh.

    apply_tp(model, mesh["tp"])      # then fsdp.apply_fsdp(model, mesh, "full", dtype) for FSDP + TP

Column-parallel q/k/v and MLP up/gate (each rank keeps whole heads / a slice of the MLP width), row-parallel
output projections (each rank's partial result is all-reduced): two all-reduces per layer in the forward,
two in the backward. The token embedding is split by vocabulary rows and the LM head by output vocabulary,
with the logits gathered, so the loss code is unchanged. The plan per family comes from fmlab.models.tp_plan.
A model whose LM head shares the embedding's weight (OPT) is re-tied after splitting: both are split by
vocabulary rows, so the shared shard stays one parameter.
"""

from __future__ import annotations

import torch
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from fmlab.models import embedding_name, shard_attention_heads, tp_plan


def styles():
    """The ParallelStyle for each entry of a tp_plan."""
    return {
        "colwise": ColwiseParallel(),
        "rowwise": RowwiseParallel(),
        "embedding": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate()),
        "lm_head": ColwiseParallel(output_layouts=Replicate()),
    }


def apply_tp(model: torch.nn.Module, tp_mesh) -> torch.nn.Module:
    embedding = model.get_submodule(embedding_name(model))
    tied = model.lm_head.weight is embedding.weight
    by_style = styles()
    parallelize_module(model, tp_mesh, {name: by_style[s] for name, s in tp_plan(model).items()})
    if tied:
        model.lm_head.weight = embedding.weight
    shard_attention_heads(model, tp_mesh.size())
    return model
