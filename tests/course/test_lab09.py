"""Lab 09's checks, without a notebook: the lab's own solutions pass; plausible wrong solutions fail with a hint
that names what differed (the tensor and rank for the sharding, the first place of the residual stream for the
forward); the unanswered stubs fail with "not answered".

Run: .venv/bin/python -m pytest -q tests/course/test_lab09.py   (about 10 s: transformers' import, 2-process runs)
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from fmlab.labs import lab09
from fmlab.neuron.sharding import EMBED, HEAD, NORM


@pytest.fixture
def verdicts(capsys):
    """The PASS/FAIL line each check prints: read() -> the text printed since the last read."""
    return lambda: capsys.readouterr().out


# ---------------------------------------------------------------- exercise 1


def tiled_per_head(q, k, v, o, heads, kv_heads, tp_rank, tp_size, kv_size_multiplier=1):
    """Replicates each KV head in place ([K0, K0, K1, K1]) and keeps Q in Hugging Face's order: consistent
    attention, but not the layout NxD's GQAQKVColumnParallelLinear loads (it tiles the whole K: [K0, K1, K0, K1])."""
    head_dim = q.shape[0] // heads
    m = kv_size_multiplier
    k_tiled = k.unflatten(0, (kv_heads, head_dim)).repeat_interleave(m, dim=0).flatten(0, 1)
    v_tiled = v.unflatten(0, (kv_heads, head_dim)).repeat_interleave(m, dim=0).flatten(0, 1)
    return (q.chunk(tp_size)[tp_rank], k_tiled.chunk(tp_size)[tp_rank], v_tiled.chunk(tp_size)[tp_rank],
            o.chunk(tp_size, dim=1)[tp_rank])


def q_not_reordered(q, k, v, o, heads, kv_heads, tp_rank, tp_size, kv_size_multiplier=1):
    """Tiles K/V as NxD does, but gives each rank the next Q heads in Hugging Face's order."""
    _, k_part, v_part, _ = lab09.reference_shard_attention(q, k, v, o, heads, kv_heads, tp_rank, tp_size,
                                                           kv_size_multiplier)
    return q.chunk(tp_size)[tp_rank], k_part, v_part, o.chunk(tp_size, dim=1)[tp_rank]


def o_not_reordered(q, k, v, o, heads, kv_heads, tp_rank, tp_size, kv_size_multiplier=1):
    """Reorders Q but forgets that o_proj's columns must follow."""
    q_part, k_part, v_part, _ = lab09.reference_shard_attention(q, k, v, o, heads, kv_heads, tp_rank, tp_size,
                                                                kv_size_multiplier)
    return q_part, k_part, v_part, o.chunk(tp_size, dim=1)[tp_rank]


def kv_not_tiled(q, k, v, o, heads, kv_heads, tp_rank, tp_size, kv_size_multiplier=1):
    """Splits every tensor plainly, as if there were as many KV heads as ranks."""
    return (q.chunk(tp_size)[tp_rank], k.chunk(tp_size)[tp_rank], v.chunk(tp_size)[tp_rank],
            o.chunk(tp_size, dim=1)[tp_rank])


def test_reference_sharding_passes(tmp_path, verdicts):
    assert lab09.check_shard_attention(lab09.reference_shard_attention, tmp_path)
    out = verdicts()
    assert "[PASS]" in out and "rank 1: Q [2] K/V [1]; rank 2: Q [1] K/V [0]" in out


@pytest.mark.parametrize("wrong,names", [
    (tiled_per_head, "rank 1's model.layers.0.self_attn.qkv_proj.weight_k differs from the converter's file: yours "
                     "holds K head(s) [0], the file holds K head(s) [1]"),
    (q_not_reordered, "rank 1's model.layers.0.self_attn.qkv_proj.weight_q differs from the converter's file: yours "
                      "holds Q head(s) [1], the file holds Q head(s) [2]"),
    (o_not_reordered, "rank 1's model.layers.0.self_attn.o_proj.weight differs from the converter's file: yours holds "
                      "the o_proj columns of Q head(s) [1], the file holds the o_proj columns of Q head(s) [2]"),
    (kv_not_tiled, "rank 0's model.layers.0.self_attn.qkv_proj.weight_k differs from the converter's file: yours "
                   "holds no whole heads, the file holds K head(s) [0] (its shape is (8, 64), the file's (16, 64))"),
])
def test_wrong_sharding_fails_naming_the_tensor_and_rank(tmp_path, verdicts, wrong, names):
    assert not lab09.check_shard_attention(wrong, tmp_path)
    out = verdicts()
    assert "[FAIL]" in out and "TP 4 (qkv_linear, kv_size_multiplier 2)" in out and names in out, out


def test_unanswered_sharding_fails(tmp_path, verdicts):
    def shard_attention(q, k, v, o, heads, kv_heads, tp_rank, tp_size, kv_size_multiplier=1):
        ...  # your code here
        raise NotImplementedError

    assert not lab09.check_shard_attention(shard_attention, tmp_path)
    assert "not answered yet" in verdicts()


