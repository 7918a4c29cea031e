"""Throughput of fmlab.train against a bare PyTorch loop and nanoGPT's design and step, at one shape.

    .venv/bin/python benchmarks/train_throughput.py                  # 15 rounds x 20 steps, logging every 10
    .venv/bin/python benchmarks/train_throughput.py --model tiny-gpt # the GPT layout against nanoGPT's own GPT
    .venv/bin/python benchmarks/train_throughput.py --log-every 1 --json    # the most expensive logging

The shape (issue 26): 2 layers, 64 wide, 4 heads, vocabulary 512, sequences of 128 tokens, micro-batch 8,
fp32, one torch thread. The contenders, each timed per optimizer step:
- "fmlab": fmlab.train on the preset (`tiny`: a Hugging Face Llama; `tiny-gpt`: an OPT, the GPT layout), with
  its logging (a stdout line, a JSONL record and TensorBoard scalars every --log-every steps; 10 is the engine's
  default, 1 its most expensive setting), schedule, DTensor-aware clipping, data-parallel sampler, fused AdamW,
  and its pretraining attention (fmlab.models.use_pretraining_attention: an attention function registered with
  transformers' AttentionInterface, so no causal mask is prepared, in transformers' own attention modules; the same
  numbers as transformers' "sdpa");
- "bare": the loop a reader would write on the same model, data order and AdamW settings (torch's default
  AdamW implementation, clip_grad_norm_, transformers' "sdpa");
- "nanogpt": the same model written in nanoGPT's design, with nanoGPT's step as its train.py runs it on a CPU
  (the LR set every iteration, the loss over the accumulation steps, backward, clip, torch's default AdamW in two
  groups with decay on matrices, zero), eager (`--compile=False`, as its README runs on a CPU).
  For `tiny` that is NanoLlama: the preset's Llama (RMSNorm, rotary positions, 2 key/value heads, SwiGLU 176
  wide) as a nanoGPT-style module, holding the engine's very weights (tests/train/test_throughput_benchmark.py
  checks loss and gradients against the Hugging Face model). For `tiny-gpt` it is nanoGPT's GPT (GPT-2 blocks:
  LayerNorm, one fused q/k/v projection, a 4x GELU MLP, learned positions, the head tied to the embedding).
  Its inputs are the same sequences, each predicting its next 128 tokens;
- "nanogpt_gpt" (with `tiny` only): nanoGPT's GPT itself at the same shape, a different architecture: the ratio
  says what the Llama layout costs at 64 wide, not what the engine costs.
The engine must reach >= 1.0x the nanoGPT step's tokens/s on the same model and >= 0.97x the bare loop's.

How it is measured, so that a shared machine does not decide the answer: all run in this one process with
one torch thread and alternate round by round. Every step is timed twice, by the CPU time of the process
(time.process_time: the work done, whatever else the machine runs; TensorBoard's writer thread included)
and by the wall clock. The engine's step is marked where it steps its LR schedule, the last thing of each
step, so the marks tile the run and a step's logging is counted in the next window. The first step of each
round is left out. The verdicts are the medians, over rounds, of the ratio of neighbouring rounds' median
CPU step times (neighbours share whatever load the machine had); the pooled CPU and wall-clock ratios are
printed beside them and agree on a quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import statistics
import sys
import tempfile
import time
from unittest import mock

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

SHAPE = {"layers": 2, "hidden": 64, "heads": 4, "vocab": 512, "seq_len": 128}


class NanoBlock(nn.Module):
    """A GPT-2 block as nanoGPT writes it: pre-LayerNorm attention and MLP, each added to the residual."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.c_fc, self.mlp_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in self.c_attn(self.ln_1(x)).split(c, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class NanoGPT(nn.Module):
    """nanoGPT's model at SHAPE: token and position embeddings, the blocks, a final LayerNorm, a tied head."""

    def __init__(self, layers: int, hidden: int, heads: int, vocab: int, seq_len: int):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, hidden), nn.Embedding(seq_len, hidden)
        self.blocks = nn.ModuleList(NanoBlock(hidden, heads) for _ in range(layers))
        self.ln_f, self.lm_head = nn.LayerNorm(hidden), nn.Linear(hidden, vocab, bias=False)
        self.wte.weight = self.lm_head.weight
        self.register_buffer("positions", torch.arange(seq_len), persistent=False)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(self.positions[: idx.shape[1]])
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class NanoLlamaBlock(nn.Module):
    """The same design written for the Llama layout of the `tiny` preset: RMSNorm, rotary positions, grouped
    keys/values (4 query heads, 2 key/value heads), a SwiGLU MLP, no biases. Its layers carry Hugging Face's
    names and shapes (llama_weights_from_hf maps the prefixes), so it holds the very weights the engine trains."""

    def __init__(self, width: int, heads: int, kv_heads: int, ffn: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.input_layernorm, self.post_attention_layernorm = nn.RMSNorm(width, eps=1e-6), nn.RMSNorm(width, eps=1e-6)
        self.q_proj = nn.Linear(width, width, bias=False)
        self.k_proj, self.v_proj = (nn.Linear(width, kv_heads * self.head_dim, bias=False) for _ in range(2))
        self.o_proj = nn.Linear(width, width, bias=False)
        self.gate_proj, self.up_proj = (nn.Linear(width, ffn, bias=False) for _ in range(2))
        self.down_proj = nn.Linear(ffn, width, bias=False)

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o_proj(y.transpose(1, 2).reshape(b, t, c))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


def rotate(x, cos, sin):
    """Rotary position embedding in Hugging Face's half-split layout (what Llama checkpoints assume)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class NanoLlama(nn.Module):
    """nanoGPT's design for the engine's Llama (`tiny`): embedding, blocks, final RMSNorm, an untied head; the rotary
    tables computed once. The like-for-like contender: the engine's model, written the way nanoGPT writes a model."""

    def __init__(self, layers: int, hidden: int, heads: int, vocab: int, seq_len: int, kv_heads: int, ffn: int,
                 rope_theta: float = 10000.0):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(NanoLlamaBlock(hidden, heads, kv_heads, ffn) for _ in range(layers))
        self.norm, self.lm_head = nn.RMSNorm(hidden, eps=1e-6), nn.Linear(hidden, vocab, bias=False)
        head_dim = hidden // heads
        inverse = 1.0 / rope_theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(seq_len).float(), inverse).repeat(1, 2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.embed_tokens(idx)
        for block in self.blocks:
            x = block(x, self.cos[:t], self.sin[:t])
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def timed_steps(loss_of_next_batch, model, optimizer, steps: int) -> tuple[list[float], list[float]]:
    """The step nanoGPT and a reader write: loss, backward, clip, step, zero. Returns (CPU seconds, wall seconds) of
    steps 2..N; `loss_of_next_batch()` reads the next batch and returns its loss."""
    cpu, wall = [time.process_time()], [time.perf_counter()]
    for _ in range(steps):
        loss = loss_of_next_batch()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
        cpu.append(time.process_time())
        wall.append(time.perf_counter())
    return list(np.diff(cpu)[1:]), list(np.diff(wall)[1:])


def nano_model(preset: str) -> nn.Module:
    """nanoGPT's model for the engine's preset: its GPT for the GPT layout, the same design written for the Llama."""
    if preset == "tiny-gpt":
        return NanoGPT(**SHAPE)
    from fmlab.plan import catalog

    m = catalog.model(preset)
    return NanoLlama(m.layers, m.hidden, m.heads, m.vocab, m.seq_len, m.n_kv_heads, m.ffn)


def llama_weights_from_hf(hf_state: dict) -> dict:
    """A Hugging Face Llama's state dict under NanoLlama's names (model.layers.N.self_attn.q_proj ->
    blocks.N.q_proj)."""
    return {name.removeprefix("model.").replace("layers.", "blocks.").replace("self_attn.", "").replace("mlp.", ""):
            tensor for name, tensor in hf_state.items()}


def nanogpt_loop(ds, steps: int, micro_batch: int, lr: float, seed: int,
                 preset: str = "tiny") -> tuple[list[float], list[float]]:
    """nanoGPT's step on nanoGPT's design of the model (its train.py on a CPU, fp32, no GradScaler): set the LR,
    loss / accumulation steps, backward, clip, AdamW (decay on matrices, torch's default implementation), zero."""
    from fmlab.data import ResumableSampler

    torch.manual_seed(seed)
    model = nano_model(preset)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                                   {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                                  lr=lr, betas=(0.9, 0.95))
    order = iter(ResumableSampler(len(ds) - 1, 0, 1, seed=seed))
    model.train()

    iteration, accumulation_steps = 0, 1

    def step():
        nonlocal iteration
        iteration += 1
        for group in optimizer.param_groups:  # nanoGPT sets its cosine schedule's LR at every iteration
            group["lr"] = lr * 0.5 * (1.0 + math.cos(math.pi * min(iteration / 5000, 1.0)))
        rows = [next(order) for _ in range(micro_batch)]
        x = torch.stack([ds[j] for j in rows])
        y = torch.stack([torch.cat([ds[j][1:], ds[j + 1][:1]]) for j in rows])  # the next 128 tokens
        return model(x, y) / accumulation_steps  # nanoGPT's loss scaling for accumulation, as the engine's

    return timed_steps(step, model, optimizer, steps)


def hand_written_loop(ds, steps: int, micro_batch: int, lr: float, seed: int,
                      preset: str = "tiny") -> tuple[list[float], list[float]]:
    """The loop a reader would write: AdamW, clip, step. Returns (CPU seconds, wall seconds) of steps 2..N."""
    from fmlab.data import ResumableSampler
    from fmlab.models import build_model

    model = build_model(preset, seed=seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    order = iter(ResumableSampler(len(ds), 0, 1, seed=seed))
    model.train()

    def step():
        x = torch.stack([ds[next(order)] for _ in range(micro_batch)])
        return model(input_ids=x, labels=x).loss

    return timed_steps(step, model, optimizer, steps)


def engine(dataset: str, steps: int, micro_batch: int, lr: float, seed: int,
           log_every: int = 10, preset: str = "tiny") -> tuple[list[float], list[float]]:
    """fmlab.train with its logging on (stdout, JSONL, TensorBoard every `log_every` steps). Returns (CPU, wall)
    seconds of steps 2..N, marked when the engine steps its LR schedule, the last thing of every step."""
    from torch.optim.lr_scheduler import LambdaLR

    from fmlab.train import TrainConfig, train

    cpu, wall = [], []
    schedule_step = LambdaLR.step

    def marked(self, *args, **kwargs):
        cpu.append(time.process_time())
        wall.append(time.perf_counter())
        return schedule_step(self, *args, **kwargs)

    with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()), \
            mock.patch.object(LambdaLR, "step", marked):
        train(TrainConfig(model=preset, data=dataset, micro_batch=micro_batch, max_steps=steps, lr=lr, seed=seed,
                          log_every=log_every, output_dir=out, tensorboard=True))
    # mark 0 is the scheduler's own first call at construction, mark k the end of step k
    return list(np.diff(cpu)[1:]), list(np.diff(wall)[1:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20, help="steps per round")
    p.add_argument("--micro-batch", type=int, default=8, help="sequences of 128 tokens per step")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--log-every", type=int, default=10, help="the engine's log interval (its default: 10)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: CPU time = work done)")
    p.add_argument("--model", default="tiny", choices=["tiny", "tiny-gpt"],
                   help="the model of every contender: tiny (the course's Llama) or tiny-gpt (the GPT layout)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)

    from fmlab.data import PackedDataset, course_dataset

    dataset = str(course_dataset(seq_len=128, vocab_size=512))
    ds = PackedDataset(dataset)
    tokens = args.micro_batch * ds.seq_len
    contenders = {"fmlab": lambda n: engine(dataset, n, args.micro_batch, 3e-3, 0, args.log_every, args.model),
                  "bare": lambda n: hand_written_loop(ds, n, args.micro_batch, 3e-3, 0, args.model),
                  "nanogpt": lambda n: nanogpt_loop(ds, n, args.micro_batch, 3e-3, 0, args.model)}
    if args.model != "tiny-gpt":
        contenders["nanogpt_gpt"] = lambda n: nanogpt_loop(ds, n, args.micro_batch, 3e-3, 0, "tiny-gpt")
    for run in contenders.values():
        run(3)  # warm every path up (imports, allocator)
    times = {name: ([], []) for name in contenders}
    paired = {name: [] for name in contenders if name != "fmlab"}  # per round: median CPU step over the engine's
    for _ in tqdm(range(args.rounds), desc="rounds"):
        rounds = {name: run(args.steps) for name, run in contenders.items()}
        for name, (cpu, wall) in rounds.items():
            times[name][0].extend(cpu)
            times[name][1].extend(wall)
        for name in paired:
            paired[name].append(statistics.median(rounds[name][0]) / statistics.median(rounds["fmlab"][0]))
    result = {"model": args.model, "shape": SHAPE, "micro_batch": args.micro_batch, "steps_per_round": args.steps,
              "rounds": args.rounds, "log_every": args.log_every, "threads": torch.get_num_threads()}
    for name, (cpu, wall) in times.items():
        result[f"{name}_tokens_per_cpu_s"] = round(tokens / statistics.median(cpu), 1)
        result[f"{name}_tokens_per_s"] = round(tokens / statistics.median(wall), 1)
    for name, ratios in paired.items():
        result[f"vs_{name}_round_ratios"] = [round(float(r), 3) for r in ratios]
        result[f"vs_{name}"] = round(float(statistics.median(ratios)), 3)
        result[f"vs_{name}_pooled_cpu"] = round(result["fmlab_tokens_per_cpu_s"]
                                                / result[f"{name}_tokens_per_cpu_s"], 3)
        result[f"vs_{name}_wall_clock"] = round(result["fmlab_tokens_per_s"] / result[f"{name}_tokens_per_s"], 3)
    passed = result["vs_nanogpt"] >= 1.0 and result["vs_bare"] >= 0.97
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:<26} {v}")
        print(f"{'PASS' if passed else 'BELOW TARGET'}: fmlab.train's tokens per CPU-second over nanoGPT's step on "
              f"the same model {result['vs_nanogpt']} (target >= 1.0) and over the bare loop's {result['vs_bare']} "
              f"(>= 0.97)")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
