"""Where this process sits, for the checkpoint code: rank, world size, barrier, gather, the node's leader.

Every function works in a world of 1 without a process group, so a checkpoint saves and loads the same way
in one process and in a torchrun world.
"""

from __future__ import annotations

import os
from typing import Any

import torch.distributed as dist


def dist_or_none():
    return dist if dist.is_available() and dist.is_initialized() else None


def rank() -> int:
    d = dist_or_none()
    return d.get_rank() if d else 0


def world() -> int:
    d = dist_or_none()
    return d.get_world_size() if d else 1


def barrier(group=None) -> None:
    d = dist_or_none()
    if d:
        d.barrier(group=group)


def node_leader() -> bool:
    """One process per machine: it creates and renames folders on that machine's disk (/opt/ml/checkpoints is
    per instance on SageMaker, synced to one S3 prefix; on a shared file system the leaders race harmlessly)."""
    return int(os.environ.get("LOCAL_RANK", rank())) == 0


def gather(obj: Any, group=None) -> list[Any]:
    d = dist_or_none()
    if not d:
        return [obj]
    out: list[Any] = [None] * d.get_world_size(group)
    d.all_gather_object(out, obj, group=group)  # in-memory, between this job's own processes
    return out


def from_rank0(value: Any) -> Any:
    """Rank 0's `value` on every rank (e.g. which checkpoint to resume, when disks differ between machines)."""
    return gather(value)[0]
