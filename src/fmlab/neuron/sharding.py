"""Where each Llama weight goes in an AWS Neuron Distributed (NxD) checkpoint: the sharding rules, on plain PyTorch.

NxD trains a Llama with tensor parallelism (T ranks) and pipeline parallelism (P stages). Each (tp_rank, pp_rank)
holds a flat state dict that keeps Hugging Face parameter names with global layer numbers. This module splits a
full Hugging Face state dict into those shards and merges them back, exactly as NxD's parallel layers expect:

- `embed_tokens` (ParallelEmbedding) and `lm_head` (ColumnParallelLinear): split along the vocabulary, dim 0;
- q/k/v and the MLP gate/up projections (ColumnParallelLinear): dim 0; `o_proj` and `down_proj`
  (RowParallelLinear): dim 1; the RMSNorm weights: whole, on every rank of the stage that holds them;
- gate and up are fused per rank as `mlp.gate_up_proj.weight` = [this rank's gate rows; this rank's up rows]
  (NxD builds it as ColumnParallelLinear(2 * intermediate, stride=2));
- q/k/v stay separate by default; with `qkv_linear` they become `self_attn.qkv_proj.weight_q/_k/_v` of
  GQAQKVColumnParallelLinear: K and V are tiled `kv_size_multiplier` times (`weight.repeat(m, 1)`) so that every
  rank gets whole KV heads, and the Q heads (with the matching `o_proj` columns) are reordered so that each
  rank's Q heads sit with the KV heads that rank holds (the trn1 "interleaved" order);
- layers are cut into P contiguous stages, any remainder going to the later stages; the embedding lives on the
  first stage only, the final norm and `lm_head` on the last only.

    >>> from fmlab.neuron.sharding import LlamaShape, NxdLayout, pipeline_stages, q_head_order
    >>> pipeline_stages(3, 2)
    [range(0, 1), range(1, 3)]
    >>> q_head_order(heads=64, kv_heads=8, layout=NxdLayout(tp=32, qkv_linear=True, kv_size_multiplier=4))[:6]
    [0, 1, 8, 9, 16, 17]

Matched against the NxD sources (github.com/aws-neuron/neuronx-distributed, file @ commit read):
- src/neuronx_distributed/scripts/checkpoint_converter.py @ 28e9923d443c2d99eb6029803d3a16f9dea72344: partition
  dims, `gate_up_proj` fusion, `qkv_proj.weight_q/_k/_v` names, `full_p.repeat(kv_size_multiplier, 1)` and the
  trn1 Q-head order (its docstring example: 64 heads, 16 KV heads, multiplier 4 gives Q0, Q4, Q8, ...);
- examples/training/llama2/convert_checkpoints.py @ 10f5f7bfc3864bf2e2ccd6a987df360cfd5709c2: the same rules in
  the converter of the Llama 2 examples ("Q0Q1Q8Q9...Q2Q3Q10Q11..." for 70B at TP 32, multiplier 4);
- src/neuronx_distributed/modules/qkv_linear.py @ 0598cd8bfc046daf1105b79acd283ff5b6db657e: the layer's own
  constraints (T divisible by the multiplier; KV heads x multiplier divisible by T);
- src/neuronx_distributed/pipeline/partition.py @ 0f2a90f6ba2dc8fb12833d85e48732ca36717611: `create_partitions`;
- examples/training/llama/modeling_llama_nxd.py @ 22cadad34418fb8b5939bd8cdfc7a376eede9981: gate_up_proj with
  stride 2, local `repeat_kv` over each rank's own Q and KV heads.
Where NxD's offline converter handles only T == KV heads x multiplier, the Q order here is the general rule
that the layer implies (each replicated KV slot takes the Q heads of its group); it equals NxD's where both apply.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

Shards = dict[tuple[int, int], dict[str, torch.Tensor]]  # (tp_rank, pp_rank) -> flat state dict

LAYER_KEY = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
EMBED, NORM, HEAD = "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"
HF_LAYER_PARTS = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                  "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                  "input_layernorm.weight", "post_attention_layernorm.weight")
QKV_LINEAR_PARTS = {"q_proj": "qkv_proj.weight_q", "k_proj": "qkv_proj.weight_k", "v_proj": "qkv_proj.weight_v"}
_HF_KV = {"self_attn.k_proj.weight": "self_attn.k_proj.weight", "self_attn.qkv_proj.weight_k": "self_attn.k_proj.weight",
          "self_attn.v_proj.weight": "self_attn.v_proj.weight", "self_attn.qkv_proj.weight_v": "self_attn.v_proj.weight"}


class NeuronLayoutError(ValueError):
    """A layout or checkpoint that cannot work, with the change that would fix it in the message."""


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


@dataclass(frozen=True)
class LlamaShape:
    """The sizes of a Llama-architecture model that decide its shard shapes (read from a HF config.json)."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    layers: int
    intermediate: int
    vocab: int

    @classmethod
    def from_config(cls, config: dict) -> LlamaShape:
        """From the dict of a Hugging Face config.json; refuses what NxD's Llama does not have."""
        if config.get("model_type") != "llama":
            raise NeuronLayoutError(f"model_type is {config.get('model_type')!r}: this converter handles Llama "
                                    "(Llama 2 and 3 style) checkpoints, model_type 'llama'")
        if config.get("attention_bias") or config.get("mlp_bias"):
            raise NeuronLayoutError("attention_bias/mlp_bias are set: NxD's Llama layers have no biases")
        if config.get("tie_word_embeddings"):
            raise NeuronLayoutError("tie_word_embeddings is true: NxD's Llama keeps a separate lm_head; untie the "
                                    "model (copy model.embed_tokens.weight into lm_head.weight) before converting")
        heads = config["num_attention_heads"]
        hidden = config["hidden_size"]
        return cls(hidden=hidden, heads=heads, kv_heads=config.get("num_key_value_heads") or heads,
                   head_dim=config.get("head_dim") or hidden // heads, layers=config["num_hidden_layers"],
                   intermediate=config["intermediate_size"], vocab=config["vocab_size"])

    @classmethod
    def from_preset(cls, preset) -> LlamaShape:
        """From a `fmlab.plan.catalog.ModelPreset` of the llama family."""
        if preset.family != "llama":
            raise NeuronLayoutError(f"{preset.name} is a {preset.family} model; NxD conversion here is for Llama")
        return cls(hidden=preset.hidden, heads=preset.heads, kv_heads=preset.n_kv_heads, head_dim=preset.head_dim,
                   layers=preset.layers, intermediate=preset.ffn, vocab=preset.vocab)

    def hf_keys(self) -> list[str]:
        """Every parameter name of the Hugging Face LlamaForCausalLM, in model order."""
        keys = [EMBED]
        keys += [f"model.layers.{i}.{part}" for i in range(self.layers) for part in HF_LAYER_PARTS]
        return keys + [NORM, HEAD]


