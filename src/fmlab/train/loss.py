"""The engine's loss: next-token cross-entropy without ever holding the whole vocabulary's logits.

    use_chunked_loss(model)            # the engine's default (--loss chunked); --loss full keeps transformers' loss
    model(input_ids=x, labels=x).loss  # the same mean loss; the output carries no logits
    linear_cross_entropy(hidden, weight, labels)   # the function itself: [b, s, h] x [V, h] -> mean loss

Why: transformers' causal-LM loss makes the logits for every token at once, upcasts them to fp32 and keeps the
fp32 log-softmax for backward; the backward then makes two more fp32 tensors of the same size. That is 12 bytes
per token per vocabulary entry at its peak (for Llama 3's 128,256 entries, 1.5 MB per token: 23 GiB for one
micro-batch of 8 x 2,048), often more than all the layers' activations (fmlab.plan.memory says which).

How: the tokens go through the head in chunks. For each chunk the forward makes its logits, takes the fp32
log-sum-exp and the loss, and at once the gradient of the loss with respect to those logits (softmax minus the
one-hot target, divided by the number of counted tokens), which it multiplies into the gradients of the hidden
states and of the head's weight. Only those two gradients live on until the backward pass, which scales them by
the incoming gradient. No matrix multiply is done twice (a checkpoint per chunk would recompute the head's
forward); Liger-Kernel's fused linear cross-entropy works the same way, in Triton (linkedin/Liger-Kernel,
src/liger_kernel/ops/fused_linear_cross_entropy.py, read 2026-11-26); this one is plain PyTorch.

Numerics: the logits are made in the compute dtype (bf16 under autocast, as the full path's head makes them),
the softmax and the loss in fp32, the gradient of the logits rounded to the compute dtype before it meets the
weight (as the full path's backward does); only the weight's gradient is summed in fp32 over chunks (the full path
sums it inside one matrix multiply). tests/train/test_loss.py checks loss and gradients against the full path.

Speed: each chunk's softmax and gradient are a handful of passes over its logits; under --compile they run as
one compiled function (_chunk_fused) that never makes the fp32 copy. Each chunk also adds its product into the
head's fp32 weight gradient, so a micro-batch takes at most 8 chunks (fmlab.plan.memory.chunk_tokens): on one H200
at the Llama 3.2 1B shape the compiled engine made 53.6% MFU with 8 chunks, 48.7% with 32 (benchmarks/README.md).

Where it does not apply, use_chunked_loss_where_layout_allows keeps the full loss and fmlab.train says so: tensor
parallelism (the head's output is a DTensor gathered by its own plan) and SMP v2 (its transform owns the model).
"""

from __future__ import annotations

import types

import torch

from fmlab.parallel.smp import smp_available
from fmlab.plan.memory import chunk_tokens  # the chunk's size, where the planner books its memory too

IGNORE_INDEX = -100  # transformers' label for "no target here" (its causal-LM loss pads the last position with it)


def _compute_dtype(t: torch.Tensor) -> torch.dtype:
    """The dtype a matrix multiply of `t` runs in here: autocast's, when it is on for t's device."""
    device = t.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return t.dtype


def _chunk(h_c, w, y_c, scale, need_grad: bool):
    """One chunk, eagerly: its summed loss (fp32) and, if asked, the gradient of the mean loss with respect to its
    logits in the compute dtype. In place wherever it can be: one fp32 tensor of the chunk's logits at a time."""
    logits = (h_c @ w.T).float()  # made in the compute dtype, like the head's output, then upcast
    valid = y_c != IGNORE_INDEX
    rows, target = torch.arange(y_c.shape[0], device=y_c.device), y_c.clamp(min=0)
    picked = logits[rows, target]
    # log-sum-exp written out so that its exp happens in place (torch.logsumexp makes a temporary as large as the
    # logits: a third more memory at this chunk's peak)
    top = logits.amax(dim=-1, keepdim=True)
    total = logits.sub_(top).exp_().sum(dim=-1, keepdim=True)
    lse = total.log().add_(top).squeeze(1)
    loss = torch.where(valid, lse - picked, 0.0).sum()
    if not need_grad:
        return loss, None
    logits.div_(total)  # the softmax: the gradient of the summed loss is softmax - one-hot
    logits[rows, target] -= valid.to(logits.dtype)
    logits.mul_((valid.to(logits.dtype) * scale).unsqueeze(1))  # counted tokens only, mean
    return loss, logits.to(h_c.dtype)


