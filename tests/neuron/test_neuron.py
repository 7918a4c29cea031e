"""Hugging Face Llama <-> Neuron Distributed checkpoints: round trips, the sharding rules, both layouts, the errors.

Run: .venv/bin/pytest tests/neuron/test_neuron.py -q   (tiny Llamas built locally; nothing is downloaded)

The rules are NxD's (github.com/aws-neuron/neuronx-distributed, commits cited in fmlab/sharding.py). A round
trip alone could not catch a wrong head order (any permutation inverts), so `test_shards_compute_the_models_logits`
also runs the model from the shards the way NxD's parallel layers would and compares with transformers.
"""

import dataclasses
import json
import os

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import LlamaForCausalLM
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from fmlab.cli import main
from fmlab.models import build_model
from fmlab.neuron import hf_state_to_nxd, hf_to_nxd, nxd_to_hf, shard_table, sharding
from fmlab.neuron.files import find_shard_files, read_shards
from fmlab.neuron.sharding import (
    EMBED,
    HEAD,
    NORM,
    LlamaShape,
    NeuronLayoutError,
    NxdLayout,
    pipeline_stages,
    q_head_order,
    shard_shape,
    stage_of_layer,
)
from fmlab.plan import catalog

TINY = catalog.model("tiny")  # hidden 64, 4 heads of 16, vocab 512, intermediate 176
PRESETS = {"gqa3": dataclasses.replace(TINY, layers=3),  # 2 KV heads; 3 layers: not divisible by pp=2
           "mha3": dataclasses.replace(TINY, layers=3, kv_heads=4)}
IDS = torch.randint(0, TINY.vocab, (2, 12), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    """{name: (folder, model)} for the tiny Llamas, saved with save_pretrained (fp32)."""
    made = {}
    for name, preset in PRESETS.items():
        folder = tmp_path_factory.mktemp(name)
        model = build_model(preset, seed=1)
        model.save_pretrained(folder)
        made[name] = (folder, model.eval())
    return made


def shape_of(name):
    return LlamaShape.from_preset(PRESETS[name])


ROUND_TRIPS = [  # model, tp, pp, qkv_linear, kv_size_multiplier, layout
    ("gqa3", 1, 1, False, 1, "current"), ("gqa3", 1, 2, False, 1, "legacy"), ("gqa3", 2, 1, False, 1, "legacy"),
    ("gqa3", 2, 2, False, 1, "current"), ("gqa3", 4, 1, True, 2, "current"), ("gqa3", 4, 2, True, 2, "legacy"),
    ("gqa3", 2, 2, True, 1, "current"), ("gqa3", 2, 1, True, 2, "legacy"), ("gqa3", 1, 2, True, 1, "legacy"),
    ("mha3", 4, 1, False, 1, "legacy"), ("mha3", 4, 2, False, 1, "current"),
]


@pytest.mark.parametrize("name,tp,pp,qkv,mult,layout", ROUND_TRIPS)
def test_round_trip_is_bit_identical_and_loads_in_transformers(hf, tmp_path, name, tp, pp, qkv, mult, layout):
    folder, model = hf[name]
    report = hf_to_nxd(folder, tmp_path / "nxd", tp=tp, pp=pp, layout=layout, qkv_linear=qkv,
                       kv_size_multiplier=mult, dtype="fp32")
    assert len([f for f in report.files if f.suffix == ".pt"]) == tp * pp
    back = nxd_to_hf(tmp_path / "nxd", tmp_path / "hf", config=folder / "config.json")
    assert back.nxd == NxdLayout(tp, pp, qkv, mult) and back.layout == layout
    original, restored = load_file(folder / "model.safetensors"), load_file(tmp_path / "hf" / "model.safetensors")
    assert restored.keys() == original.keys()
    for key, tensor in original.items():
        assert restored[key].dtype == tensor.dtype and torch.equal(restored[key], tensor), key
    reloaded = LlamaForCausalLM.from_pretrained(tmp_path / "hf").eval()
    with torch.no_grad():
        assert torch.equal(reloaded(IDS).logits, model(IDS).logits)


def test_default_dtype_is_bf16_and_kept_on_the_way_back(hf, tmp_path):
    folder, _ = hf["gqa3"]
    hf_to_nxd(folder, tmp_path / "nxd", tp=2, pp=2)
    shards = read_shards(find_shard_files(tmp_path / "nxd"))
    assert {t.dtype for s in shards.values() for t in s.values()} == {torch.bfloat16}
    nxd_to_hf(tmp_path / "nxd", tmp_path / "hf", config=folder)
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["dtype"] == "bfloat16"
    for key, tensor in load_file(folder / "model.safetensors").items():
        assert torch.equal(load_file(tmp_path / "hf" / "model.safetensors")[key], tensor.to(torch.bfloat16))
    want = LlamaForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).eval()
    got = LlamaForCausalLM.from_pretrained(tmp_path / "hf").eval()
    with torch.no_grad():
        assert got.dtype == torch.bfloat16 and torch.equal(got(IDS).logits, want(IDS).logits)