@dataclass(frozen=True)
class NxdLayout:
    """Tensor-parallel size `tp`, pipeline stages `pp`, and the attention layer NxD builds (`qkv_linear`)."""

    tp: int = 1
    pp: int = 1
    qkv_linear: bool = False
    kv_size_multiplier: int = 1

    def check(self, shape: LlamaShape) -> None:
        """Raise NeuronLayoutError, saying what to change, unless NxD can build this model with this layout."""
        t, m = self.tp, self.kv_size_multiplier
        if t < 1 or self.pp < 1 or m < 1:
            raise NeuronLayoutError(f"tp={t}, pp={self.pp} and kv_size_multiplier={m} must all be at least 1")
        for what, size in (("attention heads", shape.heads), ("intermediate size", shape.intermediate),
                           ("vocabulary", shape.vocab)):
            if size % t:
                raise NeuronLayoutError(f"tp={t} does not divide the {what} ({size}); choose tp among: "
                                        f"{_divisors(math.gcd(shape.heads, shape.intermediate, shape.vocab))}")
        if self.pp > shape.layers:
            raise NeuronLayoutError(f"pp={self.pp} is larger than the {shape.layers} layers: every pipeline stage "
                                    f"needs at least one layer, so use pp <= {shape.layers}")
        if not self.qkv_linear:
            if m != 1:
                raise NeuronLayoutError(f"kv_size_multiplier={m} only applies with qkv_linear (NxD's "
                                        "GQAQKVColumnParallelLinear); add --qkv-linear or drop the multiplier")
            if shape.kv_heads % t:
                raise NeuronLayoutError(
                    f"tp={t} does not divide the {shape.kv_heads} KV heads, so separate k_proj/v_proj cannot be "
                    f"split by whole heads; use qkv_linear with kv_size_multiplier="
                    f"{min_kv_size_multiplier(shape.kv_heads, t)} (NxD's GQAQKVColumnParallelLinear replicates "
                    "K/V heads), or a tp that divides the KV heads")
            return
        if t % m:
            raise NeuronLayoutError(f"kv_size_multiplier={m} must divide tp={t} (GQAQKVColumnParallelLinear asserts "
                                    f"it); the smallest that works is {min_kv_size_multiplier(shape.kv_heads, t)}")
        if (shape.kv_heads * m) % t:
            raise NeuronLayoutError(f"{shape.kv_heads} KV heads x kv_size_multiplier {m} = {shape.kv_heads * m} "
                                    f"replicated heads do not split evenly over tp={t}; use kv_size_multiplier="
                                    f"{min_kv_size_multiplier(shape.kv_heads, t)}")
        if shape.heads % (shape.kv_heads * m):
            raise NeuronLayoutError(f"{shape.heads} Q heads cannot be shared evenly among {shape.kv_heads * m} "
                                    f"replicated KV heads; use a smaller kv_size_multiplier than {m}")


