"""`parallelize`: the recipe that applies a layout to a model, in the order torchtitan uses.

Tensor parallelism first (it replaces weights with DTensor shards), then activation checkpointing /
offloading (they wrap whole decoder layers), then torch.compile per layer when asked (compiled.py), then FSDP or
DDP (they shard or replicate what is left).
Each step is a short file of its own: tensor.py, activations.py, fsdp.py, ddp.py, precision.py; smp.py takes
over when SageMaker model parallelism v2 (`torch.sagemaker`) is importable.
"""

from __future__ import annotations

import torch

from fmlab.parallel import activations, compiled, ddp, fsdp, precision, tensor
from fmlab.parallel.config import DistInfo, ParallelConfig
from fmlab.parallel.smp import smp_available, smp_parallelize


def parallelize(model: torch.nn.Module, cfg: ParallelConfig, dist: DistInfo, compile: bool = False) -> torch.nn.Module:
    """Apply the layout: TP, then activation checkpointing / offloading, then (with `compile`) torch.compile per
    decoder layer, then FSDP or DDP. Returns the model to train (DDP returns a wrapper; the other layouts change
    `model` in place and return it)."""
    cfg.check(dist.world_size).check_trainable()
    if not any(p.is_meta for p in model.parameters()):  # a meta model (delayed init) is materialised later
        model.to(dist.device)
    if smp_available() and dist.mesh is not None:
        return smp_parallelize(model, cfg, dist)
    if cfg.tp > 1:
        tensor.apply_tp(model, dist.mesh["tp"])
    activations.apply_activation_checkpointing(model, cfg.activation_checkpointing)
    if cfg.activation_offloading:
        activations.apply_activation_offloading(model, cfg.offload_horizon)
    if compile:
        compiled.compile_layers(model)
    dtype = precision.compute_dtype(cfg, dist.device)
    if dist.world_size == 1 or dist.dp_size == 1:
        precision.autocast_forward(model, dtype, dist.device)
        return model
    if cfg.sharding != "none" or cfg.tp > 1:
        # A TP model's weights are DTensors, which DDP does not take: its plain replicas use FSDP2 with shard
        # groups of one, which is exactly DDP's all-reduce of gradients.
        fsdp.apply_fsdp(model, dist.mesh, cfg.sharding, dtype)
        return model
    precision.autocast_forward(model, dtype, dist.device)
    return ddp.apply_ddp(model, dist)
