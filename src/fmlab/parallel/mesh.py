"""Join the process group and build the device mesh: the backend (gloo, nccl, smddp) and the 3-D mesh
(dp_replicate, dp_shard, tp) every layout of fmlab.parallel is placed on.

    dist = init_distributed(cfg)   # torchrun's RANK / WORLD_SIZE / LOCAL_RANK, or a world of 1
"""

from __future__ import annotations

import os

import torch

from fmlab.parallel.config import DistInfo, ParallelConfig
from fmlab.parallel.smp import smp_available, smp_init
from fmlab.plan.compute import PlanError


def resolve_backend(cfg: ParallelConfig) -> str:
    """The torch.distributed backend to use: smddp only when asked and importable."""
    if cfg.backend == "smddp":
        try:
            import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401  (registers the "smddp" backend)
        except ImportError:
            raise PlanError("backend='smddp' needs SageMaker's SMDDP library (smdistributed.dataparallel), found "
                            "only in SageMaker's PyTorch GPU containers: use backend='auto' here") from None
        return "smddp"
    if cfg.backend != "auto":
        return cfg.backend
    return "nccl" if torch.cuda.is_available() else "gloo"


def build_mesh(cfg: ParallelConfig, world_size: int, device_type: str):
    """The 3-D DeviceMesh (dp_replicate, dp_shard, tp) for `cfg`; call on every rank of an initialised world."""
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(device_type, cfg.mesh_shape(world_size), mesh_dim_names=cfg.dims)


def needs_mesh(cfg: ParallelConfig, backend: str) -> bool:
    """Whether the layout gets a DeviceMesh. Not for plain DDP on SMDDP: AWS says "(For PyTorch DDP jobs only)
    The smddp backend currently does not support creating subprocess groups with the
    torch.distributed.new_group() API" (SageMaker developer guide, "Use the SMDDP library in your PyTorch
    training script"), and plain DDP needs no subgroup: it all-reduces over the default group."""
    return not (backend == "smddp" and cfg.sharding == "none" and cfg.tp == 1)


def init_distributed(cfg: ParallelConfig) -> DistInfo:
    """Join the process group torchrun (or SageMaker) set up; a world of 1 when RANK/WORLD_SIZE are absent.

    Safe to call again in an initialised world (a new layout gets a new mesh on the same process group).
    """
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cfg.check(world)
    backend = resolve_backend(cfg)
    if backend in ("nccl", "smddp"):
        if not torch.cuda.is_available():
            raise PlanError(f"backend {backend!r} needs CUDA GPUs; on a CPU use backend='gloo' (or 'auto')")
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if world == 1 and not dist.is_initialized():
        return DistInfo(0, 1, 0, device, backend, None)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    if smp_available():
        smp_init(cfg)
    if not needs_mesh(cfg, backend):
        return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, device, backend, None)
    mesh = build_mesh(cfg, dist.get_world_size(), device.type)
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, device, backend, mesh)
