"""TEST DOUBLE of neuronx_distributed.parallel_layers.layers at tensor size 1: NxD's constructor signatures and
parameter names (weight [out, in]; the embedding [vocab, hidden]) on plain CPU layers."""

import torch
import torch.nn.functional as F
from torch import nn


def _param(rows, cols, dtype, device, init_method):
    weight = nn.Parameter(torch.empty(rows, cols, dtype=dtype, device=device))
    (init_method or (lambda w: nn.init.normal_(w, std=0.02)))(weight)
    return weight


class ParallelEmbedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, init_method=None, device=None, dtype=torch.float32,
                 shard_across_embedding=False, pad=False, **_):
        super().__init__()
        self.weight = _param(num_embeddings, embedding_dim, dtype, device, init_method)
        self.padding_idx = padding_idx

    def forward(self, input_):
        return F.embedding(input_.long(), self.weight, self.padding_idx)


class ColumnParallelLinear(nn.Module):
    def __init__(self, input_size, output_size, bias=True, gather_output=True, dtype=torch.float32, device=None,
                 stride=1, init_method=None, sequence_parallel_enabled=False, keep_master_weight=False,
                 skip_bias_add=False, pad=False, **_):
        super().__init__()
        self.weight = _param(output_size, input_size, dtype, device, init_method)
        self.bias = nn.Parameter(torch.zeros(output_size, dtype=dtype, device=device)) if bias else None

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    def __init__(self, input_size, output_size, bias=True, input_is_parallel=False, dtype=torch.float32,
                 device=None, stride=1, init_method=None, sequence_parallel_enabled=False,
                 keep_master_weight=False, skip_bias_add=False, pad=False, **_):
        super().__init__()
        self.weight = _param(output_size, input_size, dtype, device, init_method)
        self.bias = nn.Parameter(torch.zeros(output_size, dtype=dtype, device=device)) if bias else None

    def forward(self, input_):
        return F.linear(input_, self.weight, self.bias)
