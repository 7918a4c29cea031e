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
import functools
import itertools
import warnings

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
from torch.utils._pytree import tree_map
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

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


# Which PyTorch has what: torch/utils/checkpoint.py of the PyPI torch wheels (cp311, manylinux; the wheel's git_version
# from its torch/version.py), read 2026-11-26:
# - create_selective_checkpoint_contexts, CheckpointPolicy and SelectiveCheckpointContext(is_recompute) are public
#   from PyTorch 2.5.0 (32f585d9; 2.5.1 a8d6afb5 is the SMDDP and SMP images' torch). 2.4.0 (e4ee3be4) and 2.4.1
#   (38b96d33) have only the private _pt2_selective_checkpoint_context_fn_gen (the public API is pytorch/pytorch
#   PR #125795, "[checkpoint] Clean up selective activation checkpoint and make public", reviewed in June 2024,
#   after the 2.4 branch). fmlab.service.features.FEATURES["selective-ac"] holds preflight to PyTorch >= 2.5.
# - SelectiveCheckpointContext.op_output (the op's output, passed to the policy in the forward) first appears in
#   2.12.0 (7661cd9c); 2.5.0, 2.5.1 and 2.11.0 (70d99e99) build the context with is_recompute only. In 2.13.0
#   (cf30153c, the CPU wheel) the policy runs in the forward only and is_recompute is always False (deprecated).
# The policy therefore never needs op_output: it only counts the kept bytes (for count_saved_bytes), and without
# op_output it reruns the op on meta tensors of the same shapes (no memory, no compute) to learn the outputs' sizes.

_SELECTIVE_KEEP_NAMES = ("mm.default", "addmm.default", "bmm.default", "linear.default",
                         "_scaled_dot_product_flash_attention.default",
                         "_scaled_dot_product_efficient_attention.default",
                         "_scaled_dot_product_flash_attention_for_cpu.default")


@functools.cache
def _selective_keep() -> frozenset:
    """The aten ops whose outputs selective checkpointing keeps (those this PyTorch has)."""
    keep = set()
    for name in _SELECTIVE_KEEP_NAMES:
        packet, overload = name.split(".")
        op = getattr(getattr(torch.ops.aten, packet, None), overload, None)
        if op is not None:
            keep.add(op)
    return frozenset(keep)


_META_KEYS = itertools.count()  # ledger keys of outputs counted from meta shapes (they have no address)


def _as_meta(tree):
    def meta(x):
        if not isinstance(x, torch.Tensor):
            return x
        if type(x) not in (torch.Tensor, nn.Parameter):  # DTensor and other subclasses: no honest local size
            raise TypeError(f"cannot size a {type(x).__name__} on meta")
        return torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device="meta")

    return tree_map(meta, tree)


def _count_kept(ctx, op, args, kwargs) -> None:
    """Report the outputs selective checkpointing keeps for `op` to the active counters: ctx.op_output where this
    PyTorch passes it (2.12 and later), else the sizes of `op` run on meta tensors; an op neither way can size is
    reported as uncounted (count_saved_bytes then warns that its total is a lower bound)."""
    out = getattr(ctx, "op_output", None)
    if out is not None:
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor):
                _report("on_device", t)
        return
    try:
        out = op(*_as_meta(args), **_as_meta(kwargs))
    except Exception:  # no meta kernel, a tensor subclass: say so rather than guess
        for ledger in _LEDGERS:
            ledger["uncounted"] += 1
        return
    for t in out if isinstance(out, tuple | list) else (out,):
        if isinstance(t, torch.Tensor):
            key, nbytes = ("meta", next(_META_KEYS)), t.untyped_storage().nbytes()
            for ledger in _LEDGERS:
                ledger["on_device"][key] = nbytes


def _selective_policy(ctx, op, *args, **kwargs):
    """Keep the matmul and attention outputs (MUST_SAVE), recompute the rest (PREFER_RECOMPUTE). `ctx` needs only
    `is_recompute` (PyTorch 2.5+); `op_output`, where present, is used only to count the kept bytes."""
    if op not in _selective_keep():
        return CheckpointPolicy.PREFER_RECOMPUTE
    # selective checkpointing keeps these in its own cache, not via saved-tensor hooks: count them here, once
    # (in the forward, not the recompute), and only while a counter is open
    if _LEDGERS and not getattr(ctx, "is_recompute", False):
        _count_kept(ctx, op, args, kwargs)
    return CheckpointPolicy.MUST_SAVE


def _selective_context():
    return create_selective_checkpoint_contexts(_selective_policy)


def apply_activation_checkpointing(model: nn.Module, mode: str) -> nn.Module:
    """Wrap every decoder layer: mode 'full' keeps only its input, 'selective' also keeps matmul outputs."""
    if mode == "none":
        return model
    if mode not in ("full", "selective"):
        raise ValueError(f"activation checkpointing must be 'none', 'full' or 'selective', not {mode!r}")

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
    ledger: dict = {"on_device": {}, "offloaded": {}, "uncounted": 0}
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
        if ledger["uncounted"]:
            warnings.warn(f"the outputs of {ledger['uncounted']} ops kept by selective checkpointing could not be "
                          "sized and are not counted: 'on_device' is a lower bound", stacklevel=3)


def saved_bytes_for_backward(model: nn.Module, batch: dict) -> dict[str, int]:
    """Bytes of activations one forward pass of `model` on `batch` keeps for backward: {"on_device",
    "offloaded"}. The graph is freed afterwards (no backward is run)."""
    with count_saved_bytes() as counted:
        out = model(**batch)
        loss = out.loss if hasattr(out, "loss") else out
    del out, loss
    return dict(counted)
