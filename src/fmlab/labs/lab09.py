"""Checks for labs/lab_09_trainium.ipynb: shards that compute. The learner cuts a Llama's attention weights the
way Neuron Distributed (NxD) does, then runs the tensor-parallel forward from NxD shard files on 2 processes.

    lab09.check_shard_attention(shard_attention, work)  # ex1: q/k/v/o of every rank == the converter's files
    lab09.check_tp_forward(tp_forward, work)            # ex2: 2 gloo processes, logits == transformers' logits
    lab09.check_trn2_job(trn2_job, work)                # ex3: the native trn2 job fits Trainium2 and validates
    lab09.summary()                                     # raises LabIncomplete while any check fails

Exercise 1 runs in this process: the package's converter (`fmlab.neuron.hf_to_nxd`) writes the lab's tiny Llama
as NxD shards at TP 2 (separate q/k/v, one KV head per rank) and at TP 4 (GQAQKVColumnParallelLinear with the
2 KV heads tiled twice and the Q heads reordered), and the learner's slices of every layer and every rank must
equal the tensors in those files exactly (tolerance 0: sharding moves values, it never computes with them).

Exercise 2 converts the same model at TP 2, PP 1 in fp32 and forks 2 processes with the lab harness
(`fmlab.labs.world`: gloo on 127.0.0.1, one thread each, a 10 s collective timeout). Each runs the learner's
`tp_forward`, which may read only its own rank's file: `torch.load` of another rank's file raises inside the
process (`_only_own_shard`), so the whole model is never assembled on one rank. Every rank's full logits, and
the residual stream it recorded (after the embedding, after each attention block, after each MLP block), are
compared with `transformers.LlamaForCausalLM` on the same weights and tokens, whose residual stream is read
with hooks. Tolerance: atol 1e-5 + rtol 1e-5 in fp32. The split only changes the order of the sums (each rank's partial
products, then one all-reduce), which moves the last bits: 2.4e-7 measured; the smallest wrong wiring in the
tests (a missing all-reduce after down_proj) is off by 9e-3, the others by 6e-2 or more.

The given pieces live here so that the notebook and its checks cannot drift apart: the model
(`make_tiny_llama`, seed 0, nothing downloaded), the tokens (`INPUT_IDS`), and the single-device math of a
Llama layer (`rms_norm`, `rotary`, `local_attention`), which the learner wires together; `reference_*` are the
lab's own solutions. On 2 cores exercises 1-2's checks take about 1 s, exercise 3's a few seconds (the fake AWS),
the whole solved notebook 10 s (measured 2026-11-23), much of it importing `transformers` once.

Exercise 3 is the native path of module 9: the learner describes the job that runs the course's own training
script on Trainium2 with TorchNeuron, as a `fmlab.jobs.JobSpec`. `fmlab.neuron.native.trn2_problems` must find
nothing wrong with its device (a Trainium2 instance, backend "auto" or "neuron"), image (the given TorchNeuron
image, in the job's region) and layout (torchrun, one process per logical NeuronCore, TP inside an instance, a
layout fmlab.parallel accepts for the model), and the CreateTrainingJob request `capture_request` builds from it
must pass botocore's SageMaker model (`problems_in`); the request is written to ex3/request.json. About 5 s, most
of it the in-process fake AWS.

Each check works in its own folder of `work` (ex1/, ex2/, ex3/) and reports one entry of LAB.exercises, so a further
exercise is one more name in that list and one more check_* function.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from fmlab.labs import Lab, fresh_folder, world
from fmlab.neuron.sharding import EMBED, HEAD, NORM, LlamaShape
from fmlab.plan import catalog

LAB = Lab("lab 09", ["ex1_shard_attention", "ex2_tp_forward", "ex3_trn2_job"])

TINY_LLAMA = dataclasses.replace(catalog.model("tiny"), layers=2)  # hidden 64, 4 Q heads, 2 KV heads, vocab 512
SHAPE = LlamaShape.from_preset(TINY_LLAMA)
HEADS, KV_HEADS, HEAD_DIM, LAYERS, VOCAB = SHAPE.heads, SHAPE.kv_heads, SHAPE.head_dim, SHAPE.layers, SHAPE.vocab
EPS, THETA = 1e-6, 10000.0  # LlamaConfig's rms_norm_eps and rope_theta: make_tiny_llama checks they are the model's

# Exercise 1: the layouts the learner's sharding is compared with. TP 2 splits the 2 KV heads plainly; TP 4 has
# more ranks than KV heads, so NxD's GQAQKVColumnParallelLinear tiles them (the smallest multiplier, 4 / gcd(2, 4)).
SHARD_CASES = [dict(tp=2, qkv_linear=False, kv_size_multiplier=1),
               dict(tp=4, qkv_linear=True, kv_size_multiplier=2)]
# Exercise 2: the checkpoint the forward reads, and the tokens it runs on (ids from both halves of the vocabulary).
WORLD = 2
FORWARD = dict(tp=WORLD, pp=1, dtype="fp32")
INPUT_IDS = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(0))
ATOL, RTOL = 1e-5, 1e-5
WORLD_TIMEOUT, COLLECTIVE_TIMEOUT = 60.0, 10.0
# Exercise 3: what the learner's trn2_job is called with (placeholders: the request is only built and validated).
TRN2_REGION = "us-east-2"
TRN2_ARGS = dict(image_uri=f"111122223333.dkr.ecr.{TRN2_REGION}.amazonaws.com/fmlab-torchneuron:"
                           "2.13.0-neuronx2.13.3-sdk2.33.0-ubuntu26.04",
                 data_uri="s3://my-bucket/data/llama2-tokenized-4096", checkpoint_uri="s3://my-bucket/trn2/checkpoints",
                 region=TRN2_REGION, role="arn:aws:iam::111122223333:role/fmlab-course")


# ---------------------------------------------------------------- the given pieces: model, files, Llama math


@contextlib.contextmanager
def _no_progress_bars():
    """transformers' progress bars (saving, loading) off, for the lab's output to stay readable."""
    from transformers.utils import logging

    was = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            logging.enable_progress_bar()


def make_tiny_llama(folder: str | Path) -> Path:
    """Save the lab's tiny GQA Llama (seed 0, fp32) as a Hugging Face folder and return it."""
    from fmlab.models import build_model

    folder = Path(folder)
    model = build_model(TINY_LLAMA, seed=0)
    config = model.config
    theta = (getattr(config, "rope_parameters", None) or {}).get("rope_theta", getattr(config, "rope_theta", None))
    if (config.rms_norm_eps, theta) != (EPS, THETA):
        raise RuntimeError(f"the tiny Llama has rms_norm_eps {config.rms_norm_eps} and rope_theta {theta}; the lab's "
                           f"helpers use {EPS} and {THETA}: update EPS and THETA in lab09.py")
    with _no_progress_bars():
        model.save_pretrained(folder)
    return folder