# ---------------------------------------------------------------- exercise 2


def forward(bug: str | None = None):
    """The lab's forward, written out, with one learner's bug switched on."""

    def tp_forward(input_ids, rank, world_size, nxd_dir):
        state = torch.load(lab09.shard_file(nxd_dir, rank), weights_only=True)
        seen = {}
        table = state[EMBED]
        local = input_ids - rank * table.shape[0]
        mine = (local >= 0) & (local < table.shape[0])
        x = F.embedding(local.clamp(0, table.shape[0] - 1), table)
        if bug != "embedding not masked":
            x = x.masked_fill(~mine.unsqueeze(-1), 0.0)
        dist.all_reduce(x)
        seen["embedding"] = x.clone()
        for i in range(lab09.LAYERS):
            p = f"model.layers.{i}."
            h = lab09.rms_norm(x, state[p + "input_layernorm.weight"])
            heads = lab09.local_attention(h @ state[p + "self_attn.q_proj.weight"].T,
                                          h @ state[p + "self_attn.k_proj.weight"].T,
                                          h @ state[p + "self_attn.v_proj.weight"].T)
            out = heads @ state[p + "self_attn.o_proj.weight"].T
            if bug == "residual all-reduced":
                x = x + out
                dist.all_reduce(x)
            else:
                if bug != "no all-reduce after o_proj":
                    dist.all_reduce(out)
                x = x + out
            seen[f"layer {i} attention"] = x.clone()
            h = lab09.rms_norm(x, state[p + "post_attention_layernorm.weight"])
            gate, up = (h @ state[p + "mlp.gate_up_proj.weight"].T).chunk(2, dim=-1)
            out = (F.silu(gate) * up) @ state[p + "mlp.down_proj.weight"].T
            if bug != "no all-reduce after down_proj":
                dist.all_reduce(out)
            x = x + out
            seen[f"layer {i} mlp"] = x.clone()
        local_logits = lab09.rms_norm(x, state[NORM]) @ state[HEAD].T
        pieces = [torch.empty_like(local_logits) for _ in range(world_size)]
        dist.all_gather(pieces, local_logits)
        if bug == "gathered along the batch":
            return torch.cat(pieces).reshape(*local_logits.shape[:-1], -1), seen
        return torch.cat(pieces, dim=-1), seen

    return tp_forward


def test_written_out_forward_is_the_reference(tmp_path, verdicts):
    """The test's own forward (the template of the bugs below) passes, as the lab's solution does."""
    assert lab09.check_tp_forward(lab09.reference_tp_forward, tmp_path)
    assert lab09.check_tp_forward(forward(), tmp_path)
    out = verdicts()
    assert out.count("[PASS]") == 2 and "the residual stream at all 5 places" in out


@pytest.mark.parametrize("bug,place", [
    ("embedding not masked", "the residual stream after the embedding"),
    ("no all-reduce after o_proj", "the residual stream after layer 0 attention"),
    ("residual all-reduced", "the residual stream after layer 0 attention"),
    ("no all-reduce after down_proj", "the residual stream after layer 0 mlp"),
    ("gathered along the batch", "the logits"),
])
def test_wrong_forward_fails_naming_the_first_place_that_differs(tmp_path, verdicts, bug, place):
    assert not lab09.check_tp_forward(forward(bug), tmp_path)
    out = verdicts()
    hint = {"embedding": "vocabulary-parallel", "attention": "o_proj is row-parallel", "mlp": "down_proj is row-parallel",
            "logits": "all_gather"}[place.split()[-1]]
    assert "[FAIL]" in out and f"rank 0: {place}: max |diff|" in out and f"rank 1: {place}: max |diff|" in out, out
    assert hint in out


def test_forward_reading_the_wrong_keys_fails_with_the_error(tmp_path, verdicts):
    def fused_names(input_ids, rank, world_size, nxd_dir):  # qkv_linear's names, which this checkpoint has not
        state = torch.load(lab09.shard_file(nxd_dir, rank), weights_only=True)
        return state["model.layers.0.self_attn.qkv_proj.weight_q"], {}

    assert not lab09.check_tp_forward(fused_names, tmp_path)
    out = verdicts()
    assert "the 2-process run failed: rank" in out and "KeyError" in out and "qkv_proj.weight_q" in out


def test_forward_returning_only_logits_is_told_the_shape_of_the_answer(tmp_path, verdicts):
    def only_logits(input_ids, rank, world_size, nxd_dir):
        return lab09.reference_tp_forward(input_ids, rank, world_size, nxd_dir)[0]

    assert not lab09.check_tp_forward(only_logits, tmp_path)
    assert "must return (logits, seen)" in verdicts()


def test_unanswered_forward_fails(tmp_path, verdicts):
    def tp_forward(input_ids, rank, world_size, nxd_dir):
        ...  # your code here
        raise NotImplementedError

    assert not lab09.check_tp_forward(tp_forward, tmp_path)
    assert "not answered yet" in verdicts()


