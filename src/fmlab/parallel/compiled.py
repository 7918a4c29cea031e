"""torch.compile per decoder layer, torchtitan's way: each layer compiled once and reused for every layer call.

    compile_layers(model)   # after TP and activation checkpointing, before FSDP or DDP (fmlab.parallel.recipe)

Why per layer and not the whole model: every decoder layer has the same code and shapes, so one compilation
serves them all (torchtitan, torchtitan/models/llama3/infra/parallelize.py `apply_compile`, read 2026-11-26), the
first step pays seconds instead of minutes, and the FSDP and DDP hooks around each layer stay outside the compiled
code. The layer's `forward` is compiled in place: module names, parameters and the state dict do not change, so
checkpoints and exports read the same with and without compilation.

What compilation buys (benchmarks/gpu_step.py, benchmarks/README.md): inductor fuses the norms, rotary, SwiGLU
and residual additions that eager mode runs as separate kernels, and keeps fewer of their outputs for backward.
At the Llama 3.2 1B shape, micro-batch 8: the engine eager 31.9% MFU on one H100, compiled 40.7%; on one H200,
with the chunked loss's softmax compiled too (fmlab.train.loss), 53.6% (56.2% at micro-batch 16), 1.11x a bare
loop under torch.compile(model) in the same process. On a CPU the first step pays the compilation (tens of seconds), which is why `--compile auto`
leaves it off there.
"""

from __future__ import annotations

import torch

from fmlab.models import decoder_layers


def compile_layers(model: torch.nn.Module, **options) -> torch.nn.Module:
    """Compile each decoder layer's forward in place (options go to torch.compile); returns `model`."""
    for layer in decoder_layers(model):
        layer.forward = torch.compile(layer.forward, **options)
    return model


def is_compiled(model: torch.nn.Module) -> bool:
    """Whether compile_layers has compiled `model`'s decoder layers."""
    layers = decoder_layers(model)
    return len(layers) > 0 and "forward" in vars(layers[0])
