"""Build causal language models from the catalog's presets with `transformers` configs (no hub download).

    from fmlab.models import build_model
    model = build_model("tiny", seed=0)          # a LlamaForCausalLM small enough for a laptop CPU

The family of a preset picks the architecture (see catalog.ModelPreset): Llama for the Llama presets and
`tiny`, OPT (the GPT-3 layout, built from separate q/k/v nn.Linear layers so that tensor parallelism applies)
for the GPT presets, Falcon and BLOOM for those two. `planning.param_count` equals `num_parameters()` of
what this builds, exactly; tests/test_planning.py checks it.
"""

from __future__ import annotations

from fmlab import catalog
from fmlab.catalog import ModelPreset


def config_for(m: ModelPreset | str):
    """The `transformers` config of a preset."""
    import transformers as tf

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


def build_model(m: ModelPreset | str, seed: int = 0):
    """A freshly initialised causal LM for preset `m`, deterministic for a given seed."""
    import torch
    import transformers as tf

    config = config_for(m)
    torch.manual_seed(seed)
    return tf.AutoModelForCausalLM.from_config(config)
