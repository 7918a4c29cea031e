"""A Llama built from Neuron Distributed (NxD) parallel layers, for the trn1 continued-pretraining script.

    from fmlab.neuron.model import LlamaSpec, NxdLlamaForCausalLM
    spec = LlamaSpec.from_config(json.load(open("nxd/config.json")), qkv_linear=False, kv_size_multiplier=1)
    model = NxdLlamaForCausalLM(spec)        # inside neuronx_distributed.trainer.initialize_parallel_model
    loss, logits = model(input_ids, labels=input_ids)

Its state_dict keys and per-rank shapes are exactly those `fmlab.neuron.sharding` gives for the same tensor size,
qkv_linear and KV multiplier (tests/neuron/test_neuron_train.py checks it), so checkpoints written by `fmlab convert
hf-to-nxd` load with strict=True, and `fmlab convert nxd-to-hf` reads what training saves. The math is Hugging
Face Llama's (RMSNorm in fp32, rotary embeddings with rotate_half, grouped-query attention by repeating each KV
head over its group of Q heads, SwiGLU MLP, next-token cross entropy averaged over tokens), written here so
that the Neuron container's own `transformers` version does not matter. At tensor size 1 the loss equals
`transformers.LlamaForCausalLM`'s on the same weights.

Only torch (and fmlab.neuron.sharding) is imported at module level; the NxD layers are imported when a model is built, so this file
imports anywhere. Written against github.com/aws-neuron/neuronx-distributed (reference only, no code copied):
examples/training/llama/modeling_llama_nxd.py @ 22cadad34418fb8b5939bd8cdfc7a376eede9981 (which parallel
layer holds which weight; gate_up_proj with stride 2 split in two per rank; local repeat_kv),
src/neuronx_distributed/parallel_layers/layers.py @ 0598cd8bfc046daf1105b79acd283ff5b6db657e (ColumnParallelLinear,
RowParallelLinear, ParallelEmbedding signatures), modules/qkv_linear.py @ 0598cd8bfc046daf1105b79acd283ff5b6db657e
(GQAQKVColumnParallelLinear: weight_q/_k/_v, kv_size_multiplier, forward returns q, k, v) and
parallel_layers/loss_functions.py @ 3aa65c661c45f133a99052746ed70a0121d0e695 (parallel_cross_entropy per token).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import nn

from fmlab.neuron.sharding import LlamaShape


class NeuronModelError(ValueError):
    """A model config the NxD Llama here cannot build, with what to change in the message."""


@dataclass(frozen=True)
class LlamaSpec(LlamaShape):
    """The sizes of a Llama (LlamaShape, the converter's view), its numerics, and the attention layer to build."""

    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    qkv_linear: bool = False
    kv_size_multiplier: int = 1

    @classmethod
    def from_config(cls, config: dict, qkv_linear: bool = False, kv_size_multiplier: int = 1) -> LlamaSpec:
        shape = LlamaShape.from_config(config)  # the checks the converter makes (Llama, no biases, untied head)
        if config.get("hidden_act", "silu") != "silu":
            raise NeuronModelError(f"hidden_act {config['hidden_act']!r}: Llama's MLP here is SwiGLU (silu)")
        rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
        kind = rope.get("rope_type", rope.get("type", "default"))
        if kind != "default":
            raise NeuronModelError(f"rope_type {kind!r} is not supported: this script implements plain rotary "
                                   "embeddings (Llama 2 style); use a config without rope scaling")
        return cls(**dataclasses.asdict(shape), rms_norm_eps=config.get("rms_norm_eps", 1e-6),
                   rope_theta=rope.get("rope_theta", config.get("rope_theta", 10000.0)),
                   qkv_linear=qkv_linear, kv_size_multiplier=kv_size_multiplier)


class RMSNorm(nn.Module):
    """x / rms(x) * weight, computed in fp32 and cast back (as Hugging Face's LlamaRMSNorm)."""

    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.to(torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class Rotary(nn.Module):
    """cos and sin of the rotary angles for positions 0..T-1 (a non-persistent buffer: not in the state dict)."""

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor):
        """cos, sin [seq, head_dim] for x [batch, heads, seq, head_dim]; positions are counted off x itself
        (not torch.arange(seq)) so that torch.fx, which NxD's pipeline parallelism traces with, can follow."""
        positions = torch.ones_like(x[0, 0, :, 0], dtype=torch.float32).cumsum(0) - 1
        angles = positions[:, None] * self.inv_freq[None, :].float()
        emb = torch.cat((angles, angles), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class Attention(nn.Module):
    """Causal grouped-query attention over this rank's heads (heads / tp Q heads, KV heads x multiplier / tp)."""

    def __init__(self, spec: LlamaSpec):
        super().__init__()
        from neuronx_distributed.modules.qkv_linear import GQAQKVColumnParallelLinear
        from neuronx_distributed.parallel_layers.layers import ColumnParallelLinear, RowParallelLinear
        from neuronx_distributed.parallel_layers.parallel_state import get_tensor_model_parallel_size

        tp = get_tensor_model_parallel_size()
        q_size, kv_size = spec.heads * spec.head_dim, spec.kv_heads * spec.head_dim
        if spec.qkv_linear:
            self.qkv_proj = GQAQKVColumnParallelLinear(spec.hidden, [q_size, kv_size], bias=False, gather_output=False,
                                                       kv_size_multiplier=spec.kv_size_multiplier)
        else:
            self.q_proj = ColumnParallelLinear(spec.hidden, q_size, bias=False, gather_output=False)
            self.k_proj = ColumnParallelLinear(spec.hidden, kv_size, bias=False, gather_output=False)
            self.v_proj = ColumnParallelLinear(spec.hidden, kv_size, bias=False, gather_output=False)
        self.o_proj = RowParallelLinear(q_size, spec.hidden, bias=False, input_is_parallel=True)
        multiplier = spec.kv_size_multiplier if spec.qkv_linear else 1
        self.local_heads = spec.heads // tp
        self.local_kv_heads = spec.kv_heads * multiplier // tp
        self.head_dim = spec.head_dim
        self.rotary = Rotary(spec.head_dim, spec.rope_theta)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        if hasattr(self, "qkv_proj"):
            q, k, v = self.qkv_proj(x)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = q.view(batch, seq, self.local_heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, seq, self.local_kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, seq, self.local_kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary(q)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        group = self.local_heads // self.local_kv_heads  # each KV head serves `group` consecutive Q heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        future = torch.ones_like(scores[0, 0], dtype=torch.bool).triu(diagonal=1)
        # -1e4 as NxD's CoreAttention: a constant keeps the forward traceable by torch.fx (NxD's pipeline
        # tracer), and exp(-1e4) is exactly 0 in the fp32 softmax, as with Hugging Face's finfo.min.
        scores = scores.masked_fill(future, -1e4)
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(weights, v).transpose(1, 2).reshape(batch, seq, self.local_heads * self.head_dim)
        return self.o_proj(out)


class MLP(nn.Module):
    """down(silu(gate(x)) * up(x)), gate and up fused per rank as [this rank's gate rows; its up rows]."""

    def __init__(self, spec: LlamaSpec):
        super().__init__()
        from neuronx_distributed.parallel_layers.layers import ColumnParallelLinear, RowParallelLinear

        self.gate_up_proj = ColumnParallelLinear(spec.hidden, 2 * spec.intermediate, stride=2, bias=False,
                                                 gather_output=False)
        self.down_proj = RowParallelLinear(spec.intermediate, spec.hidden, bias=False, input_is_parallel=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(nn.functional.silu(gate) * up)


class DecoderLayer(nn.Module):
    """One pre-norm Llama block; the unit of pipeline cuts and of full activation checkpointing."""

    def __init__(self, spec: LlamaSpec):
        super().__init__()
        self.self_attn = Attention(spec)
        self.mlp = MLP(spec)
        self.input_layernorm = RMSNorm(spec.hidden, spec.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(spec.hidden, spec.rms_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaBody(nn.Module):
    """Embedding, decoder layers and final norm: the `model.` prefix of the Hugging Face names."""

    def __init__(self, spec: LlamaSpec):
        super().__init__()
        from neuronx_distributed.parallel_layers.layers import ParallelEmbedding

        self.embed_tokens = ParallelEmbedding(spec.vocab, spec.hidden)
        self.layers = nn.ModuleList(DecoderLayer(spec) for _ in range(spec.layers))
        self.norm = RMSNorm(spec.hidden, spec.rms_norm_eps)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class NxdLlamaForCausalLM(nn.Module):
    """forward(input_ids, labels) -> (mean next-token loss, this rank's vocabulary slice of the logits)."""

    def __init__(self, spec: LlamaSpec):
        super().__init__()
        from neuronx_distributed.parallel_layers.layers import ColumnParallelLinear

        self.spec = spec
        self.model = LlamaBody(spec)
        self.lm_head = ColumnParallelLinear(spec.hidden, spec.vocab, bias=False, gather_output=False)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None):
        from neuronx_distributed.parallel_layers.loss_functions import parallel_cross_entropy

        logits = self.lm_head(self.model(input_ids)).to(torch.float32)
        if labels is None:
            return (logits,)
        shifted = logits[:, :-1, :].contiguous()
        targets = labels[:, 1:].contiguous()
        per_token = parallel_cross_entropy(shifted.view(-1, shifted.size(-1)), targets.view(-1))
        return per_token.mean(), logits