def test_given_pieces_are_transformers_llama(tmp_path):
    """rms_norm, rotary and local_attention on one process reproduce LlamaForCausalLM, so that exercise 2 tests
    only the parallel wiring; and the residual stream read with hooks ends where the logits begin."""
    from transformers import LlamaForCausalLM

    hf_dir = lab09.make_tiny_llama(tmp_path / "tiny")
    model = LlamaForCausalLM.from_pretrained(hf_dir).eval()
    w = {k: v.detach() for k, v in model.state_dict().items()}
    ids = lab09.INPUT_IDS
    x = w[EMBED][ids]
    for i in range(lab09.LAYERS):
        p = f"model.layers.{i}."
        h = lab09.rms_norm(x, w[p + "input_layernorm.weight"])
        att = lab09.local_attention(*(h @ w[f"{p}self_attn.{n}_proj.weight"].T for n in "qkv"))
        x = x + att @ w[p + "self_attn.o_proj.weight"].T
        h = lab09.rms_norm(x, w[p + "post_attention_layernorm.weight"])
        x = x + (F.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[
            p + "mlp.down_proj.weight"].T
    logits = lab09.rms_norm(x, w[NORM]) @ w[HEAD].T
    want, seen = lab09.hf_stream(hf_dir, ids)
    assert torch.allclose(logits, want, atol=1e-6, rtol=1e-5)
    assert torch.allclose(seen[f"layer {lab09.LAYERS - 1} mlp"], x, atol=1e-6)
    assert (ids < lab09.VOCAB // 2).any() and (ids >= lab09.VOCAB // 2).any()  # both ranks' vocabulary slices


def test_show_heads_prints_the_70b_order_of_the_slides(capsys):
    lab09.show_heads(lab09.reference_shard_attention, ranks=(0, 1, 8))
    out = capsys.readouterr().out
    assert "rank  0: Q heads [0, 1], KV heads [0]" in out and "rank  1: Q heads [8, 9], KV heads [1]" in out
    assert "rank  8: Q heads [2, 3], KV heads [0]" in out


def test_forward_that_reads_every_shard_fails(tmp_path, verdicts):
    """Assembling the whole model on each rank would match transformers without any collective: refused."""
    def everything_everywhere(input_ids, rank, world_size, nxd_dir):
        states = [torch.load(lab09.shard_file(nxd_dir, r), weights_only=True) for r in range(world_size)]
        return torch.zeros(2, 12, lab09.VOCAB), {"shards": len(states)}

    assert not lab09.check_tp_forward(everything_everywhere, tmp_path)
    out = verdicts()
    assert "raised PermissionError" in out and "each rank reads only its own shard file" in out, out


# ---------------------------------------------------------------- exercise 3


def _trn2(**changes):
    """The lab's solution with some JobSpec fields changed: one plausible mistake each."""
    def job(image_uri, data_uri, checkpoint_uri, region, role):
        spec = lab09.reference_trn2_job(image_uri, data_uri, checkpoint_uri, region, role)
        hyper = {**spec.hyperparameters, **changes.pop("hyper", {})}
        return spec.with_(hyperparameters=hyper, **changes)
    return job


def test_reference_trn2_job_passes(tmp_path, verdicts):
    assert lab09.check_trn2_job(lab09.reference_trn2_job, tmp_path)
    assert "PASS" in verdicts() and (tmp_path / "ex3" / "request.json").is_file()


@pytest.mark.parametrize("changes,hint", [
    ({"instance_type": "ml.trn1.32xlarge", "processes_per_host": 32}, "TorchNeuron needs Trainium2"),
    ({"hyper": {"backend": "nccl"}}, "backend 'nccl' cannot drive Neuron devices"),
    ({"processes_per_host": 32}, "processes_per_host=64"),
    ({"processes_per_host": 128}, "processes_per_host=64"),  # one per PHYSICAL core would be 128: LNC=2 gives 64
    ({"image": "763104351884.dkr.ecr.us-east-2.amazonaws.com/pytorch-training-neuronx:"
               "2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04"}, "PyTorch/XLA (NxD) container"),
    ({"hyper": {"tp": 3}}, "tp=3 must divide the 64"),
    ({"entry_point": "entrypoints/neuron_train.py"}, "the course's own script"),
    ({"region": "us-west-2"}, "the job runs in us-west-2"),
])
def test_wrong_trn2_jobs_fail_with_what_to_change(tmp_path, verdicts, changes, hint):
    assert not lab09.check_trn2_job(_trn2(**changes), tmp_path)
    assert hint in verdicts()


def test_unanswered_trn2_job_says_not_answered(tmp_path, verdicts):
    def trn2_job(image_uri, data_uri, checkpoint_uri, region, role):
        raise NotImplementedError

    assert not lab09.check_trn2_job(trn2_job, tmp_path)
    assert "not answered yet" in verdicts()
    assert not lab09.check_trn2_job("not a function", tmp_path)
