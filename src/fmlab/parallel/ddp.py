"""Data parallelism with DistributedDataParallel: every rank holds the whole model; gradients are averaged
with one all-reduce per bucket while the backward pass is still running.

    model = apply_ddp(model, dist)     # gloo on CPU, nccl on GPU, smddp inside SageMaker when asked

The process group is the mesh's dp_replicate dimension (the whole world when there is no tensor parallelism).
SageMaker's SMDDP library plugs in as the torch.distributed backend "smddp" (fmlab.parallel.resolve_backend);
it cannot create subgroups, so on it there is no mesh and DDP uses the default group (the same ranks).
"""

from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel


def apply_ddp(model: torch.nn.Module, dist) -> DistributedDataParallel:
    group = dist.mesh["dp_replicate"].get_group() if dist.mesh is not None else None
    device_ids = [dist.device.index] if dist.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, process_group=group)
