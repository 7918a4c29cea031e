"""The parallel engine: one call turns a model into DDP, FSDP (full or hybrid), TP or FSDP+TP.

    from fmlab.parallel import ParallelConfig, init_distributed, parallelize
    cfg = ParallelConfig(sharding="full", tp=2).check(world_size=4, model_preset="tiny")
    dist = init_distributed(cfg)            # torchrun's RANK / WORLD_SIZE / LOCAL_RANK, or a world of 1
    model = parallelize(build_model("tiny"), cfg, dist)

Run it with `torchrun --nproc-per-node 4 -m fmlab.train ...` (gloo on a CPU), or inside a SageMaker job.
Each layout lives in its own short file (picotron-style): ddp.py, fsdp.py, tensor.py, activations.py,
precision.py, and smp.py for SageMaker model parallelism v2 (`torch.sagemaker`), used when importable.
The order is fixed: tensor parallelism first (it replaces weights with DTensor shards), then activation
checkpointing / offloading (they wrap whole decoder layers), then FSDP or DDP (they shard or replicate what
is left). All devices are arranged on one 3-D device mesh (dp_replicate, dp_shard, tp).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from fmlab.parallel.smp import from_mp_parameters, smp_available
from fmlab.planning import PlanError

__all__ = ["ParallelConfig", "DistInfo", "init_distributed", "parallelize", "from_mp_parameters", "build_mesh",
           "PlanError"]

SHARDINGS = ("none", "full", "hybrid")
CHECKPOINTING = ("none", "full", "selective")
PRECISIONS = ("auto", "bf16", "fp32")
BACKENDS = ("auto", "gloo", "nccl", "smddp")


@dataclass
class ParallelConfig:
    """How to lay the model out over the devices. `check()` says what to change if it cannot work."""

    sharding: str = "none"  # "none" (plain DDP when world > 1) | "full" (FSDP2 fully_shard) | "hybrid"
    hybrid_shard_degree: int = 0  # for "hybrid": shard within groups of this size, replicate across groups
    tp: int = 1  # tensor-parallel degree (2-D mesh with FSDP when sharding != "none")
    activation_checkpointing: str = "none"  # "none" | "full" | "selective"
    activation_offloading: bool = False
    offload_horizon: int = 2  # SMP's activation_loading_horizon, kept for the GPU path
    mixed_precision: str = "auto"  # "auto" (bf16 on a GPU that supports it, fp32 on CPU) | "bf16" | "fp32"
    backend: str = "auto"  # "auto" (nccl on GPU, gloo on CPU) | "gloo" | "nccl" | "smddp"

    def check(self, world_size: int, model_preset=None) -> ParallelConfig:
        """Raise PlanError naming the fix if this layout cannot run on `world_size` processes; return self."""
        from fmlab import catalog

        _choice("sharding", self.sharding, SHARDINGS)
        _choice("activation_checkpointing", self.activation_checkpointing, CHECKPOINTING)
        _choice("mixed_precision", self.mixed_precision, PRECISIONS)
        _choice("backend", self.backend, BACKENDS)
        if world_size < 1:
            raise PlanError(f"world size must be at least 1, got {world_size}")
        if self.tp < 1:
            raise PlanError(f"tp must be at least 1, got {self.tp}")
        if world_size % self.tp:
            raise PlanError(f"tp={self.tp} does not divide the {world_size} processes: choose a tp that divides "
                            f"{world_size} (e.g. {_divisor(world_size, self.tp)}), or run {self.tp * max(1, world_size // self.tp)} processes")
        dp = world_size // self.tp
        if self.sharding == "hybrid":
            d = self.hybrid_shard_degree
            if d < 1:
                raise PlanError("sharding='hybrid' needs hybrid_shard_degree >= 1 (the size of each sharding group, "
                                f"e.g. the GPUs of one node); with {dp} data-parallel ranks try {_divisor(dp, 8)}")
            if dp % d:
                raise PlanError(f"hybrid_shard_degree={d} must divide the {dp} data-parallel ranks "
                                f"(world {world_size} / tp {self.tp}): try {_divisor(dp, d)}")
        elif self.hybrid_shard_degree not in (0, 1):
            raise PlanError(f"hybrid_shard_degree={self.hybrid_shard_degree} is only used with sharding='hybrid'; "
                            f"set sharding='hybrid' or leave the degree at 0")
        if self.offload_horizon < 1:
            raise PlanError(f"offload_horizon must be at least 1 layer, got {self.offload_horizon}")
        if model_preset is not None:
            m = catalog.model(model_preset) if isinstance(model_preset, str) else model_preset
            for what, n in (("attention heads", m.heads), ("key/value heads", m.n_kv_heads),
                            ("MLP width", m.ffn), ("hidden size", m.hidden)):
                if n % self.tp:
                    raise PlanError(f"tp={self.tp} must divide {m.name}'s {n} {what} (each device keeps whole "
                                    f"heads): use tp={_divisor(_gcd_all(m), self.tp)}")
        return self

    @property
    def dims(self) -> tuple[str, ...]:
        return ("dp_replicate", "dp_shard", "tp")

    def mesh_shape(self, world_size: int) -> tuple[int, int, int]:
        """(dp_replicate, dp_shard, tp): replicas of the model, shards within a replica, tensor-parallel ranks."""
        dp = world_size // self.tp
        if self.sharding == "full":
            return (1, dp, self.tp)
        if self.sharding == "hybrid":
            return (dp // self.hybrid_shard_degree, self.hybrid_shard_degree, self.tp)
        return (dp, 1, self.tp)


@dataclass
class DistInfo:
    """Where this process sits: its rank, the world, its device and the device mesh of the layout."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str
    # torch.distributed.DeviceMesh with dims (dp_replicate, dp_shard, tp); None for a world of 1, and for plain
    # DDP on SMDDP (its backend cannot create the subgroups a mesh needs: every rank is then one replica)
    mesh: object | None

    @property
    def dp_rank(self) -> int:
        """Which slice of the global batch this rank reads (ranks of one TP group read the same data)."""
        if self.mesh is None:
            return self.rank
        return self.mesh["dp_replicate"].get_local_rank() * self.mesh["dp_shard"].size() + \
            self.mesh["dp_shard"].get_local_rank()

    @property
    def dp_size(self) -> int:
        if self.mesh is None:
            return self.world_size
        return self.mesh["dp_replicate"].size() * self.mesh["dp_shard"].size()