def min_kv_size_multiplier(kv_heads: int, tp: int) -> int:
    """The smallest K/V replication that gives every one of `tp` ranks whole KV heads: tp / gcd(kv_heads, tp)."""
    return tp // math.gcd(kv_heads, tp)


def pipeline_stages(layers: int, pp: int) -> list[range]:
    """The layers of each pipeline stage: contiguous, equal, any remainder going to the later stages."""
    if not 1 <= pp <= layers:
        raise NeuronLayoutError(f"pp={pp} must be between 1 and the {layers} layers")
    sizes = [layers // pp] * pp
    for stage in range(pp - layers % pp, pp):
        sizes[stage] += 1
    starts = [sum(sizes[:s]) for s in range(pp)]
    return [range(start, start + size) for start, size in zip(starts, sizes, strict=True)]


def stage_of_layer(layer: int, layers: int, pp: int) -> int:
    """The pipeline rank that holds `layer` (0-based)."""
    for stage, members in enumerate(pipeline_stages(layers, pp)):
        if layer in members:
            return stage
    raise NeuronLayoutError(f"layer {layer} does not exist: the model has layers 0..{layers - 1}")


def q_head_order(heads: int, kv_heads: int, layout: NxdLayout) -> list[int]:
    """The Hugging Face Q-head numbers in the order NxD stores them, rank 0's heads first.

    Plain layout: unchanged. qkv_linear: K/V are tiled [kv0..kv(K-1)] x m, so replicated slot s = i*K + j is
    KV head j (copy i); it takes Q-head group j*m + i of size heads/(K*m), which belongs to KV head j in
    Hugging Face's grouping (Q head h uses KV head h // (heads/K)).
    """
    if not layout.qkv_linear:
        return list(range(heads))
    m = layout.kv_size_multiplier
    group = heads // (kv_heads * m)
    order = []
    for slot in range(kv_heads * m):
        copy, kv_head = divmod(slot, kv_heads)
        block = kv_head * m + copy
        order += range(block * group, (block + 1) * group)
    return order


def nxd_name(hf_name: str, layout: NxdLayout) -> str:
    """The key a Hugging Face parameter has in an NxD shard (gate and up both map to gate_up_proj)."""
    name = hf_name.replace("mlp.gate_proj.", "mlp.gate_up_proj.").replace("mlp.up_proj.", "mlp.gate_up_proj.")
    if layout.qkv_linear:
        for part, fused in QKV_LINEAR_PARTS.items():
            name = name.replace(f"self_attn.{part}.weight", f"self_attn.{fused}")
    return name


def stage_keys(shape: LlamaShape, layout: NxdLayout, pp_rank: int) -> list[str]:
    """The NxD keys every tensor-parallel rank of pipeline stage `pp_rank` holds."""
    layers = pipeline_stages(shape.layers, layout.pp)[pp_rank]
    keys = [EMBED] if pp_rank == 0 else []
    for key in shape.hf_keys()[1:-2]:
        if int(LAYER_KEY.match(key).group(1)) in layers:
            name = nxd_name(key, layout)
            if name not in keys:
                keys.append(name)
    return keys + ([NORM, HEAD] if pp_rank == layout.pp - 1 else [])


def shard_shape(name: str, shape: LlamaShape, layout: NxdLayout) -> tuple[int, ...]:
    """The shape of NxD key `name` on any one tensor-parallel rank (all ranks hold equal shapes)."""
    t, hd = layout.tp, shape.head_dim
    kv_rows = shape.kv_heads * hd * (layout.kv_size_multiplier if layout.qkv_linear else 1)
    part = LAYER_KEY.match(name).group(2) if LAYER_KEY.match(name) else name
    rows = {EMBED: shape.vocab // t, HEAD: shape.vocab // t, "self_attn.q_proj.weight": shape.heads * hd // t,
            "self_attn.qkv_proj.weight_q": shape.heads * hd // t}
    if part in rows:
        return (rows[part], shape.hidden)
    if part in ("self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.qkv_proj.weight_k",
                "self_attn.qkv_proj.weight_v"):
        return (kv_rows // t, shape.hidden)
    if part == "self_attn.o_proj.weight":
        return (shape.hidden, shape.heads * hd // t)
    if part == "mlp.gate_up_proj.weight":
        return (2 * shape.intermediate // t, shape.hidden)
    if part == "mlp.down_proj.weight":
        return (shape.hidden, shape.intermediate // t)
    if part in (NORM, "input_layernorm.weight", "post_attention_layernorm.weight"):
        return (shape.hidden,)
    raise NeuronLayoutError(f"{name!r} is not a parameter of NxD's Llama")


def _piece(tensor: torch.Tensor, dim: int, parts: int, index: int) -> torch.Tensor:
    """Slice `index` of `parts` along `dim`, as its own compact tensor (a view would save the whole storage)."""
    size = tensor.shape[dim] // parts
    return tensor.narrow(dim, index * size, size).clone(memory_format=torch.contiguous_format)


def _heads_view(weight: torch.Tensor, heads: int, dim: int) -> torch.Tensor:
    """Split the head dimension of a projection weight: (heads, head_dim, in) or (out, heads, head_dim)."""
    return weight.unflatten(dim, (heads, -1))


def shard_state_dict(full: dict[str, torch.Tensor], shape: LlamaShape, layout: NxdLayout) -> Shards:
    """Split a full Hugging Face Llama state dict into NxD's per-(tp_rank, pp_rank) state dicts."""
    layout.check(shape)
    order = q_head_order(shape.heads, shape.kv_heads, layout)
    t = layout.tp
    shards: Shards = {(r, p): {} for r in range(t) for p in range(layout.pp)}
    for p in range(layout.pp):
        for key in stage_keys(shape, layout, p):
            part = LAYER_KEY.match(key).group(2) if LAYER_KEY.match(key) else key
            prefix = key[: len(key) - len(part)]
            if part in (EMBED, HEAD):
                pieces = [_piece(full[key], 0, t, r) for r in range(t)]
            elif part in (NORM, "input_layernorm.weight", "post_attention_layernorm.weight"):
                pieces = [full[key].clone() for _ in range(t)]
            elif part == "mlp.gate_up_proj.weight":
                gate, up = full[prefix + "mlp.gate_proj.weight"], full[prefix + "mlp.up_proj.weight"]
                pieces = [torch.cat([_piece(gate, 0, t, r), _piece(up, 0, t, r)]) for r in range(t)]
            elif part == "mlp.down_proj.weight":
                pieces = [_piece(full[key], 1, t, r) for r in range(t)]
            elif part == "self_attn.o_proj.weight":
                reordered = _heads_view(full[key], shape.heads, 1)[:, order].flatten(1, 2)
                pieces = [_piece(reordered, 1, t, r) for r in range(t)]
            elif part in ("self_attn.q_proj.weight", "self_attn.qkv_proj.weight_q"):
                q = full[prefix + "self_attn.q_proj.weight"]
                reordered = _heads_view(q, shape.heads, 0)[order].flatten(0, 1)
                pieces = [_piece(reordered, 0, t, r) for r in range(t)]
            else:  # k or v, separate or tiled by the multiplier
                hf = prefix + _HF_KV[part]
                tiled = full[hf].repeat(layout.kv_size_multiplier, 1) if layout.qkv_linear else full[hf]
                pieces = [_piece(tiled, 0, t, r) for r in range(t)]
            for r, piece in enumerate(pieces):
                shards[(r, p)][key] = piece
    return shards


def merge_shards(shards: Shards, shape: LlamaShape, layout: NxdLayout) -> dict[str, torch.Tensor]:
    """Rebuild the full Hugging Face state dict from NxD shards (the exact inverse of `shard_state_dict`).

    Every shard must hold exactly the keys and shapes the rules give its rank; otherwise NeuronLayoutError.
    With qkv_linear, K and V are taken from the first of their `kv_size_multiplier` copies, as NxD does.
    """
    layout.check(shape)
    check_shards(shards, shape, layout)
    order = torch.tensor(q_head_order(shape.heads, shape.kv_heads, layout))
    t = layout.tp
    full: dict[str, torch.Tensor] = {}
    for p in range(layout.pp):
        for key in stage_keys(shape, layout, p):
            pieces = [shards[(r, p)][key] for r in range(t)]
            part = LAYER_KEY.match(key).group(2) if LAYER_KEY.match(key) else key
            prefix = key[: len(key) - len(part)]
            if part in (NORM, "input_layernorm.weight", "post_attention_layernorm.weight"):
                full[key] = pieces[0].clone()
            elif part == "mlp.gate_up_proj.weight":
                halves = [piece.chunk(2, dim=0) for piece in pieces]
                full[prefix + "mlp.gate_proj.weight"] = torch.cat([h[0] for h in halves])
                full[prefix + "mlp.up_proj.weight"] = torch.cat([h[1] for h in halves])
            elif part in ("mlp.down_proj.weight",):
                full[key] = torch.cat(pieces, dim=1)
            elif part == "self_attn.o_proj.weight":
                stored = _heads_view(torch.cat(pieces, dim=1), shape.heads, 1)
                restored = torch.empty_like(stored)
                restored[:, order] = stored
                full[key] = restored.flatten(1, 2)
            elif part in ("self_attn.q_proj.weight", "self_attn.qkv_proj.weight_q"):
                stored = _heads_view(torch.cat(pieces), shape.heads, 0)
                restored = torch.empty_like(stored)
                restored[order] = stored
                full[prefix + "self_attn.q_proj.weight"] = restored.flatten(0, 1)
            elif part in (EMBED, HEAD):
                full[key] = torch.cat(pieces)
            else:
                hf = prefix + _HF_KV[part]
                whole = torch.cat(pieces)
                full[hf] = whole[: shape.kv_heads * shape.head_dim].clone() if layout.qkv_linear else whole
    return {key: full[key] for key in shape.hf_keys()}


def check_shards(shards: Shards, shape: LlamaShape, layout: NxdLayout) -> None:
    """Raise NeuronLayoutError naming the rank, key and shape of anything missing, extra or misshapen."""
    problems = []
    for p in range(layout.pp):
        expected = stage_keys(shape, layout, p)
        for r in range(layout.tp):
            rank = f"tp_rank_{r:02d}_pp_rank_{p:02d}"
            if (r, p) not in shards:
                problems.append(f"{rank} is missing")
                continue
            found = shards[(r, p)]
            missing = [k for k in expected if k not in found]
            extra = sorted(set(found) - set(expected))
            if missing:
                problems.append(f"{rank} lacks {len(missing)} key(s): {', '.join(missing[:4])}")
            if extra:
                problems.append(f"{rank} has {len(extra)} unexpected key(s): {', '.join(extra[:4])}")
            for key in expected:
                if key in found and tuple(found[key].shape) != shard_shape(key, shape, layout):
                    problems.append(f"{rank} {key} has shape {tuple(found[key].shape)}, expected "
                                    f"{shard_shape(key, shape, layout)}")
    if problems:
        raise NeuronLayoutError("the NxD shards do not match this config and layout "
                                f"(tp={layout.tp}, pp={layout.pp}, qkv_linear={layout.qkv_linear}):\n  "
                                + "\n  ".join(problems[:12]))
