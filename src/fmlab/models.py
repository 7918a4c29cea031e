"""Build causal language models from the catalog's presets with `transformers` configs (no hub download).

    from fmlab.models import build_model
    model = build_model("tiny", seed=0)          # a LlamaForCausalLM small enough for a laptop CPU

The family of a preset picks the architecture (see catalog.ModelPreset): Llama for the Llama presets and
`tiny`, OPT (the GPT-3 layout, built from separate q/k/v nn.Linear layers so that tensor parallelism applies)
for the GPT presets, Falcon and BLOOM for those two. `planning.param_count` equals `num_parameters()` of
what this builds, exactly; tests/plan/test_planning.py checks it.

For the parallel engine (fmlab.parallel) this module also says where a model's decoder layers are
(`decoder_layers`) and how tensor parallelism splits them (`tp_plan`): column-parallel q/k/v and MLP up/gate,
row-parallel output projections, a vocabulary-parallel embedding and LM head. Why OPT for the GPT presets:
PyTorch tensor parallelism only accepts nn.Linear / nn.Embedding, so GPT-2's Conv1D and a fused q/k/v
cannot be split, while OPT has the same GPT-3 layout with separate nn.Linear projections.

Checked against transformers 5.23: Llama's attention reshapes q/k/v with `view(..., -1, head_dim)`, so a
local shard with fewer heads works unchanged; OPT's reshapes with `view(bsz, -1, self.num_heads, head_dim)`,
which on a shard would silently fold heads into the sequence axis, so `shard_attention_heads` divides
`num_heads` by the tensor-parallel degree (the parity tests catch it if that is forgotten).

The training engine's model attends with `use_pretraining_attention`: an attention function registered with
transformers' public AttentionInterface (`pretraining_attention`: transformers' SDPA call without the causal mask
"sdpa" prepares on every forward), called by transformers' own attention modules; the same bits as "sdpa", and an
exported model attends with "sdpa" again.

Importing transformers' model code costs about 4 s per process on a 2-core laptop (measured:
`python -c "import transformers; from transformers import LlamaForCausalLM"`, 4.0-5.0 s after torch's 1-2 s);
every spawned worker pays it once, which is why the multi-process demos run many checks per spawned world.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import transformers as tf

from fmlab.plan import catalog
from fmlab.plan.catalog import ModelPreset


def config_for(m: ModelPreset | str):
    """The `transformers` config of a preset."""
    m = catalog.model(m) if isinstance(m, str) else m
    if m.family == "llama":
        return tf.LlamaConfig(vocab_size=m.vocab, hidden_size=m.hidden, intermediate_size=m.ffn,
                              num_hidden_layers=m.layers, num_attention_heads=m.heads,
                              num_key_value_heads=m.n_kv_heads, max_position_embeddings=m.seq_len,
                              tie_word_embeddings=False)
    if m.family == "opt":
        return tf.OPTConfig(vocab_size=m.vocab, hidden_size=m.hidden, ffn_dim=m.ffn, num_hidden_layers=m.layers,
                            num_attention_heads=m.heads, max_position_embeddings=m.seq_len,
                            word_embed_proj_dim=m.hidden, activation_function="gelu", dropout=0.0,
                            attention_dropout=0.0)
    if m.family == "falcon":
        return tf.FalconConfig(vocab_size=m.vocab, hidden_size=m.hidden, num_hidden_layers=m.layers,
                               num_attention_heads=m.heads, num_kv_heads=m.n_kv_heads, new_decoder_architecture=True,
                               bias=False, parallel_attn=True, alibi=False, ffn_hidden_size=m.ffn,
                               max_position_embeddings=m.seq_len)
    if m.family == "bloom":
        return tf.BloomConfig(vocab_size=m.vocab, hidden_size=m.hidden, n_layer=m.layers, n_head=m.heads)
    raise ValueError(f"unknown model family {m.family!r}: expected llama, opt, falcon or bloom")


def build_model(m: ModelPreset | str, seed: int = 0, dtype=None, device=None):
    """A freshly initialised causal LM for preset `m`, identical for a given seed on every process.

    The caller's random state is left untouched (the initialisation runs in a forked RNG). `dtype` (default
    float32) sets the parameter dtype; `device="meta"` builds the model without allocating its weights
    (delayed parameter initialisation: shard first, then materialise only the local shard). The model is
    configured for training (`use_cache=False`).
    """
    config = config_for(m)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with torch.device(device or "cpu"):
            model = tf.AutoModelForCausalLM.from_config(config, dtype=dtype or torch.float32)
    # Training never reuses keys/values, and a KV cache would be filled again when a checkpointed layer is
    # recomputed in the backward pass; set use_cache back to True for generation.
    model.config.use_cache = False
    return model


def family_of(model) -> str:
    """'llama' or 'opt' (the families the parallel engine splits) for a model built here."""
    kind = model.config.model_type
    if kind not in ("llama", "opt"):
        raise ValueError(f"the parallel engine supports the llama and opt families, not {kind!r}: "
                         f"pick a preset whose family is llama or opt (e.g. 'tiny' or 'tiny-gpt')")
    return kind


def decoder_layers(model):
    """The nn.ModuleList of transformer blocks (the unit that is checkpointed, offloaded and sharded)."""
    if family_of(model) == "llama":
        return model.model.layers
    return model.model.decoder.layers


def embedding_name(model) -> str:
    """Dotted name of the token embedding module."""
    return "model.embed_tokens" if family_of(model) == "llama" else "model.decoder.embed_tokens"


# Megatron-style split of one decoder layer: each "colwise" layer keeps a slice of its output features
# (whole attention heads, or a slice of the MLP's hidden width); each "rowwise" layer takes that slice as its
# input and all-reduces its partial output. One all-reduce after attention, one after the MLP.
_LAYER_PLANS = {
    "llama": {"self_attn.q_proj": "colwise", "self_attn.k_proj": "colwise", "self_attn.v_proj": "colwise",
              "self_attn.o_proj": "rowwise", "mlp.gate_proj": "colwise", "mlp.up_proj": "colwise",
              "mlp.down_proj": "rowwise"},
    "opt": {"self_attn.q_proj": "colwise", "self_attn.k_proj": "colwise", "self_attn.v_proj": "colwise",
            "self_attn.out_proj": "rowwise", "fc1": "colwise", "fc2": "rowwise"},
}


def tp_plan(model, vocab_parallel: bool = True) -> dict[str, str]:
    """Tensor-parallel plan: fully qualified module name -> 'colwise' | 'rowwise' | 'embedding' | 'lm_head'.

    With vocab_parallel, the token embedding is split by vocabulary rows ('embedding') and the LM head by
    output vocabulary ('lm_head', logits gathered back), as Megatron-LM does; norms and OPT's learned
    positions stay replicated (they are small).
    """
    family = family_of(model)
    prefix = "model.layers" if family == "llama" else "model.decoder.layers"
    plan = {f"{prefix}.{i}.{name}": style for i in range(len(decoder_layers(model)))
            for name, style in _LAYER_PLANS[family].items()}
    if vocab_parallel:
        plan[embedding_name(model)] = "embedding"
        plan["lm_head"] = "lm_head"
    return plan


def shard_attention_heads(model, tp: int) -> None:
    """Tell attention modules that keep a head count how many heads they hold locally (OPT's `num_heads`)."""
    for layer in decoder_layers(model):
        attn = layer.self_attn
        if hasattr(attn, "num_heads"):  # OPT; Llama infers the local head count from the shard's width
            if attn.num_heads % tp:
                raise ValueError(f"tp={tp} must divide the {attn.num_heads} attention heads")
            attn.num_heads //= tp


# ---------------------------------------------------------------- the attention the engine trains with

PRETRAINING_ATTENTION = "fmlab_pretraining_sdpa"


class PretrainingAttentionError(ValueError):
    """A model set up for pretraining rows was asked for something else (a KV cache, generation)."""


def pretraining_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """Causal attention over whole, unpadded rows, as a `transformers` attention function: one SDPA call with
    `is_causal` and grouped keys/values (`enable_gqa`), and no mask built.

    transformers' "sdpa" builds the mask first (`create_causal_mask`): on every forward it looks for packed
    sequences in the position ids (a diff, a cumsum, a reduction read back to Python) before deciding that none is
    needed. Pretraining rows never need one, and on the course's tiny model that check is 1-2% of a training
    step on a CPU (benchmarks/train_throughput.py). The same SDPA kernel runs with the same arguments, so the
    numbers are those of "sdpa" exactly (tests/test_models.py).
    """
    if query.shape[2] != key.shape[2]:
        raise PretrainingAttentionError(
            f"{PRETRAINING_ATTENTION} attends whole rows, but got {query.shape[2]} queries for {key.shape[2]} keys "
            f"(a KV cache, as in generation): call fmlab.models.use_pretraining_attention(model, False) first")
    out = F.scaled_dot_product_attention(query, key, value, dropout_p=dropout, scale=scaling, is_causal=True,
                                         enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


def use_pretraining_attention(model, enable: bool = True) -> None:
    """Train `model` with the pretraining attention: transformers' attention implementation becomes
    `pretraining_attention`, registered with its public AttentionInterface, so no causal mask is prepared; every
    module's forward stays transformers' own (projections, rotary positions, the KV-cache hook), which calls the
    registered function for the attention itself. Loss and gradients are bit-equal to "sdpa" (tests/test_models.py).

    For the training engine's own model only: with an implementation that builds no mask, transformers drops any
    `attention_mask` a caller passes, so padded batches would attend to their padding; generation (a KV cache) is
    refused with a message by `pretraining_attention` once the queries are fewer than the cached keys (the first
    decoding step after the prompt). `enable=False` gives the model transformers' "sdpa" back. The setting is not
    saved with the model (config.json never holds it); a model loaded from an export attends with "sdpa".
    """
    tf.AttentionInterface.register(PRETRAINING_ATTENTION, pretraining_attention)
    model.set_attn_implementation(PRETRAINING_ATTENTION if enable else "sdpa")
