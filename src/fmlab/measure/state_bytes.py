"""Memory of the model states on one rank: predicted by the planner, measured from the real shards.

    from fmlab.measure.state_bytes import measured_state_bytes, predicted_state_bytes
    predicted_state_bytes("tiny", ParallelConfig(sharding="full"), world_size=4)   # {"weights": ..., ...}
    measured_state_bytes(model, optimizer)                                          # after one step

The planner (fmlab.plan.layout.model_state_bytes) counts mixed-precision Adam: 2 bytes of bf16 weights, 2 of bf16
gradients and 12 of fp32 master weights + Adam moments per parameter (ZeRO, section 3). The laptop trains in
fp32, so the same 16 bytes split 4 (fp32 weights, which are the master copy) + 4 (gradients) + 8 (Adam's two
moments); `predicted_state_bytes(..., fp32=True)` rescales the planner's parts accordingly. Measured bytes
are the local shards only (DTensor.to_local()), so they show what sharding really leaves on each rank.
"""

from __future__ import annotations

import torch

from fmlab.plan import catalog, compute, layout

MIXED_BYTES = {"weights": layout.WEIGHT_BYTES, "gradients": layout.GRAD_BYTES, "optimizer": layout.OPTIMIZER_BYTES}
FP32_BYTES = {"weights": 4, "gradients": 4, "optimizer": 8}


def predicted_state_bytes(preset: str, cfg, world_size: int, fp32: bool = True) -> dict[str, float]:
    """Bytes of weights, gradients and optimizer state per rank, from the planner."""
    m = catalog.model(preset)
    parts = layout.model_state_bytes(compute.param_count(m), cfg.check(world_size, m), world_size)
    if not fp32:
        return parts
    return {k: v * FP32_BYTES[k] / MIXED_BYTES[k] for k, v in parts.items()}


def local_bytes(t: torch.Tensor) -> int:
    """Bytes this rank holds for a tensor (its local shard for a DTensor)."""
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()


def measured_state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of this rank's parameters, gradients and optimizer state (call after a step)."""
    params = list(model.parameters())
    return {
        "weights": sum(local_bytes(p) for p in params),
        "gradients": sum(local_bytes(p.grad) for p in params if p.grad is not None),
        "optimizer": sum(local_bytes(v) for state in optimizer.state.values() for v in state.values()
                         if torch.is_tensor(v) and v.dim() > 0),
    }