def shard_file(nxd_dir: str | Path, tp_rank: int, pp_rank: int = 0, tag: str = "pretrained_weight") -> Path:
    """Where NxD's trainer keeps rank (tp_rank, pp_rank)'s state dict in the current layout."""
    return Path(nxd_dir) / tag / "model" / f"dp_rank_00_tp_rank_{tp_rank:02d}_pp_rank_{pp_rank:02d}.pt"


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Llama's RMSNorm: x / rms(x) * weight, computed in fp32 (as transformers' LlamaRMSNorm)."""
    x32 = x.to(torch.float32)
    return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotary(seq: int, head_dim: int = HEAD_DIM, theta: float = THETA) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [seq, head_dim] of the rotary angles for positions 0..seq-1 (Llama's default RoPE)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
    angles = torch.arange(seq, dtype=torch.float)[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos(), emb.sin()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def local_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention over the heads these projections hold, with RoPE: no communication.

    q [batch, seq, n_q * HEAD_DIM], k and v [batch, seq, n_kv * HEAD_DIM], n_q a multiple of n_kv: the outputs
    of this rank's q/k/v shards. As in Llama, Q head h (counted in q) uses KV head h // (n_q / n_kv). Returns
    [batch, seq, n_q * HEAD_DIM], heads in q's order: the input of this rank's o_proj shard.
    """
    batch, seq, _ = q.shape
    q, k, v = (t.unflatten(-1, (-1, HEAD_DIM)).transpose(1, 2) for t in (q, k, v))  # [batch, heads, seq, dim]
    if q.shape[1] % k.shape[1] or k.shape != v.shape:
        raise ValueError(f"{q.shape[1]} Q heads, {k.shape[1]} K heads and {v.shape[1]} V heads: Q heads must be a "
                         "multiple of the KV heads, and K and V must have as many heads")
    cos, sin = rotary(seq)
    q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM)
    scores = scores.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).flatten(2)


