"""One description of a parallel layout, and where a process sits in it.

    cfg = ParallelConfig(sharding="hybrid", hybrid_shard_degree=2, tp=2).check(world_size=8, model_preset="tiny")
    cfg.mesh_shape(8)            # (2, 2, 2): replicas of the model, shards within a replica, tensor-parallel ranks

`ParallelConfig.check` raises PlanError naming the fix for a layout that cannot run; `DistInfo` is what
`fmlab.parallel.mesh.init_distributed` returns: rank, world, device and the (dp_replicate, dp_shard, tp) mesh.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fmlab.plan import catalog
from fmlab.plan.compute import PlanError

SHARDINGS = ("none", "full", "hybrid")
CHECKPOINTING = ("none", "full", "selective")
PRECISIONS = ("auto", "bf16", "fp32")
BACKENDS = ("auto", "gloo", "nccl", "neuron", "smddp")


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
    backend: str = "auto"  # "auto" (nccl on GPU, neuron on Trainium2/3, gloo on CPU) | "gloo" | "nccl" | "neuron" | "smddp"

    def check(self, world_size: int, model_preset=None) -> ParallelConfig:
        """Raise PlanError naming the fix if this layout cannot run on `world_size` processes; return self."""
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