def _choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise PlanError(f"{name} must be one of {', '.join(map(repr, allowed))}, not {value!r}")


def _divisor(n: int, near: int) -> int:
    """The largest divisor of n that is at most `near` (at least 1)."""
    return max(d for d in range(1, max(1, min(n, near)) + 1) if n % d == 0)


def _gcd_all(m) -> int:
    from math import gcd

    return gcd(gcd(m.heads, m.n_kv_heads), gcd(m.ffn, m.hidden))


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
        from fmlab.parallel.smp import smp_init

        smp_init(cfg)
    if not needs_mesh(cfg, backend):
        return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, device, backend, None)
    mesh = build_mesh(cfg, dist.get_world_size(), device.type)
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, device, backend, mesh)


def parallelize(model: torch.nn.Module, cfg: ParallelConfig, dist: DistInfo) -> torch.nn.Module:
    """Apply the layout: TP, then activation checkpointing / offloading, then FSDP or DDP. Returns the model
    to train (DDP returns a wrapper; the other layouts change `model` in place and return it)."""
    from fmlab.parallel import activations, ddp, fsdp, precision, tensor

    cfg.check(dist.world_size)
    if not any(p.is_meta for p in model.parameters()):  # a meta model (delayed init) is materialised later
        model.to(dist.device)
    if smp_available() and dist.mesh is not None:
        from fmlab.parallel.smp import smp_parallelize

        return smp_parallelize(model, cfg, dist)
    if cfg.tp > 1:
        tensor.apply_tp(model, dist.mesh["tp"])
    activations.apply_activation_checkpointing(model, cfg.activation_checkpointing)
    if cfg.activation_offloading:
        activations.apply_activation_offloading(model, cfg.offload_horizon)
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
