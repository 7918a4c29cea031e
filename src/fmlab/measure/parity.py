"""One training step under a parallel layout, compared with the same step on one process.

    from fmlab.measure.parity import compare, make_tokens, parallel_step, reference_step
    ref = reference_step("tiny", tokens, seed=0)                  # plain model, whole batch, one process
    got = parallel_step("tiny", ParallelConfig(sharding="full"), dist, tokens, seed=0)
    compare(ref, got)   # {"loss_diff": ..., "max_grad_diff": ...}: both ~1e-7 when the layout is right

A data-parallel layout must give exactly the single-process loss and gradients on the concatenated batch
(each rank's mean loss averaged over the ranks, gradients averaged), and a tensor-parallel layout the same
numbers as the unsplit model; only the order of floating-point sums differs. Gradients are gathered back to
full tensors on every rank (DTensor.full_tensor), so every rank checks the whole model.
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as tdist
from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

from fmlab.models import build_model, decoder_layers
from fmlab.parallel import DistInfo, ParallelConfig, parallelize

WRAPPER_PREFIXES = ("_checkpoint_wrapped_module.", "offloaded_module.", "_fsdp_wrapped_module.")


def make_tokens(vocab: int, global_batch: int, seq_len: int, seed: int = 0) -> torch.Tensor:
    """A reproducible global batch of token ids, identical on every rank."""
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randint(0, vocab, (global_batch, seq_len), generator=g)


def local_rows(tokens: torch.Tensor, dist: DistInfo) -> torch.Tensor:
    """This rank's slice of the global batch (ranks of one tensor-parallel group read the same rows)."""
    if tokens.shape[0] % dist.dp_size:
        raise ValueError(f"the global batch of {tokens.shape[0]} sequences does not split over "
                         f"{dist.dp_size} data-parallel ranks: use a multiple of {dist.dp_size}")
    return tokens.chunk(dist.dp_size)[dist.dp_rank]


def clean_name(name: str) -> str:
    """A parameter's name without the wrappers' prefixes (DDP, checkpointing, offloading)."""
    if name.startswith("module."):
        name = name[len("module."):]
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """A DTensor gathered to a plain full tensor (a collective: every rank must call it), or t itself."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def reference_step(preset: str, tokens: torch.Tensor, seed: int = 0) -> dict:
    """Loss and gradients of one step of the unsplit model on the whole batch, on this process alone."""
    model = build_model(preset, seed)
    loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    grads = {clean_name(n): p.grad.detach().clone() for n, p in model.named_parameters()}
    return {"loss": loss.item(), "grads": grads}


def parallel_step(preset: str, cfg: ParallelConfig, dist: DistInfo, tokens: torch.Tensor, seed: int = 0,
                  wrap=None) -> dict:
    """Loss (averaged over the data-parallel ranks) and full gradients after one step under `cfg`.

    `wrap(model, dist)` replaces fmlab's parallelize (used for controls such as FSDP1 hybrid sharding).
    """
    model = build_model(preset, seed)
    model = wrap(model, dist) if wrap else parallelize(model, cfg, dist)
    rows = local_rows(tokens, dist).to(dist.device)
    loss = model(input_ids=rows, labels=rows).loss
    loss.backward()
    mean_loss = loss.detach().clone()
    tdist.all_reduce(mean_loss)  # tensor-parallel ranks hold equal losses, so the world mean is the dp mean
    mean_loss /= dist.world_size
    grads = {clean_name(n): full_tensor(p.grad).detach().clone() for n, p in model.named_parameters()}
    return {"loss": mean_loss.item(), "grads": grads}


def compare(ref: dict, got: dict) -> dict:
    """Largest differences between two steps: |loss| and max |gradient| over every parameter."""
    missing = set(ref["grads"]) ^ set(got["grads"])
    if missing:
        raise AssertionError(f"the two models do not have the same parameters: {sorted(missing)[:5]}")
    diffs = [(got["grads"][n] - g).abs().max().item() for n, g in ref["grads"].items()]
    return {"loss": got["loss"], "ref_loss": ref["loss"], "loss_diff": abs(got["loss"] - ref["loss"]),
            "max_grad_diff": max(diffs), "max_grad": max(g.abs().max().item() for g in ref["grads"].values())}


def fsdp1_hybrid_control(model, dist: DistInfo):
    """FSDP1 with ShardingStrategy.HYBRID_SHARD on the layout's (dp_replicate, dp_shard) mesh: a control.

    Kept to show (and to test) that the parity check catches a wrong layout: on CPU/gloo with shard groups
    of one, FSDP1 leaves each replica with its own unaveraged gradients.
    """

    layer_types = {type(layer) for layer in decoder_layers(model)}
    return FullyShardedDataParallel(
        model, device_mesh=dist.mesh["dp_replicate", "dp_shard"], sharding_strategy=ShardingStrategy.HYBRID_SHARD,
        auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls=layer_types),
        use_orig_params=True, device_id=dist.device)
