"""Checks for labs/lab_06_tensor_parallel.ipynb: weight shards, row-parallel partial sums, TP for the global
batch, a 3-D layout, and microbatches for a small pipeline bubble."""

from __future__ import annotations

import torch

from fmlab.labs import Lab
from fmlab.parallel import scaling

LAB = Lab("lab 06", ["ex1_shards", "ex2_row_partials", "ex3_tp_for_batch", "ex4_3d_instances", "ex5_microbatches"])

# The questions' inputs live here so that the notebook and its checks cannot drift apart.
WORLD = 2
RANK = 1


def weight() -> torch.Tensor:
    """W of a linear layer with 8 output and 4 input features (shape (out, in), as nn.Linear stores it)."""
    return torch.arange(32, dtype=torch.float32).reshape(8, 4)


def inputs() -> torch.Tensor:
    return torch.linspace(-1, 1, 12).reshape(3, 4)


EX3 = dict(nodes=256, gpus_per_node=8, seq_len=4096, micro_batch=1, max_tokens=4 * 2**20)
EX4 = dict(replicas=3, pp=6, tp=4, layers=6, gpus_per_node=8)
EX5 = dict(stages=6, max_bubble=0.10)


def check_shards(answer) -> bool:
    w = weight()

    def ok(a) -> bool:
        column, row = a
        return torch.equal(column, w[4:8, :]) and torch.equal(row, w[:, 2:4])

    return LAB.check("ex1_shards", answer, ok, "rank 1 keeps rows 4-7 (column-parallel) or columns 2-3 (row-parallel)",
                     "column-parallel splits the OUTPUT features (rows of W): W.chunk(2, dim=0)[1]; row-parallel "
                     "splits the INPUT features (columns of W): W.chunk(2, dim=1)[1]")


def check_row_partials(answer) -> bool:
    w, x = weight(), inputs()

    def ok(a) -> bool:
        parts = list(a)
        if len(parts) != WORLD:
            return False
        expected = [x[:, i * 2:(i + 1) * 2] @ w[:, i * 2:(i + 1) * 2].T for i in range(WORLD)]
        return (all(torch.allclose(p, e) for p, e in zip(parts, expected, strict=True))
                and torch.allclose(sum(parts), x @ w.T))

    return LAB.check("ex2_row_partials", answer, ok, "the two partial outputs; their sum (one all-reduce) is x @ W.T",
                     "rank i multiplies ITS slice of the input, x[:, 2i:2i+2], by its columns of W: "
                     "x_i @ W[:, 2i:2i+2].T; give the list of both ranks' results")


def check_tp_for_batch(answer: int) -> bool:
    gpus = EX3["nodes"] * EX3["gpus_per_node"]
    expected = scaling.smallest_tp_for_batch(gpus, EX3["max_tokens"], EX3["seq_len"], EX3["micro_batch"])
    return LAB.check("ex3_tp_for_batch", answer, lambda a: int(a) == a and int(a) == expected, f"tp = {expected}",
                     "global batch = (GPUs / tp) x micro-batch x sequence length; find the smallest tp in 1, 2, 4, 8 "
                     "that keeps it within 4 x 2**20 tokens (scaling.global_batch_tokens)")


def check_3d_instances(answer: int) -> bool:
    expected = scaling.three_d_layout(**EX4)["nodes"]
    return LAB.check("ex4_3d_instances", answer, lambda a: int(a) == a and int(a) == expected,
                     f"{expected} instances ({expected * EX4['gpus_per_node']} GPUs)",
                     "one pipeline copy uses pp x tp GPUs; multiply by the replicas and divide by 8 GPUs per instance")


def check_microbatches(answer: int) -> bool:
    p, limit = EX5["stages"], EX5["max_bubble"]
    expected = next(m for m in range(1, 10_000) if scaling.bubble_fraction(p, m) <= limit + 1e-12)
    return LAB.check("ex5_microbatches", answer, lambda a: int(a) == a and int(a) == expected,
                     f"{expected} microbatches", "the bubble is (p - 1) / m of the compute time; solve (p - 1) / m <= 0.10")


def summary() -> None:
    LAB.summary()
