"""Held-out loss: how well the model predicts text it never trained on (the gate between ladder rungs).

    loss = heldout_loss(model, PackedDataset(folder, split="validation"), sequences=64, micro_batch=8, dist=dist)
    math.exp(loss)   # perplexity

The same first `sequences` held-out sequences every time, so two evaluations (of two checkpoints, two rungs,
or one checkpoint on 4 processes and again on 1) compare like with like. The sequences are dealt to the
data-parallel ranks (rank r takes r, r + R, ...); every rank runs the same number of forward passes, as FSDP's
collectives need, and the mean is taken over all predicted tokens of all ranks.
"""

from __future__ import annotations

import torch
import torch.distributed as tdist


def eval_indices(sequences: int, dataset_len: int, dp_rank: int = 0, dp_size: int = 1) -> list[int]:
    """The held-out sequences this data-parallel rank evaluates: an equal share of the first `sequences`."""
    if sequences < 1:
        raise ValueError(f"evaluate at least one held-out sequence, not {sequences}")
    usable = min(sequences, dataset_len) // dp_size * dp_size
    if usable == 0:
        raise ValueError(f"{min(sequences, dataset_len)} held-out sequence(s) cannot be shared by {dp_size} "
                         f"data-parallel ranks: evaluate at least {dp_size}")
    return list(range(dp_rank, usable, dp_size))


@torch.no_grad()
def heldout_loss(model, dataset, sequences: int, micro_batch: int, dist=None) -> float:
    """Mean next-token cross-entropy over the first `sequences` sequences of `dataset` (all ranks together)."""
    dp_rank, dp_size = (dist.dp_rank, dist.dp_size) if dist is not None else (0, 1)
    device = dist.device if dist is not None else next(model.parameters()).device
    indices = eval_indices(sequences, len(dataset), dp_rank, dp_size)
    was_training = model.training
    model.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)  # sum of token losses, tokens
    for start in range(0, len(indices), micro_batch):
        x = torch.stack([dataset[i] for i in indices[start:start + micro_batch]]).to(device)
        tokens = x.shape[0] * (x.shape[1] - 1)  # every position but the last predicts the next token
        total[0] += model(input_ids=x, labels=x).loss.double() * tokens
        total[1] += tokens
    if dist is not None and dist.world_size > 1:
        tdist.all_reduce(total)  # TP ranks repeat their group's sequences: the ratio is unchanged
    model.train(was_training)
    return (total[0] / total[1]).item()
