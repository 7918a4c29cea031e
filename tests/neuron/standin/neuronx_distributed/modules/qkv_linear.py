"""TEST DOUBLE of neuronx_distributed.modules.qkv_linear at tensor size 1: separate weight_q/_k/_v parameters,
K and V holding kv_size_multiplier copies of the KV heads (rows kv_size x multiplier), forward -> (q, k, v)."""

import torch
import torch.nn.functional as F
from torch import nn


class GQAQKVColumnParallelLinear(nn.Module):
    def __init__(self, input_size, output_sizes, bias=True, gather_output=True, dtype=torch.float32, device=None,
                 init_method=None, sequence_parallel_enabled=False, keep_master_weight=False, kv_size_multiplier=1,
                 fuse_qkv=False, **_):
        super().__init__()
        if bias or fuse_qkv:
            raise NotImplementedError("the stand-in has no biases and no fused weight_qkv")
        q_rows, kv_rows = output_sizes[0], output_sizes[1] * kv_size_multiplier
        self.weight_q = nn.Parameter(torch.empty(q_rows, input_size, dtype=dtype, device=device))
        self.weight_k = nn.Parameter(torch.empty(kv_rows, input_size, dtype=dtype, device=device))
        self.weight_v = nn.Parameter(torch.empty(kv_rows, input_size, dtype=dtype, device=device))
        for weight in (self.weight_q, self.weight_k, self.weight_v):
            (init_method or (lambda w: nn.init.normal_(w, std=0.02)))(weight)

    def forward(self, input):
        return F.linear(input, self.weight_q), F.linear(input, self.weight_k), F.linear(input, self.weight_v)