# ---------------------------------------------------------------- the shards compute the model

def rms_norm(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def nxd_forward(shards, shape, layout, model, ids):
    """Logits computed rank by rank from NxD shards: vocab-parallel embedding, column-parallel q/k/v and gate_up,
    each rank's own heads with a local repeat_kv (as NxD's LlamaAttention does), row-parallel o_proj/down_proj
    summed over ranks (the all-reduce), and the lm_head's vocabulary slices concatenated."""
    t, eps, hd = layout.tp, model.config.rms_norm_eps, shape.head_dim
    rows = shape.vocab // t
    h = sum(F.embedding((ids - r * rows).clamp(0, rows - 1), shards[(r, 0)][EMBED])
            * ((ids >= r * rows) & (ids < (r + 1) * rows))[..., None] for r in range(t))
    cos, sin = model.model.rotary_emb(h, torch.arange(ids.shape[1])[None])
    causal = torch.full((ids.shape[1], ids.shape[1]), float("-inf")).triu(1)
    q_key, k_key, v_key = (("qkv_proj.weight_q", "qkv_proj.weight_k", "qkv_proj.weight_v") if layout.qkv_linear
                           else ("q_proj.weight", "k_proj.weight", "v_proj.weight"))
    for p, layers in enumerate(pipeline_stages(shape.layers, layout.pp)):
        for i in layers:
            pre = f"model.layers.{i}."
            x = rms_norm(h, shards[(0, p)][pre + "input_layernorm.weight"], eps)
            attention = 0
            for r in range(t):
                s = shards[(r, p)]
                q, k, v = (x @ s[pre + "self_attn." + key].T for key in (q_key, k_key, v_key))
                q, k, v = (y.unflatten(-1, (-1, hd)).transpose(1, 2) for y in (q, k, v))
                q, k = apply_rotary_pos_emb(q, k, cos, sin)
                group = q.shape[1] // k.shape[1]
                k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
                weights = torch.softmax(q @ k.transpose(-1, -2) / hd**0.5 + causal, dim=-1)
                out = (weights @ v).transpose(1, 2).flatten(-2)
                attention = attention + out @ s[pre + "self_attn.o_proj.weight"].T
            h = h + attention
            x = rms_norm(h, shards[(0, p)][pre + "post_attention_layernorm.weight"], eps)
            mlp = 0
            for r in range(t):
                gate, up = (x @ shards[(r, p)][pre + "mlp.gate_up_proj.weight"].T).chunk(2, dim=-1)
                mlp = mlp + (F.silu(gate) * up) @ shards[(r, p)][pre + "mlp.down_proj.weight"].T
            h = h + mlp
    last = layout.pp - 1
    h = rms_norm(h, shards[(0, last)][NORM], eps)
    return torch.cat([h @ shards[(r, last)][HEAD].T for r in range(t)], dim=-1)


FORWARDS = [("gqa3", NxdLayout(2, 2)), ("gqa3", NxdLayout(4, 2, True, 2)), ("gqa3", NxdLayout(2, 1, True, 2)),
            ("gqa3", NxdLayout(2, 2, True, 1)), ("mha3", NxdLayout(4, 2))]


@pytest.mark.parametrize("name,layout", FORWARDS)
def test_shards_compute_the_models_logits(hf, name, layout):
    _, model = hf[name]
    shards = hf_state_to_nxd(model.state_dict(), model.config.to_dict(), layout)
    with torch.no_grad():
        assert torch.allclose(nxd_forward(shards, shape_of(name), layout, model, IDS), model(IDS).logits,
                              atol=1e-5, rtol=1e-4)


def test_plain_head_order_would_break_the_gqa_layout(hf, monkeypatch):
    """The check above can fail: keep Hugging Face's Q order with K/V tiled, and ranks pair Q with wrong KV heads."""
    _, model = hf["gqa3"]
    layout = NxdLayout(4, 1, True, 2)
    monkeypatch.setattr(sharding, "q_head_order", lambda heads, kv, lay: list(range(heads)))
    shards = hf_state_to_nxd(model.state_dict(), model.config.to_dict(), layout)
    with torch.no_grad():
        assert not torch.allclose(nxd_forward(shards, shape_of("gqa3"), layout, model, IDS), model(IDS).logits,
                                  atol=1e-3)


# ---------------------------------------------------------------- the rules, tensor by tensor

def test_shard_keys_slices_and_placement_follow_nxd_rules(hf):
    _, model = hf["gqa3"]
    full, layout = model.state_dict(), NxdLayout(2, 2)
    shards = hf_state_to_nxd(full, model.config.to_dict(), layout)
    assert pipeline_stages(3, 2) == [range(0, 1), range(1, 3)]  # the odd layer goes to the later stage
    layer_keys = [f"model.layers.{{}}.{p}" for p in (
        "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
        "mlp.gate_up_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight")]
    for r in range(2):
        assert list(shards[(r, 0)]) == [EMBED] + [k.format(0) for k in layer_keys]
        assert list(shards[(r, 1)]) == [k.format(i) for i in (1, 2) for k in layer_keys] + [NORM, HEAD]
    s = shards[(1, 1)]  # second tensor-parallel rank of the last stage
    assert torch.equal(shards[(1, 0)][EMBED], full[EMBED][256:])  # vocabulary split, dim 0
    assert torch.equal(s[HEAD], full[HEAD][256:])
    assert torch.equal(s[NORM], full[NORM]) and torch.equal(shards[(0, 1)][NORM], full[NORM])  # whole
    pre = "model.layers.2."
    assert torch.equal(s[pre + "self_attn.q_proj.weight"], full[pre + "self_attn.q_proj.weight"][32:])  # column
    assert torch.equal(s[pre + "self_attn.k_proj.weight"], full[pre + "self_attn.k_proj.weight"][16:])
    assert torch.equal(s[pre + "self_attn.o_proj.weight"], full[pre + "self_attn.o_proj.weight"][:, 32:])  # row
    assert torch.equal(s[pre + "mlp.down_proj.weight"], full[pre + "mlp.down_proj.weight"][:, 88:])
    assert torch.equal(s[pre + "mlp.gate_up_proj.weight"],  # this rank's gate rows, then its up rows
                       torch.cat([full[pre + "mlp.gate_proj.weight"][88:], full[pre + "mlp.up_proj.weight"][88:]]))
    assert torch.equal(s[pre + "input_layernorm.weight"], full[pre + "input_layernorm.weight"])
    shape = shape_of("gqa3")
    for state in shards.values():
        for key, tensor in state.items():
            assert tuple(tensor.shape) == shard_shape(key, shape, layout), key
            assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size(), key  # no view


def test_qkv_linear_tiles_kv_and_puts_each_ranks_q_heads_with_its_kv_head(hf):
    _, model = hf["gqa3"]
    full, layout = model.state_dict(), NxdLayout(4, 1, True, 2)
    shards = hf_state_to_nxd(full, model.config.to_dict(), layout)
    pre, hd = "model.layers.0.self_attn.", 16
    for r in range(4):
        s = shards[(r, 0)]
        assert {k.removeprefix(pre) for k in s if k.startswith(pre)} == {
            "qkv_proj.weight_q", "qkv_proj.weight_k", "qkv_proj.weight_v", "o_proj.weight"}
        kv_head = r % 2  # K/V tiled [kv0, kv1, kv0, kv1] over the 4 ranks
        assert torch.equal(s[pre + "qkv_proj.weight_k"], full[pre + "k_proj.weight"][kv_head * hd:(kv_head + 1) * hd])
        assert torch.equal(s[pre + "qkv_proj.weight_v"], full[pre + "v_proj.weight"][kv_head * hd:(kv_head + 1) * hd])
        q_head = q_head_order(4, 2, layout)[r]
        assert q_head // 2 == kv_head  # Hugging Face GQA: Q head h uses KV head h // (heads / kv_heads)
        assert torch.equal(s[pre + "qkv_proj.weight_q"], full[pre + "q_proj.weight"][q_head * hd:(q_head + 1) * hd])
        assert torch.equal(s[pre + "o_proj.weight"], full[pre + "o_proj.weight"][:, q_head * hd:(q_head + 1) * hd])


def test_q_head_order_reproduces_nxds_published_examples():
    # checkpoint_converter.py (trn1): 64 heads, 16 KV heads, multiplier 4 -> Q0, Q4, Q8, ..., Q60, Q1, Q5, ...
    order = q_head_order(64, 16, NxdLayout(tp=64, qkv_linear=True, kv_size_multiplier=4))
    assert order[:16] == list(range(0, 64, 4)) and order[16:32] == list(range(1, 64, 4))
    # examples/training/llama2/convert_checkpoints.py, Llama 2 70B at TP 32, kv_replicator 4: "Q0Q1Q8Q9...Q2Q3Q10Q11..."
    order = q_head_order(64, 8, NxdLayout(tp=32, qkv_linear=True, kv_size_multiplier=4))
    assert order[:4] == [0, 1, 8, 9] and order[16:20] == [2, 3, 10, 11] and sorted(order) == list(range(64))
    for rank in range(32):  # every rank's two Q heads belong to the KV head it holds (rank % 8)
        assert {h // 8 for h in order[2 * rank:2 * rank + 2]} == {rank % 8}


def test_shard_table_describes_the_shards_it_makes(hf):
    _, model = hf["gqa3"]
    layout = NxdLayout(4, 2, True, 2)
    shards = hf_state_to_nxd(model.state_dict(), model.config.to_dict(), layout)
    for p in range(2):
        rows = shard_table(shape_of("gqa3"), layout, pp_rank=p)
        assert [r["key"] for r in rows] == list(shards[(3, p)])
        assert all(tuple(shards[(3, p)][r["key"]].shape) == r["shape_per_rank"] for r in rows)
    splits = {r["key"].split(".")[-2] + "." + r["key"].split(".")[-1]: r["split"] for r in rows}
    assert "tiling K/V heads x2" in splits["qkv_proj.weight_k"] and "dim 1" in splits["down_proj.weight"]


def test_pipeline_cuts_match_nxd_create_partitions():
    assert [len(s) for s in pipeline_stages(80, 8)] == [10] * 8
    assert [len(s) for s in pipeline_stages(80, 6)] == [13, 13, 13, 13, 14, 14]
    assert [len(s) for s in pipeline_stages(40, 6)] == [6, 6, 7, 7, 7, 7]
    assert stage_of_layer(12, 40, 6) == 2 and stage_of_layer(0, 40, 6) == 0 and stage_of_layer(39, 40, 6) == 5


# ---------------------------------------------------------------- the two file layouts

def test_current_layout_markers_user_content_and_newest_completed_tag(hf, tmp_path):
    folder, _ = hf["gqa3"]
    for tag in ("step_10", "step_9", "step_99"):
        hf_to_nxd(folder, tmp_path, tp=2, pp=1, tag=tag, user_content={"total_steps": int(tag[5:])})
    for i, tag in enumerate(("step_10", "step_9", "step_99")):  # pin the order the saves completed in
        os.utime(tmp_path / tag / "done", ns=(10**18 + i * 10**9,) * 2)
    (tmp_path / "step_99" / "done").unlink()  # step_99 never completed
    tag_dir = tmp_path / "step_9"
    assert (tag_dir / "checkpoint").read_text() == "1" and (tag_dir / "done").read_text() == "1"
    assert sorted(p.name for p in (tag_dir / "model").iterdir()) == [
        "dp_rank_00_tp_rank_00_pp_rank_00.pt", "dp_rank_00_tp_rank_01_pp_rank_00.pt"]
    assert torch.load(tag_dir / "user_content.pt", weights_only=True) == {"total_steps": 9}
    found = find_shard_files(tmp_path)  # newest done marker wins, not the largest name
    assert found.layout == "current" and found.tag == "step_9" and (found.tp, found.pp) == (2, 1)
    assert find_shard_files(tmp_path, tag="step_10").tag == "step_10"
    assert find_shard_files(tag_dir).tag == find_shard_files(tag_dir / "model").tag == "step_9"
    with pytest.raises(NeuronLayoutError, match="no done marker"):
        find_shard_files(tmp_path, tag="step_99")
    for path in (tag_dir / "model").iterdir():
        assert all(isinstance(v, torch.Tensor) for v in torch.load(path, weights_only=True).values())


def test_legacy_layout_files_and_a_wrapped_state_dict(hf, tmp_path):
    folder, model = hf["gqa3"]
    hf_to_nxd(folder, tmp_path / "nxd", tp=2, pp=2, layout="legacy", dtype="fp32")
    assert sorted(p.relative_to(tmp_path / "nxd").as_posix() for p in (tmp_path / "nxd").rglob("*.pt")) == [
        f"tp_rank_{t:02d}_pp_rank_{p:02d}/checkpoint.pt" for t in range(2) for p in range(2)]
    first = tmp_path / "nxd" / "tp_rank_00_pp_rank_00" / "checkpoint.pt"
    torch.save({"model": torch.load(first, weights_only=True)}, first)  # what parallel_layers.save(...) may hold
    nxd_to_hf(tmp_path / "nxd", tmp_path / "hf", config=folder)
    assert torch.equal(load_file(tmp_path / "hf" / "model.safetensors")[EMBED], model.state_dict()[EMBED])


# ---------------------------------------------------------------- clear errors

@pytest.mark.parametrize("sizes,layout,message", [
    ({}, NxdLayout(tp=3), "does not divide the attention heads"),
    ({"intermediate": 177}, NxdLayout(tp=2), "does not divide the intermediate size"),
    ({"vocab": 510}, NxdLayout(tp=4, qkv_linear=True, kv_size_multiplier=2), "does not divide the vocabulary"),
    ({}, NxdLayout(pp=4), "larger than the 3 layers"),
    ({}, NxdLayout(tp=4), "use qkv_linear with kv_size_multiplier=2"),
    ({}, NxdLayout(tp=4, qkv_linear=True, kv_size_multiplier=3), "must divide tp=4"),
    ({}, NxdLayout(tp=4, qkv_linear=True, kv_size_multiplier=1), "do not split evenly over tp=4"),
    ({}, NxdLayout(tp=2, kv_size_multiplier=2), "only applies with qkv_linear"),
])
def test_impossible_layouts_say_what_to_change(sizes, layout, message):
    shape = dataclasses.replace(shape_of("gqa3"), **sizes)
    with pytest.raises(NeuronLayoutError, match=message):
        layout.check(shape)


@pytest.fixture
def converted(hf, tmp_path):
    folder, _ = hf["gqa3"]
    hf_to_nxd(folder, tmp_path / "nxd", tp=4, pp=2, layout="legacy", qkv_linear=True, kv_size_multiplier=2)
    return folder, tmp_path / "nxd", tmp_path / "back"


def _edit_shard(path, change):
    state = torch.load(path, weights_only=True)
    change(state)
    torch.save(state, path)


def test_missing_and_extra_keys_on_the_way_back(converted):
    config, nxd, back = converted
    shard = nxd / "tp_rank_01_pp_rank_01" / "checkpoint.pt"
    _edit_shard(shard, lambda s: s.pop("model.layers.2.mlp.gate_up_proj.weight"))
    with pytest.raises(NeuronLayoutError, match="tp_rank_01_pp_rank_01 lacks 1 key.*layers.2.mlp.gate_up_proj"):
        nxd_to_hf(nxd, back, config=config)
    _edit_shard(shard, lambda s: s.update({"model.layers.2.mlp.gate_up_proj.weight": torch.zeros(88, 64),
                                           "model.layers.2.self_attn.rotary.extra": torch.zeros(1)}))
    with pytest.raises(NeuronLayoutError, match="unexpected key.*rotary.extra"):
        nxd_to_hf(nxd, back, config=config)


@pytest.mark.parametrize("removed,message", [
    (["tp_rank_01_pp_rank_00"], "incomplete.*tp_rank_01_pp_rank_00 are missing"),
    (["tp_rank_03_pp_rank_00", "tp_rank_03_pp_rank_01"], "4 tensor-parallel ranks are expected"),
    ([f"tp_rank_{t:02d}_pp_rank_01" for t in range(4)], "a pipeline rank is missing"),
])
def test_a_shard_set_with_a_missing_rank(converted, removed, message):
    config, nxd, back = converted
    for name in removed:
        (nxd / name / "checkpoint.pt").unlink()
        (nxd / name).rmdir()
    with pytest.raises(NeuronLayoutError, match=message):
        nxd_to_hf(nxd, back, config=config)


def test_wrong_config_and_unfinished_checkpoint_are_refused(hf, converted, tmp_path):
    config, nxd, back = converted
    wider = {**json.loads((config / "config.json").read_text()), "hidden_size": 128, "head_dim": 32}
    (tmp_path / "wider.json").write_text(json.dumps(wider))
    with pytest.raises(NeuronLayoutError, match="do not fit the given config"):
        nxd_to_hf(nxd, back, config=tmp_path / "wider.json")
    hf_to_nxd(config, tmp_path / "plain", tp=2, dtype="fp32")
    with pytest.raises(NeuronLayoutError, match=r"embed_tokens.weight has shape \(256, 64\), expected \(256, 128\)"):
        nxd_to_hf(tmp_path / "plain", back, config=tmp_path / "wider.json")
    hf_to_nxd(config, tmp_path / "cur", tp=2)
    (tmp_path / "cur" / "pretrained_weight" / "done").unlink()
    with pytest.raises(NeuronLayoutError, match="no completed NxD checkpoint.*pretrained_weight were begun"):
        nxd_to_hf(tmp_path / "cur", back, config=config)
    with pytest.raises(NeuronLayoutError, match="already holds NxD shards"):
        hf_to_nxd(config, nxd, tp=4, pp=2, layout="legacy", qkv_linear=True, kv_size_multiplier=2)


def test_formats_this_converter_cannot_read_are_named(converted):
    config, nxd, back = converted
    _edit_shard(nxd / "tp_rank_00_pp_rank_00" / "checkpoint.pt", lambda s: s.update(
        {"model.layers.0.self_attn.qkv_proj.weight_qkv": s.pop("model.layers.0.self_attn.qkv_proj.weight_q")}))
    with pytest.raises(NeuronLayoutError, match="fuse_qkv"):
        nxd_to_hf(nxd, back, config=config)
    (nxd / "tp_rank_00_pp_rank_00.tensors").mkdir()
    with pytest.raises(NeuronLayoutError, match="torch-xla serialization"):
        nxd_to_hf(nxd, back, config=config)


def test_hf_weights_that_do_not_match_their_config(hf, tmp_path):
    _, model = hf["gqa3"]
    state, config = dict(model.state_dict()), model.config.to_dict()
    state["model.layers.0.self_attn.q_proj.bias"] = torch.zeros(64)
    with pytest.raises(NeuronLayoutError, match="unexpected.*q_proj.bias"):
        hf_state_to_nxd(state, config, NxdLayout())
    state.pop("model.layers.0.self_attn.q_proj.bias")
    state.pop(HEAD)
    with pytest.raises(NeuronLayoutError, match="missing.*lm_head"):
        hf_state_to_nxd(state, config, NxdLayout())
    with pytest.raises(NeuronLayoutError, match="tie_word_embeddings"):
        LlamaShape.from_config({**config, "tie_word_embeddings": True})


# ---------------------------------------------------------------- the command line

def test_cli_round_trip_and_exit_codes(hf, tmp_path, capsys):
    folder, model = hf["gqa3"]
    nxd, back = str(tmp_path / "nxd"), str(tmp_path / "back")
    assert main(["convert", "hf-to-nxd", "--input", str(folder), "--output", nxd, "--tp", "4", "--pp", "2",
                 "--qkv-linear", "--kv-size-multiplier", "2", "--dtype", "fp32"]) == 0
    assert main(["convert", "nxd-to-hf", "--input", nxd, "--output", back, "--config",
                 str(folder / "config.json")]) == 0
    assert "tp=4, pp=2, qkv_linear=True, kv_size_multiplier=2" in capsys.readouterr().out
    assert torch.equal(load_file(tmp_path / "back" / "model.safetensors")[HEAD], model.state_dict()[HEAD])
    assert main(["convert", "hf-to-nxd", "--input", str(folder), "--output", nxd, "--tp", "4"]) == 2
    assert "kv_size_multiplier=2" in capsys.readouterr().err


def test_the_config_travels_with_the_shards(converted, tmp_path):
    folder, nxd, back = converted
    assert json.loads((nxd / "config.json").read_text()) == json.loads((folder / "config.json").read_text())
    nxd_to_hf(nxd, back)  # no config given: the one hf_to_nxd wrote beside the shards
    expected = load_file(folder / "model.safetensors")[HEAD].to(torch.bfloat16)  # the default dtype, bf16
    assert torch.equal(load_file(back / "model.safetensors")[HEAD], expected)
    (nxd / "config.json").unlink()
    with pytest.raises(NeuronLayoutError, match="no config.json at .* pass the model's Hugging Face config"):
        nxd_to_hf(nxd, back)
