"""SageMaker model parallelism v2 (`torch.sagemaker`, "SMP v2"): its path where it is installed.

    smp_init(cfg)                          # tsm.init with the layout's settings (the SMP v2 images)
    model = smp_parallelize(model, cfg, dist)

SMP's settings (`--mp_parameters` <-> ParallelConfig: from_mp_parameters, to_mp_parameters) are torch-free and live in
fmlab.service.smp_settings; they are re-exported here and by fmlab.parallel. Where `torch.sagemaker` is importable
(only the SMP images, smdistributed-modelparallel; the SageMaker PyTorch training containers do not ship it; SMP v2
is frozen at v2.8.0 with PyTorch 2.5.1: fmlab.service.libraries), `init_distributed` calls `tsm.init(...)` and
`parallelize` calls `tsm.transform(model)` and wraps the result with FSDP, as the SMP v2 documentation's training
scripts do; everywhere else the native PyTorch path of fmlab.parallel does the same job with the same settings.
"""

from __future__ import annotations

import functools
import importlib.util

import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
    offload_wrapper,
)
from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision, ShardingStrategy
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

from fmlab.models import decoder_layers
from fmlab.parallel.precision import compute_dtype
from fmlab.service.smp_settings import from_mp_parameters, to_mp_parameters  # noqa: F401  (fmlab.parallel's API)


def smp_available() -> bool:
    """True inside a SageMaker container that ships SMP v2 (`import torch.sagemaker` works)."""
    try:
        return importlib.util.find_spec("torch.sagemaker") is not None
    except (ImportError, ValueError):
        return False



# ---------------------------------------------------------------- the SMP path (the SMP v2 images)


def smp_init(cfg) -> None:
    """tsm.init with the layout's settings (SMP also reads them from SageMaker's launcher on its own)."""
    import torch.sagemaker as tsm

    tsm.init(to_mp_parameters(cfg) if cfg.sharding != "none" else None)


def smp_parallelize(model, cfg, dist):
    """SMP v2's recipe: tsm.transform (its tensor-parallel layers), FSDP with hybrid sharding, checkpointing
    of the transformer layers, offloading; the structure of the SMP v2 documentation's training scripts."""
    from torch.sagemaker import transform

    layer_types = {type(layer) for layer in decoder_layers(model)}
    model = transform(model)
    dtype = compute_dtype(cfg, dist.device)
    strategy = ShardingStrategy.HYBRID_SHARD if cfg.sharding == "hybrid" else ShardingStrategy.FULL_SHARD
    model = FullyShardedDataParallel(
        model,
        auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls=layer_types),
        sharding_strategy=strategy,
        mixed_precision=None if dtype == torch.float32 else MixedPrecision(param_dtype=dtype, reduce_dtype=dtype,
                                                                            buffer_dtype=torch.float32),
        device_id=dist.device,
        use_orig_params=True,
    )
    if cfg.activation_checkpointing != "none":
        apply_activation_checkpointing(
            model, check_fn=lambda m: type(m) in layer_types,
            checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT))
    if cfg.activation_offloading:
        model = offload_wrapper(model)
    return model
