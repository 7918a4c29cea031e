"""Column- and row-parallel linear layers written out by hand (picotron-style), for teaching.

    up = ColumnParallelLinear.from_linear(mlp_up, rank, world)     # keeps out_features / world rows of W
    down = RowParallelLinear.from_linear(mlp_down, rank, world)    # keeps in_features / world columns of W
    y = down(F.gelu(up(x)))        # == the plain MLP, with one all-reduce in the forward and one in backward

The communication is Megatron-LM's pair of conjugate operations (Shoeybi et al. 2019, section 3): `f` is the
identity in the forward and an all-reduce of the input gradient in the backward; `g` is an all-reduce in the
forward and the identity in the backward. fmlab.parallel.tensor does the same with DTensor for whole models.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class CopyToParallelRegion(torch.autograd.Function):
    """f: every rank uses the same input; the input's gradient is the sum of the ranks' gradients."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class ReduceFromParallelRegion(torch.autograd.Function):
    """g: sum the ranks' partial outputs; the gradient reaches every rank unchanged."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class _GatherFromParallelRegion(torch.autograd.Function):
    """Concatenate the ranks' output slices along the last dimension; backward keeps this rank's slice."""

    @staticmethod
    def forward(ctx, x):
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size(), dim=-1)[dist.get_rank()].contiguous()


def _slice(n: int, rank: int, world: int, what: str) -> slice:
    if n % world:
        raise ValueError(f"{what} = {n} is not divisible by the {world} ranks: pick a world size that divides it")
    size = n // world
    return slice(rank * size, (rank + 1) * size)


class ColumnParallelLinear(nn.Module):
    """y = x W^T + b with W split by output rows: this rank computes its slice of y's features."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, gather_output: bool = False):
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(bias) if bias is not None else None
        self.gather_output = gather_output

    @classmethod
    def from_linear(cls, linear: nn.Linear, rank: int, world: int, gather_output: bool = False):
        rows = _slice(linear.out_features, rank, world, "out_features")
        bias = linear.bias.detach()[rows].clone() if linear.bias is not None else None
        return cls(linear.weight.detach()[rows].clone(), bias, gather_output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(CopyToParallelRegion.apply(x), self.weight, self.bias)
        return _GatherFromParallelRegion.apply(y) if self.gather_output else y


class RowParallelLinear(nn.Module):
    """y = x W^T + b with W split by input columns: this rank takes its slice of x and the partial results are
    summed with one all-reduce (the bias is added once, after the sum)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(bias) if bias is not None else None

    @classmethod
    def from_linear(cls, linear: nn.Linear, rank: int, world: int):
        cols = _slice(linear.in_features, rank, world, "in_features")
        bias = linear.bias.detach().clone() if linear.bias is not None else None
        return cls(linear.weight.detach()[:, cols].clone(), bias)

    def forward(self, x_slice: torch.Tensor) -> torch.Tensor:
        y = ReduceFromParallelRegion.apply(F.linear(x_slice, self.weight))
        return y + self.bias if self.bias is not None else y