# ---------------------------------------------------------------- the lab's own solutions


def reference_shard_attention(q, k, v, o, heads, kv_heads, tp_rank, tp_size, kv_size_multiplier=1):
    """The lab's solution to exercise 1: this rank's (q, k, v, o) slices, as NxD's converter cuts them."""
    head_dim = q.shape[0] // heads
    m = kv_size_multiplier
    slots = kv_heads * m // tp_size  # replicated KV heads per rank
    rows = slice(tp_rank * slots * head_dim, (tp_rank + 1) * slots * head_dim)
    k_part, v_part = k.repeat(m, 1)[rows], v.repeat(m, 1)[rows]  # [K0, K1] -> [K0, K1, K0, K1], then a block
    per_slot = heads // (kv_heads * m)
    q_heads = []
    for slot in range(tp_rank * slots, (tp_rank + 1) * slots):
        copy, kv_head = divmod(slot, kv_heads)  # copy `copy` of KV head `kv_head` ...
        first = (kv_head * m + copy) * per_slot  # ... takes part `copy` of that KV head's Q heads
        q_heads += range(first, first + per_slot)
    q_part = q.unflatten(0, (heads, head_dim))[q_heads].flatten(0, 1)
    o_part = o.unflatten(1, (heads, head_dim))[:, q_heads].flatten(1, 2)
    return q_part, k_part, v_part, o_part


def reference_tp_forward(input_ids, rank, world_size, nxd_dir):
    """The lab's solution to exercise 2: (full logits, {place: residual stream}) from this rank's shard file."""
    state = torch.load(shard_file(nxd_dir, rank), weights_only=True)
    seen = {}
    table = state[EMBED]  # vocabulary rows [rank * n, (rank + 1) * n)
    local = input_ids - rank * table.shape[0]
    mine = (local >= 0) & (local < table.shape[0])
    x = F.embedding(local.clamp(0, table.shape[0] - 1), table).masked_fill(~mine.unsqueeze(-1), 0.0)
    dist.all_reduce(x)
    seen["embedding"] = x.clone()
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        h = rms_norm(x, state[p + "input_layernorm.weight"])
        heads = local_attention(h @ state[p + "self_attn.q_proj.weight"].T,  # this rank's whole heads
                                h @ state[p + "self_attn.k_proj.weight"].T,
                                h @ state[p + "self_attn.v_proj.weight"].T)
        out = heads @ state[p + "self_attn.o_proj.weight"].T  # a partial sum over this rank's heads
        dist.all_reduce(out)
        x = x + out
        seen[f"layer {i} attention"] = x.clone()
        h = rms_norm(x, state[p + "post_attention_layernorm.weight"])
        gate, up = (h @ state[p + "mlp.gate_up_proj.weight"].T).chunk(2, dim=-1)
        out = (F.silu(gate) * up) @ state[p + "mlp.down_proj.weight"].T
        dist.all_reduce(out)
        x = x + out
        seen[f"layer {i} mlp"] = x.clone()
    local_logits = rms_norm(x, state[NORM]) @ state[HEAD].T
    pieces = [torch.empty_like(local_logits) for _ in range(world_size)]
    dist.all_gather(pieces, local_logits)
    return torch.cat(pieces, dim=-1), seen


