"""Activation memory: checkpointing (full or selective), offloading to host memory, and a counter of the
bytes autograd keeps for the backward pass.

    apply_activation_checkpointing(model, "full")   # keep only each decoder layer's input, recompute the rest
    apply_activation_offloading(model)              # move what each layer keeps to host (CPU) memory
    saved_bytes_for_backward(model, batch)          # {"on_device": ..., "offloaded": ...}

Selective checkpointing keeps the outputs of the matrix multiplies and attention (expensive to recompute)
and recomputes the cheap element-wise ops (norms, activations, residual adds); torchtitan's op-level policy.
Offloading uses saved-tensor hooks: every activation a decoder layer saves is copied to pinned host memory
in the forward and copied back when the backward reaches that layer. Combined with checkpointing this is
SMP v2's activation offloading (only the checkpointed layer inputs travel). On a CPU host and device are the
same memory, so offloading saves nothing there; the counter shows what WOULD leave the GPU.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from fmlab.models import decoder_layers

_LEDGERS: list[dict] = []  # active saved_bytes_for_backward counters (offload hooks report to them)


def _is_parameter(t: torch.Tensor) -> bool:
    """A parameter or a view of one (e.g. weight.t()); weights are not activations."""
    base = t._base if t._base is not None else t
    return base.is_leaf and base.requires_grad


def _storage_key(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


def _report(kind: str, t: torch.Tensor) -> None:
    for ledger in _LEDGERS:
        ledger[kind][_storage_key(t)[0]] = _storage_key(t)[1]


# ---------------------------------------------------------------- checkpointing


def _selective_policy(ctx, op, *args, **kwargs):
    from torch.utils.checkpoint import CheckpointPolicy

    aten = torch.ops.aten
    keep = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.linear.default,
            aten._scaled_dot_product_flash_attention.default, aten._scaled_dot_product_efficient_attention.default,
            aten._scaled_dot_product_flash_attention_for_cpu.default}
    if op not in keep:
        return CheckpointPolicy.PREFER_RECOMPUTE
    if not ctx.is_recompute:  # selective checkpointing keeps these in its own cache, not via saved-tensor hooks
        outputs = ctx.op_output if isinstance(ctx.op_output, tuple | list) else (ctx.op_output,)
        for t in outputs:
            if isinstance(t, torch.Tensor):
                _report("on_device", t)
    return CheckpointPolicy.MUST_SAVE


def _selective_context():
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    return create_selective_checkpoint_contexts(_selective_policy)


def apply_activation_checkpointing(model: nn.Module, mode: str) -> nn.Module:
    """Wrap every decoder layer: mode 'full' keeps only its input, 'selective' also keeps matmul outputs."""
    if mode == "none":
        return model
    if mode not in ("full", "selective"):
        raise ValueError(f"activation checkpointing must be 'none', 'full' or 'selective', not {mode!r}")
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

    extra = {"context_fn": _selective_context} if mode == "selective" else {}
    layers = decoder_layers(model)
    for i, layer in enumerate(layers):
        layers[i] = checkpoint_wrapper(layer, checkpoint_impl=CheckpointImpl.NO_REENTRANT, **extra)
    return model


# ---------------------------------------------------------------- offloading


class OffloadToHost(torch.autograd.graph.saved_tensors_hooks):
    """Saved-tensor hooks: pack an activation into (pinned) host memory, unpack it back to its device."""

    def __init__(self) -> None:
        def pack(t: torch.Tensor):
            if _is_parameter(t):
                return t  # weights stay where they are; only activations travel
            if t.device.type == "cpu":
                _report("offloaded", t)
                return t  # host and device are the same memory on a CPU
            host = torch.empty(t.size(), dtype=t.dtype, layout=t.layout, pin_memory=True)
            host.copy_(t, non_blocking=True)
            _report("offloaded", host)
            return (t.device, host)

        def unpack(packed):
            if isinstance(packed, tuple):
                device, host = packed
                return host.to(device, non_blocking=True)
            return packed

        super().__init__(pack, unpack)


class OffloadedLayer(nn.Module):
    """A decoder layer whose saved activations live in host memory between its forward and backward."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.offloaded_module = layer

    def forward(self, *args, **kwargs):
        with OffloadToHost():
            return self.offloaded_module(*args, **kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.offloaded_module, name)  # e.g. attention_type, read by the model's forward


def apply_activation_offloading(model: nn.Module, horizon: int = 2) -> nn.Module:
    """Offload every decoder layer's saved activations. `horizon` (SMP's activation_loading_horizon, how many
    layers are prefetched back ahead of the backward pass) is honoured by SMP; the native hooks load each
    layer's activations when the backward pass reaches it."""
    if horizon < 1:
        raise ValueError(f"the offload horizon must be at least 1 layer, got {horizon}")
    layers = decoder_layers(model)
    for i, layer in enumerate(layers):
        layers[i] = OffloadedLayer(layer)
    return model


# ---------------------------------------------------------------- counting


@contextlib.contextmanager
def count_saved_bytes():
    """Count the distinct storages autograd keeps for backward, on the device and offloaded (weights excluded).

    Yields a dict whose "on_device" and "offloaded" totals (bytes) are filled in when the block exits.
    """
    ledger: dict = {"on_device": {}, "offloaded": {}}
    result: dict = {}

    def pack(t: torch.Tensor):
        if not _is_parameter(t):
            _report("on_device", t)
        return t

    _LEDGERS.append(ledger)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield result
    finally:
        _LEDGERS.remove(ledger)
        result["on_device"] = sum(ledger["on_device"].values())
        result["offloaded"] = sum(ledger["offloaded"].values())


def saved_bytes_for_backward(model: nn.Module, batch: dict) -> dict[str, int]:
    """Bytes of activations one forward pass of `model` on `batch` keeps for backward: {"on_device",
    "offloaded"}. The graph is freed afterwards (no backward is run)."""
    with count_saved_bytes() as counted:
        out = model(**batch)
        loss = out.loss if hasattr(out, "loss") else out
    del out, loss
    return dict(counted)
