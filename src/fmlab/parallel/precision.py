"""Mixed precision: bf16 compute where the device supports it, fp32 on a CPU (the laptop default).

    compute_dtype(ParallelConfig(mixed_precision="auto"), torch.device("cpu"))   # torch.float32

FSDP takes the dtype as a MixedPrecisionPolicy (bf16 parameters for compute, fp32 gradient reduction);
the DDP and single-device paths run the forward under torch.autocast instead. Parameters and optimizer state
stay fp32 (the "master weights") in both cases.
"""

from __future__ import annotations

import functools

import torch
from torch.distributed.fsdp import MixedPrecisionPolicy


def compute_dtype(cfg, device: torch.device) -> torch.dtype:
    """bf16 or fp32, from cfg.mixed_precision: 'auto' picks bf16 on a GPU that supports it and on Trainium (the
    dtype its matrix units run at their quoted peak; TorchNeuron takes torch.autocast(device_type="neuron"))."""
    if cfg.mixed_precision == "fp32":
        return torch.float32
    if cfg.mixed_precision == "bf16":
        return torch.bfloat16
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    if device.type == "neuron":
        return torch.bfloat16
    return torch.float32


def fsdp_policy(dtype: torch.dtype):
    """FSDP2's policy: compute in `dtype`, reduce gradients in fp32."""
    if dtype == torch.float32:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)


def autocast_forward(model: torch.nn.Module, dtype: torch.dtype, device: torch.device) -> None:
    """Run `model`'s forward under autocast to `dtype` (nothing to do for fp32)."""
    if dtype == torch.float32:
        return
    forward = model.forward

    @functools.wraps(forward)
    def forward_in_dtype(*args, **kwargs):
        with torch.autocast(device_type=device.type, dtype=dtype):
            return forward(*args, **kwargs)

    model.forward = forward_in_dtype
