"""A scaling law fitted on rungs a laptop can train, and the next rung's loss predicted before it runs (module 1).

    from fmlab.train.scaling_rungs import RUNG_WIDTHS, train_rung, fit_power_law
    fitted = [train_rung(h) for h in RUNG_WIDTHS[:3]]          # (parameters, held-out loss), a few seconds each
    law = fit_power_law([n for n, _ in fitted], [l for _, l in fitted])
    law.predict(train_rung.parameters(RUNG_WIDTHS[3]))          # then train it and compare

Kaplan et al. (2020) found the loss a power law in the non-embedding parameters N, L(N) = (N_c / N)^alpha_N, when
data is not the limit; Hoffmann et al. (2022, Chinchilla) fitted L(N, D) = E + A/N^alpha + B/D^beta and read the
compute-optimal split from it. Here every rung sees the same tokens (the same steps and batch), Llama-style models
of 2 layers whose width grows, and the law is Kaplan's form, a straight line in log-log, fitted by least squares
on the held-out loss. It carries as far as the data does: once the tokens, not the parameters, limit the loss, a
wider rung stops improving, and the law, which does not know about D, keeps promising (Chinchilla's point).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from fmlab.data import PackedDataset, course_dataset
from fmlab.models import build_model
from fmlab.plan.catalog import ModelPreset

RUNG_WIDTHS = (16, 32, 48, 64)  # hidden sizes: three to fit, the fourth to predict
STEPS, BATCH, LR, HELD_OUT = 150, 8, 3e-3, 64


def rung_preset(hidden: int, layers: int = 2) -> ModelPreset:
    """A Llama-style rung: heads of 16 dimensions (at least 2), the usual 8/3 MLP width rounded to 8."""
    return ModelPreset(f"rung-{hidden}", "llama", hidden=hidden, layers=layers, heads=max(2, hidden // 16),
                       vocab=512, seq_len=128, intermediate=int(hidden * 8 / 3) // 8 * 8)


def non_embedding_parameters(model) -> int:
    """Kaplan's N: the parameters outside the token embedding and the output head."""
    skip = {id(model.get_input_embeddings().weight), id(model.get_output_embeddings().weight)}
    return sum(p.numel() for p in model.parameters() if id(p) not in skip)


def train_rung(hidden: int, steps: int = STEPS, seed: int = 0) -> tuple[int, float]:
    """Train one rung on the course's data (the same batches for every rung, warm-up then cosine decay) and
    return (non-embedding parameters, held-out loss on the dataset's last HELD_OUT sequences, never trained on)."""
    data = PackedDataset(course_dataset(seq_len=128, vocab_size=512))
    train_end = len(data) - HELD_OUT
    held_out = torch.stack([data[i] for i in range(train_end, len(data))])
    model = build_model(rung_preset(hidden), seed=seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    order = torch.Generator().manual_seed(seed)
    for step in range(steps):
        rows = torch.randint(0, train_end, (BATCH,), generator=order)
        tokens = torch.stack([data[int(i)] for i in rows])
        for group in optimizer.param_groups:
            group["lr"] = LR * min(1.0, (step + 1) / 10) * 0.5 * (1 + math.cos(math.pi * step / steps))
        model(input_ids=tokens, labels=tokens).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    with torch.no_grad():
        loss = model(input_ids=held_out, labels=held_out).loss.item()
    return non_embedding_parameters(model), loss


@dataclass(frozen=True)
class PowerLaw:
    """L(N) = (n_c / N) ** alpha: Kaplan's form."""

    alpha: float
    n_c: float

    def predict(self, n: float) -> float:
        return (self.n_c / n) ** self.alpha


def fit_power_law(parameters: list[float], losses: list[float]) -> PowerLaw:
    """Least squares of log L on log N (at least two rungs of different sizes)."""
    if len(parameters) < 2 or len(set(parameters)) < 2 or len(parameters) != len(losses):
        raise ValueError("fit on at least two rungs of different sizes, one loss per rung")
    slope, intercept = np.polyfit(np.log(parameters), np.log(losses), 1)
    alpha = -float(slope)
    return PowerLaw(alpha, float(math.exp(intercept / alpha)) if alpha else math.inf)