def _chunk_fused(h_c, w, y_c, scale, need_grad: bool):
    """The same chunk written for torch.compile: inductor fuses the upcast, the log-sum-exp, the one-hot and the
    scaling into a few passes over the compute-dtype logits, and never makes their fp32 copy."""
    logits = (h_c @ w.T).float()
    valid = y_c != IGNORE_INDEX
    target = y_c.clamp(min=0)
    lse = torch.logsumexp(logits, dim=-1)
    picked = logits.gather(1, target.unsqueeze(1)).squeeze(1)
    loss = torch.where(valid, lse - picked, 0.0).sum()
    one_hot = torch.arange(logits.shape[1], device=logits.device).unsqueeze(0) == target.unsqueeze(1)
    grad = (torch.exp(logits - lse.unsqueeze(1)) - one_hot.float()) * (valid.float() * scale).unsqueeze(1)
    return loss, grad.to(h_c.dtype)


_COMPILED_CHUNK = []


def _compiled_chunk():
    """_chunk_fused under torch.compile, made once per process (the engine's --compile)."""
    if not _COMPILED_CHUNK:
        _COMPILED_CHUNK.append(torch.compile(_chunk_fused, dynamic=False))
    return _COMPILED_CHUNK[0]


class _LinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of (hidden @ weight.T) against targets, its gradients made in the forward, chunk by
    chunk."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, chunk: int, dtype: torch.dtype, need_grad: bool, compiled: bool):
        h = hidden.to(dtype)
        w = weight.to(dtype)
        counted = (targets != IGNORE_INDEX).sum()
        scale = 1.0 / counted.clamp(min=1).float()
        loss = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_hidden = torch.empty_like(h) if need_grad else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_grad else None
        step = _compiled_chunk() if compiled and need_grad else _chunk
        for start in range(0, h.shape[0], chunk):
            h_c, y_c = h[start:start + chunk], targets[start:start + chunk]
            chunk_loss, grad = step(h_c, w, y_c, scale, need_grad)
            loss += chunk_loss
            if grad is None:
                continue
            grad_hidden[start:start + chunk] = grad @ w
            grad_weight.add_(grad.T @ h_c)  # summed in fp32 without an fp32 copy of the product
            del grad
        # kept as attributes, not saved tensors: the backward scales them in place and hands them on, so the
        # weight's gradient becomes the parameter's .grad without a copy
        ctx.grads, ctx.dtypes = [grad_hidden, grad_weight], (hidden.dtype, weight.dtype)
        return loss * scale

    @staticmethod
    def backward(ctx, grad_output):
        grad_hidden, grad_weight = ctx.grads
        ctx.grads = [None, None]
        hidden_dtype, weight_dtype = ctx.dtypes
        if grad_hidden is None:
            raise RuntimeError("linear_cross_entropy ran without gradients (no_grad, or inputs that need none) and "
                               "cannot be differentiated afterwards")
        g_hidden = grad_hidden.mul_(grad_output.to(grad_hidden.dtype)).to(hidden_dtype) \
            if ctx.needs_input_grad[0] else None
        g_weight = grad_weight.mul_(grad_output).to(weight_dtype) if ctx.needs_input_grad[1] else None
        return g_hidden, g_weight, None, None, None, None, None


def linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor,
                         chunk: int | None = None, compiled: bool = False) -> torch.Tensor:
    """Mean next-token cross-entropy of the logits hidden @ weight.T against `labels` shifted left by one (the
    last position of each row, and labels of -100, count for nothing), as transformers' causal-LM loss takes it,
    without making all the logits at once. hidden [b, s, h] (or [n, h] with labels already shifted: pass them
    flat), weight [V, h]. `chunk`: at most this many tokens per chunk (default: chunk_tokens; the tokens are split
    into equal chunks, so a compiled chunk keeps one shape). `compiled`: each chunk's softmax and gradient under
    torch.compile (the engine's --compile)."""
    if hidden.dim() == 3:
        targets = torch.nn.functional.pad(labels, (0, 1), value=IGNORE_INDEX)[..., 1:]
        hidden, targets = hidden.reshape(-1, hidden.shape[-1]), targets.reshape(-1)
    else:
        targets = labels.reshape(-1)
    if hidden.shape[0] != targets.shape[0]:
        raise ValueError(f"{hidden.shape[0]} hidden states but {targets.shape[0]} labels")
    chunk = chunk or chunk_tokens(weight.shape[0], hidden.shape[0])
    chunks = -(-hidden.shape[0] // chunk)
    chunk = -(-hidden.shape[0] // chunks)  # equal chunks, none larger than asked
    need_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    return _LinearCrossEntropy.apply(hidden, weight, targets.to(hidden.device), chunk, _compute_dtype(hidden),
                                     need_grad, compiled)


# ---------------------------------------------------------------- the engine's model


def _deferring_head(self, hidden_states):
    """The head's forward while the chunked loss is on: with labels (a training or evaluation forward) the hidden
    states pass through untouched, for the loss to take; without them, the logits as usual (generation)."""
    if getattr(self, "_fmlab_defer", False):
        return hidden_states
    return torch.nn.functional.linear(hidden_states, self.weight, self.bias)


def _chunked_causal_lm_loss(model, compiled: bool):
    def loss_function(logits, labels, vocab_size=None, **kwargs):  # `logits` are the head's input here
        head = model.lm_head
        return linear_cross_entropy(logits, head.weight, labels, compiled=compiled)
    return loss_function


def _defer_when_labelled(module, args, kwargs):
    module.lm_head._fmlab_defer = kwargs.get("labels") is not None


def _drop_deferred_logits(module, args, kwargs, output):
    if module.lm_head._fmlab_defer:
        module.lm_head._fmlab_defer = False
        output.logits = None  # they were never made whole; what the head passed on were hidden states
    return output


def chunked_loss_unsupported(model) -> str:
    """Why `model` cannot take the chunked loss ("" if it can)."""
    head = getattr(model, "lm_head", None)
    if head is None or not isinstance(head, torch.nn.Linear):
        return "the model has no linear lm_head"
    if head.bias is not None:
        return "the model's head has a bias"
    return ""


def use_chunked_loss(model, enable: bool = True, compiled: bool = False) -> str:
    """Give `model` (a transformers causal LM, before it is wrapped by DDP) the chunked loss: a forward with labels
    returns the same mean loss and no logits; a forward without labels returns logits as before. `enable=False`
    restores transformers' loss; `compiled`: the chunks' softmax under torch.compile. Returns "" or why the model
    keeps the full loss."""
    if not enable:
        for handle in model.__dict__.pop("_fmlab_chunked_hooks", ()):
            handle.remove()
        model.lm_head.__dict__.pop("forward", None)
        model.__dict__.pop("_loss_function", None)
        return ""
    why = chunked_loss_unsupported(model)
    if why or "_fmlab_chunked_hooks" in model.__dict__:
        return why

    model.lm_head.forward = types.MethodType(_deferring_head, model.lm_head)
    model.loss_function = _chunked_causal_lm_loss(model, compiled)
    model._fmlab_chunked_hooks = (model.register_forward_pre_hook(_defer_when_labelled, with_kwargs=True),
                                  model.register_forward_hook(_drop_deferred_logits, with_kwargs=True))
    return ""


def use_chunked_loss_where_layout_allows(model, parallel, compiled: bool = False) -> str:
    """Install the chunked loss on `model` (use_chunked_loss) unless the layout (a ParallelConfig) keeps the full
    one: SMP v2 owns the model, or tensor parallelism gathers the logits. Returns "" when installed, else why not."""
    if smp_available():
        return "SMP v2's transform owns the model"
    if parallel.tp > 1:
        return "tensor parallelism gathers the head's logits by its own plan"
    return use_chunked_loss(model, compiled=compiled)
