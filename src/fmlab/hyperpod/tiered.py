"""HyperPod's managed tiered checkpointing: the cluster setting, and the one change it asks of the course's engine.

    from fmlab.hyperpod import tiered
    tiered.tiered_storage_config(20)     # CreateCluster/UpdateCluster's TieredStorageConfig (EKS clusters only)
    before, after = tiered.save_change() # the engine's DCP save, and the same save through the tiered writer

Managed tiered checkpointing keeps checkpoints in the cluster's CPU memory (a daemon HyperPod installs when
TieredStorageConfig is enabled) and writes some of them on to S3. It is offered on HyperPod clusters orchestrated by
EKS. On the training side it is a storage writer for torch.distributed.checkpoint from the `amzn-sagemaker-checkpointing`
package: the engine's `dcp.async_save(...)` keeps its state dict and changes its writer. `save_change` reads the
engine's own line from fmlab/checkpoint/checkpointer.py (without importing torch), so what it shows is what the course
runs. Not run here: the writer needs the cluster's memory daemon.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

READ = "2026-11-26"
PACKAGE = "amzn-sagemaker-checkpointing"
SOURCE = ("SageMaker developer guide, 'Set up managed tiered checkpointing' (docs.aws.amazon.com/sagemaker/latest/dg/"
          "managed-tier-checkpointing-setup.html): an EKS HyperPod cluster, TieredStorageConfig, memory 20-100%; "
          f"the {PACKAGE} README on PyPI (SageMakerCheckpointConfig, SageMakerTieredStorageWriter, async_save); "
          "What's New 2025-09-08: 'available for SageMaker HyperPod clusters using the EKS orchestrator'; read " + READ)
MEMORY_PERCENT = (20, 100)  # InstanceMemoryAllocationPercentage: the API takes an int; the guide's prose the range

IMPORTS = ("from amzn_sagemaker_checkpointing.config.sagemaker_checkpoint_config import SageMakerCheckpointConfig\n"
           "from amzn_sagemaker_checkpointing.checkpointing.filesystem.filesystem import SageMakerTieredStorageWriter")
CONFIG = ("config = SageMakerCheckpointConfig(namespace=job_name, world_size=dist.get_world_size(),\n"
          "                                  s3_tier_base_path=\"s3://bucket/checkpoints\")\n"
          "config.save_to_s3 = step % s3_every == 0  # memory every save, S3 every s3_every steps")
_ENGINE_WRITER = re.compile(r"storage_writer=dcp\.FileSystemWriter\([^)]*\)")
TIERED_WRITER = "storage_writer=SageMakerTieredStorageWriter(checkpoint_config=config, step=step)"


class TieredError(ValueError):
    """A tiered-checkpointing setting AWS would refuse, or an engine whose save line moved."""


def tiered_storage_config(memory_percent: int) -> dict:
    """TieredStorageConfig for CreateCluster/UpdateCluster: Mode Enable and the share of each instance's memory."""
    if not isinstance(memory_percent, int) or not MEMORY_PERCENT[0] <= memory_percent <= MEMORY_PERCENT[1]:
        raise TieredError(f"InstanceMemoryAllocationPercentage must be a whole number from {MEMORY_PERCENT[0]} to "
                          f"{MEMORY_PERCENT[1]} (the developer guide's range), not {memory_percent!r}")
    return {"Mode": "Enable", "InstanceMemoryAllocationPercentage": memory_percent}


def engine_save_line() -> str:
    """The engine's asynchronous DCP save, as written in fmlab/checkpoint/checkpointer.py (one statement)."""
    path = Path(importlib.util.find_spec("fmlab.checkpoint").submodule_search_locations[0]) / "checkpointer.py"
    text = path.read_text()
    start = text.find("dcp.async_save(")
    if start < 0:
        raise TieredError(f"no dcp.async_save( in {path}: the engine's save moved; update fmlab.hyperpod.tiered")
    line_start = text.rfind("\n", 0, start) + 1
    depth, end = 0, start
    for end in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        if depth == 0 and text[end] == ")":
            break
    return " ".join(ln.strip() for ln in text[line_start:end + 1].splitlines())


def save_change() -> tuple[str, str]:
    """(the engine's save, the same save through HyperPod's tiered writer): only the storage writer changes."""
    before = engine_save_line()
    if not _ENGINE_WRITER.search(before):
        raise TieredError(f"the engine's save no longer passes a FileSystemWriter: {before!r}")
    return before, _ENGINE_WRITER.sub(TIERED_WRITER, before)
