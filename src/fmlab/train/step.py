"""What one optimizer step of fmlab.train is made of: the optimizer and its schedule, the batches, the step itself.

    optimizer, scheduler = build_optimizer(model, cfg)             # AdamW (fused) + warm-up and cosine decay
    data = batches(ds, sampler, cfg.micro_batch, device)            # endless [micro_batch, seq_len] batches
    loss = train_step(model, optimizer, scheduler, [next(data) for _ in range(cfg.grad_accum)], cfg.grad_clip)
    clip_gradients(model.parameters(), 1.0)                         # the clip on its own (DTensors and plain tensors)
    save_gradients(model, "grads.safetensors", rank)                # --save-first-grads: step 1's full gradients

The training loop (fmlab.train.loop) calls these once per step; notebooks and tests call them on their own (module
4 steps a model by hand with train_step; the ladder and the serving checks rebuild a checkpoint's optimizer with
build_optimizer). A step: forward and backward over each micro-batch, gradients adding up (DDP all-reduces only on
the last, `no_sync` before), the global gradient norm clipped per device mesh (clip_gradients), the optimizer and
the LR schedule stepped (lr_factor: fmlab.train.config.warmup_cosine), the gradients set to None. The gradient dump
(--save-first-grads: first_gradients_hook is step 1's on_gradients) gathers DTensor shards to full tensors and
writes them under the parameter names of the unwrapped model.
Tested by tests/train/test_step.py.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch.distributed.tensor import DTensor

from fmlab.train.config import TrainConfig, warmup_cosine


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Multiplier of cfg.lr at `step` (0-based): linear warm-up, then cosine decay to min_lr_ratio."""
    return warmup_cosine(step, cfg.warmup_steps, cfg.max_steps, cfg.min_lr_ratio)


def build_optimizer(model, cfg: TrainConfig):
    """AdamW with weight decay on matrices only (fused where the device has the kernel), and its warm-up + cosine
    schedule."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    # fused: one kernel updates every parameter (CPU and CUDA, DTensor shards too) instead of a Python loop
    # over them, the largest cost of a step after the matrix multiplies on a small model (benchmarks/train_throughput.py)
    fused = all(p.device.type in ("cpu", "cuda") for p in params) or None
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8, fused=fused)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, cfg))
    return optimizer, scheduler


def batches(ds, sampler, micro_batch: int, device):
    """Endless micro-batches [micro_batch, seq_len] in the sampler's order, epoch after epoch."""
    while True:
        indices = []
        for i in sampler:
            indices.append(i)
            if len(indices) == micro_batch:
                yield torch.stack([ds[j] for j in indices]).to(device, non_blocking=True)
                indices = []
        sampler.set_epoch(sampler.epoch + 1)


def _clean_name(name: str) -> str:
    for wrapper in ("module.", "_checkpoint_wrapped_module.", "_fsdp_wrapped_module.", "_orig_mod."):
        name = name.replace(wrapper, "")
    return name


def save_gradients(model, path: str, rank: int) -> None:
    """Every parameter's full gradient (DTensor shards gathered) to a safetensors file, written by rank 0."""
    grads = {}
    for name, p in model.named_parameters():
        if p.grad is not None:
            g = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
            grads[_clean_name(name)] = g.detach().float().cpu().contiguous()
    if rank == 0:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        save_file(grads, path)


def first_gradients_hook(cfg: TrainConfig, step: int, rank: int):
    """The on_gradients hook of step 1 when --save-first-grads asks for its gradients, else None."""
    if step != 1 or not cfg.save_first_grads:
        return None
    return lambda model: save_gradients(model, cfg.save_first_grads, rank)


def clip_gradients(parameters, max_norm: float):
    """Clip the global gradient norm to `max_norm`; returns the norm before clipping.

    torch's clip_grad_norm_ refuses a mix of plain tensors and DTensors (tensor parallelism leaves norms and
    biases plain; FSDP puts other parameters on another mesh), so the norm is taken per device mesh, each
    DTensor group's norm gathered over its mesh, and the squares summed; replicated plain tensors count once.
    Plain tensors take one `_foreach_norm` call: torch's get_total_norm sorts them by device and dtype first,
    which on a small model is a third of the clip (benchmarks/train_throughput.py).
    """
    groups: dict = {}
    for p in parameters:
        if p.grad is not None:
            groups.setdefault(p.grad.device_mesh if isinstance(p.grad, DTensor) else None, []).append(p.grad)
    if not groups:
        return torch.tensor(0.0)
    norms = []
    for mesh, grads in groups.items():
        if mesh is None and len({(g.device, g.dtype) for g in grads}) == 1:
            norms.append(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))))
            continue
        norm = torch.nn.utils.get_total_norm(grads)
        norms.append(norm.full_tensor() if isinstance(norm, DTensor) else norm)
    total = torch.linalg.vector_norm(torch.stack([n.to(norms[0].device) for n in norms]))
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for grads in groups.values():
        torch._foreach_mul_(grads, coef.to(grads[0].device))
    return total


def train_step(model, optimizer, scheduler, micro_batches, grad_clip: float = 1.0, on_gradients=None):
    """One optimizer step: forward and backward over each micro-batch (gradients add up; DDP all-reduces only on
    the last), clip the global gradient norm, step, zero. Returns the step's mean loss, still on the device.
    `on_gradients(model)` runs once the gradients are complete, before clipping (fmlab.train --save-first-grads)."""
    loss_sum = 0.0
    for i, x in enumerate(micro_batches):
        accumulate = i < len(micro_batches) - 1 and hasattr(model, "no_sync")
        with model.no_sync() if accumulate else contextlib.nullcontext():
            loss = model(input_ids=x, labels=x).loss / len(micro_batches)
            loss.backward()
        loss_sum = loss_sum + loss.detach()
    if on_gradients is not None:
        on_gradients(model)
    if grad_clip > 0:
        clip_gradients([p for group in optimizer.param_groups for p in group["params"]], grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    scheduler.step()
    return loss_sum