# ---------------------------------------------------------------- helpers of the checks


def places() -> list[str]:
    """The residual stream's places, in model order: what `tp_forward` records and the check compares."""
    return ["embedding"] + [f"layer {i} {block}" for i in range(LAYERS) for block in ("attention", "mlp")]


def hf_stream(hf_dir: str | Path, input_ids: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """transformers' logits and its residual stream at `places()` (read with hooks), on one process."""
    from transformers import LlamaForCausalLM

    with _no_progress_bars():
        model = LlamaForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    seen: dict[str, torch.Tensor] = {}
    hooks = [model.model.embed_tokens.register_forward_hook(lambda m, a, out: seen.__setitem__("embedding", out))]
    for i, layer in enumerate(model.model.layers):
        hooks.append(layer.post_attention_layernorm.register_forward_pre_hook(  # its input: x + attention
            lambda m, args, i=i: seen.__setitem__(f"layer {i} attention", args[0])))
        hooks.append(layer.register_forward_hook(
            lambda m, a, out, i=i: seen.__setitem__(f"layer {i} mlp", out[0] if isinstance(out, tuple) else out)))
    with torch.no_grad():
        logits = model(input_ids).logits
    for hook in hooks:
        hook.remove()
    return logits, {place: seen[place].detach().clone() for place in places()}


# ---------------------------------------------------------------- exercise 1: the attention family's shards


def attention_keys(layer: int, qkv_linear: bool) -> dict[str, str]:
    """The NxD keys of a layer's q, k, v and o shards (qkv_linear: GQAQKVColumnParallelLinear's names)."""
    p = f"model.layers.{layer}.self_attn."
    if qkv_linear:
        return {"q": p + "qkv_proj.weight_q", "k": p + "qkv_proj.weight_k", "v": p + "qkv_proj.weight_v",
                "o": p + "o_proj.weight"}
    return {"q": p + "q_proj.weight", "k": p + "k_proj.weight", "v": p + "v_proj.weight", "o": p + "o_proj.weight"}


def heads_in(part: torch.Tensor, full: torch.Tensor, dim: int) -> list[int] | None:
    """Which heads of the Hugging Face tensor `full` the slice `part` holds, in its order (dim 0: rows, as q/k/v;
    dim 1: columns, as o_proj); -1 for a block equal to no head; None if `part` is not whole heads of `full`."""
    if part.dim() != 2 or part.shape[1 - dim] != full.shape[1 - dim] or part.shape[dim] % HEAD_DIM:
        return None
    found = []
    for block in part.split(HEAD_DIM, dim=dim):
        found.append(next((j for j, head in enumerate(full.split(HEAD_DIM, dim=dim)) if torch.equal(block, head)), -1))
    return found


def _case_name(case: dict) -> str:
    if case["qkv_linear"]:
        return f"TP {case['tp']} (qkv_linear, kv_size_multiplier {case['kv_size_multiplier']})"
    return f"TP {case['tp']} (separate q/k/v)"


def _describe(letter: str, heads: list[int] | None) -> str:
    if heads is None:
        return "no whole heads"
    what = {"q": "Q head(s)", "k": "K head(s)", "v": "V head(s)", "o": "the o_proj columns of Q head(s)"}[letter]
    return f"{what} {heads}".replace("-1", "?")


SHARD_HINT = ("K and V: tile them kv_size_multiplier times, whole ([K0, K1] -> [K0, K1, K0, K1], tensor.repeat(m, 1)), "
              "then rank r takes its contiguous block of rows. Q: the heads that use this rank's KV heads; copy c of "
              "KV head j takes part c (of m) of KV head j's Q heads. o_proj: the same Q heads, as columns (dim 1)")


def _slice_problem(got, full: dict[str, torch.Tensor], disk: dict[str, torch.Tensor], layer: int,
                   qkv_linear: bool) -> str:
    """Why the learner's (q, k, v, o) of one layer and rank is not the file's ("" if it is): the first tensor
    that differs, K and V first (the tiling decides the rest), with the heads each holds."""
    if not (isinstance(got, tuple | list) and len(got) == 4 and all(isinstance(t, torch.Tensor) for t in got)):
        return "shard_attention must return a tuple of 4 tensors: this rank's (q, k, v, o) slices"
    mine = dict(zip("qkvo", got, strict=True))
    for letter in "kvqo":
        key = attention_keys(layer, qkv_linear)[letter]
        want = disk[key]
        if mine[letter].shape == want.shape and torch.equal(mine[letter], want):
            continue
        dim = 1 if letter == "o" else 0
        shapes = (f" (its shape is {tuple(mine[letter].shape)}, the file's {tuple(want.shape)})"
                  if mine[letter].shape != want.shape else "")
        return (f"{key} differs from the converter's file: yours holds "
                f"{_describe(letter, heads_in(mine[letter], full[letter], dim))}, the file holds "
                f"{_describe(letter, heads_in(want, full[letter], dim))}{shapes}")
    return ""


def check_shard_attention(shard_attention, work) -> bool:
    """Exercise 1: the learner's slices of every layer, for every rank of each layout in SHARD_CASES, against
    the files the package's converter writes (torch.equal, tensor by tensor)."""
    from fmlab.neuron import hf_to_nxd
    from fmlab.neuron.files import read_hf_folder

    ex = "ex1_shard_attention"
    if not callable(shard_attention):
        return LAB.report(ex, False, "give the function shard_attention itself (no parentheses)")
    base = fresh_folder(work, "ex1")
    hf_dir = make_tiny_llama(base / "tiny-llama")
    _, hf = read_hf_folder(hf_dir)
    rows = []
    for case in SHARD_CASES:
        tp, m, fused = case["tp"], case["kv_size_multiplier"], case["qkv_linear"]
        nxd_dir = base / f"nxd-tp{tp}"
        hf_to_nxd(hf_dir, nxd_dir, tp=tp, pp=1, qkv_linear=fused, kv_size_multiplier=m, dtype="fp32")
        held = []
        for rank in range(tp):
            disk = torch.load(shard_file(nxd_dir, rank), weights_only=True)
            for layer in range(LAYERS):
                full = {x: hf[f"model.layers.{layer}.self_attn.{x}_proj.weight"] for x in "qkvo"}
                try:
                    got = shard_attention(q=full["q"].clone(), k=full["k"].clone(), v=full["v"].clone(),
                                          o=full["o"].clone(), heads=HEADS, kv_heads=KV_HEADS, tp_rank=rank,
                                          tp_size=tp, kv_size_multiplier=m)
                except NotImplementedError:
                    return LAB.report(ex, False, "not answered yet: shard_attention still raises "
                                      f"NotImplementedError. Hint: {SHARD_HINT}")
                except Exception as e:  # a bug in the answer is a failed check, not a crash
                    return LAB.report(ex, False, f"{_case_name(case)}, rank {rank}, layer {layer}: shard_attention "
                                      f"raised {type(e).__name__}: {e}. Hint: {SHARD_HINT}")
                if problem := _slice_problem(got, full, disk, layer, fused):
                    return LAB.report(ex, False, f"{_case_name(case)}: rank {rank}'s {problem}. Hint: {SHARD_HINT}")
            keys = attention_keys(0, fused)
            q_heads = heads_in(disk[keys["q"]], hf["model.layers.0.self_attn.q_proj.weight"], 0)
            kv_heads = heads_in(disk[keys["k"]], hf["model.layers.0.self_attn.k_proj.weight"], 0)
            held.append(f"rank {rank}: Q {q_heads} K/V {kv_heads}")
        rows.append(f"  {_case_name(case)}: " + "; ".join(held))
    return LAB.report(ex, True, f"every slice of q, k, v and o_proj, {LAYERS} layers x every rank, equals the "
                      "converter's files exactly:\n" + "\n".join(rows))


def show_heads(shard_attention, heads: int = 64, kv_heads: int = 8, tp: int = 32, kv_size_multiplier: int = 4,
               ranks=(0, 1, 2, 7, 8, 9, 31)) -> None:
    """Print which Q and KV heads `shard_attention` gives each of `ranks` for a model of that many heads (by
    default Llama 2 70B at TP 32), with one-number heads: head h's rows are all h."""
    q = torch.arange(heads, dtype=torch.float32)[:, None]
    k = torch.arange(kv_heads, dtype=torch.float32)[:, None]
    try:
        for rank in ranks:
            q_part, k_part, _, o_part = shard_attention(q=q, k=k, v=k.clone(), o=q.T.contiguous(), heads=heads,
                                                        kv_heads=kv_heads, tp_rank=rank, tp_size=tp,
                                                        kv_size_multiplier=kv_size_multiplier)
            listed = [[int(h) for h in heads_of] for heads_of in (q_part[:, 0], k_part[:, 0], o_part[0])]
            print(f"rank {rank:2d}: Q heads {listed[0]}, KV heads {listed[1]}, o_proj columns of Q heads {listed[2]}")
    except NotImplementedError:
        print("shard_attention is not answered yet")


# ---------------------------------------------------------------- exercise 2: the tensor-parallel forward


def convert_for_forward(folder: str | Path) -> tuple[Path, Path]:
    """The tiny Llama as a Hugging Face folder and as NxD shards at TP 2, PP 1, fp32: (hf_dir, nxd_dir)."""
    from fmlab.neuron import hf_to_nxd

    folder = Path(folder)
    hf_dir = make_tiny_llama(folder / "tiny-llama")
    hf_to_nxd(hf_dir, folder / "nxd", overwrite=True, **FORWARD)
    return hf_dir, folder / "nxd"


PLACE_HINTS = {
    "embedding": "the embedding is vocabulary-parallel: rank r holds rows [r * n, (r + 1) * n) of the table. Look up "
                 "only the tokens in that range (id - r * n), give the others zero rows, then all_reduce (a sum): "
                 "every token's row comes from exactly one rank",
    "attention": "q/k/v shards are this rank's whole heads: attention runs locally (local_attention), with no "
                 "communication. o_proj is row-parallel: each rank's output is a partial sum over its heads; "
                 "all_reduce it exactly once, then add the residual, which every rank already holds whole",
    "mlp": "gate_up_proj holds [this rank's gate rows; its up rows]: chunk the output in two along the last dim; "
           "silu(gate) * up is local. down_proj is row-parallel: all_reduce its output once, then add the residual",
    "logits": "rank r's lm_head shard gives vocabulary columns [r * n, (r + 1) * n) of the logits, after the final "
              "RMSNorm (model.norm.weight). dist.all_gather them into a list and concatenate along the last "
              "(vocabulary) dim, rank 0's first",
}


def _as_result(result) -> tuple[torch.Tensor, dict]:
    if not (isinstance(result, tuple | list) and len(result) == 2 and isinstance(result[0], torch.Tensor)
            and isinstance(result[1], dict)):
        raise ValueError("tp_forward must return (logits, seen): the full logits tensor and the dict of the residual "
                         "stream the template fills")
    return result[0], result[1]


def forward_problems(results: list, want_logits: torch.Tensor,
                     want_seen: dict) -> tuple[list[tuple[int, str, str]], float]:
    """What differs between each rank's (logits, seen) and transformers': per rank, the first place that
    differs (a place of `places()`, or "logits"), as (rank, place, what); and the largest |difference| of the
    logits over the ranks that match."""
    out, worst = [], 0.0
    for rank, result in enumerate(results):
        logits, seen = _as_result(result)
        for place in places():
            name = f"the residual stream after {'the ' if place == 'embedding' else ''}{place}"
            found = ([f"{name} is missing from `seen`"] if place not in seen
                     else world.differences(seen[place], want_seen[place], ATOL, RTOL, name=name))
            if found:
                before = "" if place == "embedding" else "; everything before it matches transformers"
                out.append((rank, place, found[0] + before))
                break
        else:
            found = world.differences(logits, want_logits, ATOL, RTOL, name="the logits")
            if found:
                out.append((rank, "logits", f"{found[0]}, while the whole residual stream matches transformers"))
            else:
                worst = max(worst, world.max_difference(logits, want_logits))
    return out, worst


def check_tp_forward(tp_forward, work) -> bool:
    """Exercise 2: tp_forward(input_ids, rank, world_size, nxd_dir) on 2 forked gloo processes; every rank's
    logits and residual stream against transformers' on the same weights and tokens (ATOL, RTOL in fp32)."""
    ex = "ex2_tp_forward"
    if not callable(tp_forward):
        return LAB.report(ex, False, "give the function tp_forward itself (no parentheses)")
    base = fresh_folder(work, "ex2")
    hf_dir, nxd_dir = convert_for_forward(base)
    want_logits, want_seen = hf_stream(hf_dir, INPUT_IDS)
    ran = world.run_world(_calling(tp_forward, nxd_dir), base / "logs", WORLD, WORLD_TIMEOUT, prepare=_only_own_shard,
                          collective_timeout=COLLECTIVE_TIMEOUT)
    if ran.unanswered():
        return LAB.report(ex, False, "not answered yet: tp_forward still raises NotImplementedError. Hint: load "
                          "this rank's file, then the embedding (vocabulary-parallel, all_reduce), per layer "
                          "column-parallel q/k/v and gate_up, row-parallel o_proj and down_proj (all_reduce each), "
                          "and the logits (lm_head shard, all_gather, concatenate)")
    if not ran.ok:
        return LAB.report(ex, False, f"the 2-process run failed: {ran.failure()}")
    try:
        out, worst = forward_problems(ran.results, want_logits, want_seen)
    except ValueError as e:
        return LAB.report(ex, False, str(e))
    if out:
        hints = dict.fromkeys(PLACE_HINTS[place.split()[-1]] for _, place, _ in out)
        return LAB.report(ex, False, "; ".join(f"rank {rank}: {what}" for rank, _, what in out)
                          + " (fp32). Hint: " + " ".join(hints)
                          + f" (each rank's output, your prints included: {base / 'logs'})")
    return LAB.report(ex, True, f"on both ranks the logits {tuple(want_logits.shape)} equal transformers' "
                      f"LlamaForCausalLM (largest |difference| {worst:.1e}, tolerance {ATOL:.0e} + {RTOL:.0e} x "
                      f"|expected|), and so does the residual stream at all {len(places())} places; "
                      f"{ran.seconds:.1f} s for 2 processes")


def _calling(tp_forward, nxd_dir: Path) -> Callable[[int, int], object]:
    return lambda rank, world_size: tp_forward(INPUT_IDS.clone(), rank, world_size, nxd_dir)


_RANK_FILE = re.compile(r"tp_rank_(\d+)_pp_rank_\d+")


def _only_own_shard(rank: int, logs: Path) -> None:
    """Inside rank `rank`'s process: torch.load of another tensor-parallel rank's shard file raises, so that a
    forward cannot pass by assembling the whole model on one rank."""
    real = torch.load

    def guarded(f, *args, **kwargs):
        name = str(getattr(f, "name", f))
        found = _RANK_FILE.search(name)
        if found and int(found.group(1)) != rank:
            raise PermissionError(f"rank {rank} opened {Path(name).name}: each rank reads only its own shard file "
                                  f"(tp_rank_{rank:02d}); what it lacks comes from the other rank through collectives")
        return real(f, *args, **kwargs)

    torch.load = guarded


# ---------------------------------------------------------------- exercise 3: the native trn2 job


def reference_trn2_job(image_uri, data_uri, checkpoint_uri, region, role):
    """The lab's solution: Llama 2 7B on 2 x ml.trn2.48xlarge, FSDP2 over 64 replicas x TP 2, the course's script."""
    from fmlab.jobs.spec import JobSpec

    return JobSpec("trn2-llama2-7b", entry_point="entrypoints/train.py", instance_type="ml.trn2.48xlarge",
                   instance_count=2, processes_per_host=64, distribution="torchrun", image=image_uri, region=region,
                   role=role, inputs={"train": data_uri}, input_mode="FastFile", checkpoint_s3_uri=checkpoint_uri,
                   hyperparameters={"model": "llama2-7b", "seq_len": 4096, "micro_batch": 1, "grad_accum": 4,
                                    "sharding": "full", "tp": 2, "backend": "auto", "mixed_precision": "bf16"},
                   environment={"FI_PROVIDER": "efa"}, max_run_seconds=24 * 3600, volume_gb=512)


TRN2_HINT = ("instance_type 'ml.trn2.48xlarge'; processes_per_host 64 (one per logical NeuronCore) with "
             "distribution 'torchrun'; image the given image_uri and region the given region; hyperparameters of "
             "fmlab.train with backend 'auto' (the script picks 'neuron' there) and a tp that divides 64 and the "
             "model's heads")


def check_trn2_job(trn2_job, work) -> bool:
    """Exercise 3: trn2_job(**TRN2_ARGS) -> a JobSpec that fmlab.neuron.native.trn2_problems accepts and whose
    CreateTrainingJob request passes botocore's SageMaker model."""
    import json

    from fmlab.jobs.request import capture_request
    from fmlab.jobs.spec import JobSpec, JobSpecInvalid
    from fmlab.neuron.native import ENTRY_POINT, trn2_problems
    from fmlab.service.api_model import problems_in

    ex = "ex3_trn2_job"
    if not callable(trn2_job):
        return LAB.report(ex, False, "give the function trn2_job itself (no parentheses)")
    base = fresh_folder(work, "ex3")
    try:
        spec = trn2_job(**TRN2_ARGS)
    except NotImplementedError:
        return LAB.report(ex, False, f"not answered yet: trn2_job still raises NotImplementedError. Hint: {TRN2_HINT}")
    if not isinstance(spec, JobSpec):
        return LAB.report(ex, False, f"trn2_job returned {type(spec).__name__}; return a fmlab.jobs.JobSpec")
    problems = trn2_problems(spec)
    if spec.entry_point != ENTRY_POINT:
        problems.append(f"entry_point {spec.entry_point!r}: the native path runs the course's own script, "
                        f"{ENTRY_POINT!r}, not the NxD one")
    if spec.image != TRN2_ARGS["image_uri"]:
        problems.append("image: use the image_uri you are given (your TorchNeuron image)")
    if problems:
        return LAB.report(ex, False, "; ".join(problems) + f". Hint: {TRN2_HINT}")
    try:
        captured = capture_request(spec, backend="sagemaker")
    except (JobSpecInvalid, ValueError) as e:
        return LAB.report(ex, False, f"the SDK could not build the request: {e}")
    found = problems_in(captured.request)
    (base / "request.json").write_text(json.dumps(captured.request, indent=1, default=str))
    if found:
        return LAB.report(ex, False, f"botocore's SageMaker model rejects the request: {found}")
    res = captured.request["ResourceConfig"]
    return LAB.report(ex, True, f"{res['InstanceCount']} x {res['InstanceType']}, {spec.processes()} processes per "
                      f"host, tp {spec.hyperparameters.get('tp', 1)}, image {spec.image.split('/')[-1]}: device, image "
                      f"and layout fit Trainium2, and the request passes botocore's model ({base / 'request.json'})")


def summary() -> None:
    LAB.summary()
