"""The parallel layout (ParallelConfig, defined once in fmlab.plan.parallelism) and where a process sits in it.

    cfg = ParallelConfig(sharding="hybrid", hybrid_shard_degree=2, tp=2).check(8, "tiny")
    cfg.mesh_shape(8)            # (2, 2, 2): replicas of the model, shards within a replica, tensor-parallel ranks

`ParallelConfig.check` raises PlanError naming the fix for a layout that cannot run; `DistInfo` is what
`fmlab.parallel.mesh.init_distributed` returns: rank, world, device and the (dp_replicate, dp_shard, tp) mesh.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fmlab.plan.parallelism import ParallelConfig

__all__ = ["DistInfo", "ParallelConfig"]


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
