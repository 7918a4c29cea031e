"""Checks for labs/lab_06_tensor_parallel.ipynb: Megatron's f and g operators, column- and row-parallel linear
layers in an MLP, a head-split attention block and a 2-stage pipeline with micro-batches, each written by the
learner and run on real gloo processes against one process holding the whole model.

    lab06.check_operators(CopyToParallel, ReduceFromParallel, work)   # ex1: f and g, on 2 and 4 processes
    lab06.check_mlp(TensorParallelMLP, work)                          # ex2: column -> GELU -> row, 2 and 4
    lab06.check_attention(TensorParallelAttention, work)              # ex3: whole heads per rank, 2 and 4
    lab06.check_pipeline(pipeline_step, work)                         # ex4: 2 stages, 2 and 4 micro-batches
    lab06.check_bubble(bubble_fraction, work, pipeline_step)          # ex5: the formula, and a measured bubble
    lab06.summary()                                                   # raises LabIncomplete while any fails

How the checks work. Each forks 2 (or 4) processes with the lab harness (`fmlab.labs.world`: a gloo process
group on 127.0.0.1, one thread per process, a bounded collective timeout) and runs the learner's code there on
the lab's fixed model and data (`make_mlp`, `make_attention`, `make_pipeline_model`, `inputs`). Each rank
returns what it computed: outputs, the loss, the input's gradient, its parameter shards and their gradients.
The parent computes the same step on one process with the whole model and compares every rank's tensors with
the matching slice of the single-process ones (`expected_*`). The pipeline check also counts the point-to-point
messages (a hook on the process group's send and recv) to see that the batch really travelled in micro-batches.

Tolerance: atol 1e-6 + rtol 1e-5 in float32 (`ATOL`, `RTOL`). The values are O(1); a tensor-parallel layer sums
2-4 partial products where one process sums all of them in one matmul, and float32 rounding (about 6e-8
relative) over sums of 16-64 terms leaves differences near 1e-7. Every bug the checks look for (a missing or
extra all-reduce, a bias added twice, heads torn apart, an unscaled micro-batch loss) is off by 1e-2 or more.

The given pieces live here so the notebook and its checks cannot drift apart; `Reference*` and `reference_*`
are the lab's own solution, used by the tests. All five checks take about 5 s on a 2-core laptop: 8 worlds of
2 or 4 processes, about 0.2 s each to fork and connect, and about 1.5 s of deliberate sleeping in the bubble's
measurement. Before any process runs, exercises 2 and 3 also build the learner's module for every rank in this
process and compare its shards with the expected slices, so a wrong slice is named before it breaks a forward.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from fmlab.labs import Lab, fresh_folder
from fmlab.labs.world import World, differences, first_lines, run_world
from fmlab.parallel.linear import CopyToParallelRegion, ReduceFromParallelRegion

LAB = Lab("lab 06", ["ex1_f_and_g", "ex2_mlp", "ex3_attention", "ex4_pipeline", "ex5_bubble"])

SEED = 0
WORLDS = (2, 4)  # exercises 1-3 run on 2 and on 4 processes: a solution that only works for 2 fails
D_MODEL, HIDDEN, HEADS = 16, 64, 4  # the MLP's and the attention block's sizes
BATCH, SEQ = 2, 8  # their input: 2 sequences of 8 tokens
PIPE_FEATURES, CUT, PIPE_OUT, PIPE_BATCH = 16, 32, 4, 16  # the pipeline's model: 16 -> 32 | 32 -> 4
MICROBATCHES = (2, 4)  # the pipeline check runs one step with each
STAGES = 2
ATOL, RTOL = 1e-6, 1e-5  # float32: see the module's docstring
COLLECTIVE_TIMEOUT = 10.0  # a rank that waits for a message nobody sends fails after this many seconds
# the bubble's measurement: each stage sleeps this long per sample of a micro-batch, forward and backward
FORWARD_SECONDS, BACKWARD_SECONDS = 0.005, 0.01
BUBBLE_MICROBATCHES = (1, 2, 4, 8)


@contextlib.contextmanager
def _seeded(seed: int):
    """Build with a fixed seed without touching the caller's random state."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        yield


# ---------------------------------------------------------------- the given pieces: models, data, loss


class MLP(nn.Module):
    """The transformer MLP: up-projection, GELU, down-projection (biases included)."""

    def __init__(self, d_model: int = D_MODEL, hidden: int = HIDDEN):
        super().__init__()
        self.up = nn.Linear(d_model, hidden)
        self.down = nn.Linear(hidden, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class Attention(nn.Module):
    """Causal multi-head self-attention with one fused q/k/v projection (GPT-2's c_attn, nanoGPT's layout):
    the rows of qkv.weight are q for every head, then k for every head, then v for every head."""

    def __init__(self, d_model: int = D_MODEL, heads: int = HEADS):
        super().__init__()
        self.heads, self.head_dim = heads, d_model // heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)  # each (b, t, d): head h is features h*head_dim..(h+1)*head_dim
        q, k, v = (z.view(b, t, self.heads, self.head_dim).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, heads, t, head_dim)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


def make_mlp() -> MLP:
    with _seeded(SEED):
        return MLP()


def make_attention() -> Attention:
    with _seeded(SEED + 1):
        return Attention()


def make_pipeline_model() -> nn.Sequential:
    """A small 4-layer model; stage 0 holds modules 0-3, stage 1 modules 4-6 (`stage_module`)."""
    with _seeded(SEED + 2):
        return nn.Sequential(nn.Linear(PIPE_FEATURES, CUT), nn.GELU(), nn.Linear(CUT, CUT), nn.GELU(),
                             nn.Linear(CUT, CUT), nn.GELU(), nn.Linear(CUT, PIPE_OUT))


def stage_module(model: nn.Sequential, stage: int) -> nn.Sequential:
    """Stage 0's half of the model (its output has CUT features) or stage 1's. The slices keep the full model's
    parameter names ("4.weight" stays "4.weight")."""
    return model[:4] if stage == 0 else model[4:]


def inputs(kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(input, target) of one step: kind "mlp" or "attention" ((2, 8, 16) both), or "pipeline" ((16, 16) and
    (16, 4)). The same on every rank and in every run."""
    g = torch.Generator().manual_seed({"mlp": 10, "attention": 11, "pipeline": 12}[kind])
    if kind == "pipeline":
        return torch.randn(PIPE_BATCH, PIPE_FEATURES, generator=g), torch.randn(PIPE_BATCH, PIPE_OUT, generator=g)
    return torch.randn(BATCH, SEQ, D_MODEL, generator=g), torch.randn(BATCH, SEQ, D_MODEL, generator=g)


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The loss of every exercise: the mean squared error over the batch."""
    return F.mse_loss(output, target)


# ---------------------------------------------------------------- the lab's own solution


# f and g are the package's own (fmlab.parallel.linear, which notebook 06 shows): the reference the learner's
# operators are checked against.
ReferenceCopy = CopyToParallelRegion
ReferenceReduce = ReduceFromParallelRegion


class ReferenceColumn(nn.Module):
    def __init__(self, full: nn.Linear, rank: int, world_size: int):
        super().__init__()
        self.weight = nn.Parameter(full.weight.detach().chunk(world_size, dim=0)[rank].clone())
        self.bias = nn.Parameter(full.bias.detach().chunk(world_size, dim=0)[rank].clone())

    def forward(self, x):
        return F.linear(ReferenceCopy.apply(x), self.weight, self.bias)


class ReferenceRow(nn.Module):
    def __init__(self, full: nn.Linear, rank: int, world_size: int):
        super().__init__()
        self.weight = nn.Parameter(full.weight.detach().chunk(world_size, dim=1)[rank].clone())
        self.bias = nn.Parameter(full.bias.detach().clone())

    def forward(self, x_slice):
        return ReferenceReduce.apply(F.linear(x_slice, self.weight)) + self.bias


class ReferenceMLP(nn.Module):
    def __init__(self, full: MLP, rank: int, world_size: int):
        super().__init__()
        self.up = ReferenceColumn(full.up, rank, world_size)
        self.down = ReferenceRow(full.down, rank, world_size)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


def head_rows(d_model: int, rank: int, world_size: int) -> torch.Tensor:
    """The rows of the fused qkv weight that hold this rank's heads: its q rows, then its k rows, then its v
    rows (heads rank*H/world .. (rank+1)*H/world - 1)."""
    return torch.arange(3 * d_model).view(3, world_size, -1)[:, rank].reshape(-1)


class ReferenceAttention(nn.Module):
    def __init__(self, full: Attention, rank: int, world_size: int):
        super().__init__()
        self.heads, self.head_dim = full.heads // world_size, full.head_dim
        d = full.qkv.in_features
        grouped = nn.Linear(d, 3 * d)  # rows regrouped so that rank r's block is q, k and v of its own heads
        order = torch.cat([head_rows(d, r, world_size) for r in range(world_size)])
        grouped.load_state_dict({"weight": full.qkv.weight[order], "bias": full.qkv.bias[order]})
        self.qkv = ReferenceColumn(grouped, rank, world_size)
        self.proj = ReferenceRow(full.proj, rank, world_size)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


def reference_pipeline_step(stage: int, module: nn.Module, x: torch.Tensor, y: torch.Tensor,
                            microbatches: int) -> float | None:
    """GPipe on 2 stages: every micro-batch's forward, then every backward; gradients accumulate."""
    if stage == 0:
        outputs = []
        for xm in x.chunk(microbatches):
            out = module(xm)
            dist.send(out.detach(), dst=1)
            outputs.append(out)
        for out in outputs:
            grad = torch.empty_like(out)
            dist.recv(grad, src=1)
            out.backward(grad)
        return None
    received, losses = [], []
    for ym in y.chunk(microbatches):
        a = torch.empty(len(ym), CUT)
        dist.recv(a, src=0)
        a.requires_grad_()
        losses.append(loss_fn(module(a), ym) / microbatches)
        received.append(a)
    for a, loss in zip(received, losses, strict=True):
        loss.backward()
        dist.send(a.grad, dst=0)
    return sum(loss.item() for loss in losses)


def reference_bubble(stages: int, microbatches: int) -> float:
    """The fraction of a GPipe step each stage sits idle: (p - 1) / (m + p - 1)."""
    return (stages - 1) / (microbatches + stages - 1)


# ---------------------------------------------------------------- what one process computes


def expected_operators(rank: int, world_size: int) -> dict:
    x, a, p, c = _operator_data(rank, world_size)
    parts = [_operator_data(r, world_size)[2] for r in range(world_size)]
    return {"f forward": x, "f backward": sum(_operator_data(r, world_size)[1] for r in range(world_size)),
            "g forward": sum(parts), "g backward": c, "g input after": p}


def _operator_data(rank: int, world_size: int):
    """ex1's tensors: x (the same on every rank), a (this rank's weights on f's output), p (this rank's partial
    output), c (the weights on g's output, the same on every rank)."""
    g = torch.Generator().manual_seed(100)
    x, c = torch.randn(3, 5, generator=g), torch.randn(3, 5, generator=g)
    mine = torch.Generator().manual_seed(200 + rank)
    return x, torch.randn(3, 5, generator=mine), torch.randn(3, 5, generator=mine), c


def _single_process(model: nn.Module, kind: str) -> dict:
    x, target = inputs(kind)
    x = x.clone().requires_grad_()
    out = model(x)
    loss = loss_fn(out, target)
    loss.backward()
    return {"output": out.detach(), "loss": loss.detach(), "input grad": x.grad,
            "full": {n: (p.detach(), p.grad) for n, p in model.named_parameters()}}


def _shards(full: dict, rules: dict[str, Callable[[torch.Tensor], torch.Tensor]]) -> tuple[dict, dict]:
    weights = {n: rule(full[n][0]) for n, rule in rules.items()}
    grads = {n: rule(full[n][1]) for n, rule in rules.items()}
    return weights, grads


def expected_mlp(rank: int, world_size: int) -> dict:
    """What rank `rank` of `world_size` must hold and compute in ex2."""
    one = _single_process(make_mlp(), "mlp")
    rules = {"up.weight": lambda t: t.chunk(world_size, dim=0)[rank],
             "up.bias": lambda t: t.chunk(world_size, dim=0)[rank],
             "down.weight": lambda t: t.chunk(world_size, dim=1)[rank],
             "down.bias": lambda t: t}
    weights, grads = _shards(one["full"], rules)
    return {"weights": weights, "output": one["output"], "loss": one["loss"], "input grad": one["input grad"],
            "grads": grads}


def expected_attention(rank: int, world_size: int) -> dict:
    """What rank `rank` of `world_size` must hold and compute in ex3."""
    one = _single_process(make_attention(), "attention")
    rows = head_rows(D_MODEL, rank, world_size)
    rules = {"qkv.weight": lambda t: t[rows], "qkv.bias": lambda t: t[rows],
             "proj.weight": lambda t: t.chunk(world_size, dim=1)[rank], "proj.bias": lambda t: t}
    weights, grads = _shards(one["full"], rules)
    return {"weights": weights, "output": one["output"], "loss": one["loss"], "input grad": one["input grad"],
            "grads": grads}


def expected_pipeline() -> dict:
    """The whole batch on one process: the loss and every parameter's gradient, by stage."""
    model = make_pipeline_model()
    x, y = inputs("pipeline")
    loss = loss_fn(model(x), y)
    loss.backward()
    return {"loss": loss.item(),
            "grads": [{n: p.grad for n, p in stage_module(model, s).named_parameters()} for s in range(STAGES)]}


# ---------------------------------------------------------------- helpers for the checks


def _factor(got, want) -> float | None:
    """k when got is k x want for some k clearly different from 1 (a doubled gradient, a missing sum)."""
    try:
        got, want = torch.as_tensor(got).double(), torch.as_tensor(want).double()
    except (TypeError, ValueError, RuntimeError):
        return None
    if got.shape != want.shape or want.abs().max() == 0:
        return None
    k = ((got * want).sum() / (want * want).sum()).item()
    if abs(k - 1) > 1e-3 and torch.allclose(got, k * want, atol=1e-5, rtol=1e-4):
        return k
    return None


def _named(module: nn.Module, names) -> dict:
    params = dict(module.named_parameters())
    return {n: params[n] for n in names if n in params}


def _tensor_or_none(t):
    return None if t is None else t.detach().clone()


def _world_failure(world: World, what: str, stub: str) -> str | None:
    """A sentence when the world did not finish, else None."""
    if world.ok:
        return None
    if world.unanswered():
        return f"not answered yet: {stub} still raises NotImplementedError"
    return f"with {world.world_size} processes, {what} failed: {world.failure()}"


def _first_rank_problems(results: list, expected: Callable[[int], dict], keys: list[str]) -> tuple[int, str, list]:
    """The first rank and key (in `keys` order) whose tensors differ: (rank, key, lines); (-1, "", []) if none."""
    for key in keys:
        for rank, got in enumerate(results):
            want = expected(rank)[key]
            if not isinstance(got, dict) or key not in got:
                return rank, key, [f"{key}: missing from what rank {rank} returned"]
            lines = differences(got[key], want, ATOL, RTOL, name=key)
            if lines:
                return rank, key, lines
    return -1, "", []


# ---------------------------------------------------------------- exercise 1: f and g


def _apply(op):
    """The function to call: a torch.autograd.Function subclass's apply, or a callable as given."""
    return op.apply if isinstance(op, type) and issubclass(op, torch.autograd.Function) else op


def _operators_run(copy, reduce):
    f, g = _apply(copy), _apply(reduce)

    def fn(rank, world_size):
        x, a, p, c = _operator_data(rank, world_size)
        x = x.clone().requires_grad_()
        y = f(x)
        (y * a).sum().backward()  # every rank weighs the copy differently, as its shard of W would
        base = p.clone().requires_grad_()
        partial = base * 1.0  # a partial output, as F.linear would give it
        z = g(partial)
        (z * c).sum().backward()  # every rank computes the same loss from the same summed output
        return {"f forward": y.detach(), "f backward": x.grad, "g forward": z.detach(), "g backward": base.grad,
                "g input after": partial.detach()}

    return fn


OPERATOR_HINTS = {
    "f forward": "f's forward is the identity: every rank already holds the whole input, so return x",
    "f backward": "f's backward all-reduces the gradient (dist.all_reduce sums in place, so all-reduce a clone "
                  "and return it): each rank's shard of W saw the same x, and x's gradient is the sum of theirs",
    "g forward": "g's forward sums the ranks' partial outputs: all-reduce a clone of x (SUM, the default)",
    "g backward": "g's backward is the identity: after g every rank holds the same output and computes the same "
                  "loss, so the gradient that arrives is already the whole gradient; return it unchanged",
    "g input after": "g changed its input: dist.all_reduce writes its result into the tensor it is given, so "
                     "all-reduce a clone (autograd may still need the input, and PyTorch requires mark_dirty for "
                     "an input changed in place)",
}


def check_operators(copy, reduce, work) -> bool:
    """ex1: f = `copy`, g = `reduce` (torch.autograd.Function subclasses, or their .apply)."""
    ex = "ex1_f_and_g"
    if not (callable(copy) and callable(reduce)):
        return LAB.report(ex, False, "give the two classes themselves: check_operators(CopyToParallel, "
                          "ReduceFromParallel, work)")
    base = fresh_folder(work, "ex1")
    for world_size in WORLDS:
        world = run_world(_operators_run(copy, reduce), base / f"world{world_size}", world_size=world_size,
                          collective_timeout=COLLECTIVE_TIMEOUT)
        if why := _world_failure(world, "f and g", "CopyToParallel or ReduceFromParallel"):
            hint = "" if why.startswith("not answered") else (
                ". Hint: f's backward and g's forward each call dist.all_reduce once, on every rank")
            return LAB.report(ex, False, why + hint)
        wants = [expected_operators(r, world_size) for r in range(world_size)]
        rank, key, lines = _first_rank_problems(world.results, wants.__getitem__, list(OPERATOR_HINTS))
        if lines:
            got = world.results[rank][key]
            k = _factor(got, wants[rank][key])
            scaled = f" (it is {k:.3g} x the expected)" if k else ""
            if key == "f backward" and not differences(got, _operator_data(rank, world_size)[1], ATOL, RTOL):
                scaled = " (it is this rank's own gradient: nothing was summed)"
            return LAB.report(ex, False, f"with {world_size} processes, rank {rank}: {first_lines(lines)}{scaled}. "
                              f"Hint: {OPERATOR_HINTS[key]}")
    return LAB.report(ex, True, f"on {' and '.join(map(str, WORLDS))} processes: f copies forward and sums the "
                      "gradients backward; g sums forward and passes the gradient through")


# ---------------------------------------------------------------- exercises 2 and 3: MLP and attention


def _layer_run(cls, make: Callable[[], nn.Module], kind: str, names: list[str]):
    def fn(rank, world_size):
        full = make()
        tp = cls(full, rank, world_size)
        x, target = inputs(kind)
        x = x.clone().requires_grad_()
        out = tp(x)
        loss = loss_fn(out, target)
        loss.backward()
        mine = _named(tp, names)
        return {"weights": {n: p.detach().clone() for n, p in mine.items()}, "output": out.detach(),
                "loss": loss.detach(), "input grad": _tensor_or_none(x.grad),
                "grads": {n: _tensor_or_none(p.grad) for n, p in mine.items()},
                "names": [n for n, _ in tp.named_parameters()]}

    return fn


def _layer_problem(results: list, expected: Callable[[int], dict], names: list[str], hints: dict,
                   world_size: int) -> str | None:
    """What differs first, as a sentence with a hint, or None when every rank matches."""
    for rank, got in enumerate(results):
        missing = [n for n in names if n not in got["weights"]]
        if missing:
            return (f"rank {rank}'s module has no parameter {', '.join(missing)} (it has "
                    f"{', '.join(got['names']) or 'none'}). Hint: {hints['names']}")
    rank, key, lines = _first_rank_problems(results, expected, ["weights", "output", "loss", "input grad", "grads"])
    if not lines:
        return None
    got, want = results[rank], expected(rank)
    where = f"with {world_size} processes, rank {rank}"
    if key == "weights":
        name = next(n for n in names if differences(got["weights"][n], want["weights"][n], ATOL, RTOL))
        return f"{where}: {first_lines(lines)}. Hint: {hints[name]}"
    if key == "output":
        same_shape = isinstance(got["output"], torch.Tensor) and got["output"].shape == want["output"].shape
        for offset, why in hints["output diagnoses"] if same_shape else []:
            off = offset(rank, world_size).expand_as(want["output"])
            if not differences(got["output"] - want["output"], off, 1e-5, 1e-4):
                return f"{where}: {first_lines(lines)}. Hint: {why}"
        return f"{where}: the weights are the right shards, but {first_lines(lines)}. Hint: {hints['output']}"
    if key == "grads":
        bad = [n for n in names if differences(got["grads"][n], want["grads"][n], ATOL, RTOL)]
        ks = {n: _factor(got["grads"][n], want["grads"][n]) for n in bad}
        scaled = "; ".join(f"{n}'s gradient is {k:.3g} x the expected" for n, k in ks.items() if k)
        if got["grads"][bad[0]] is None:
            return f"{where}: {bad[0]} got no gradient. Hint: {hints['no grad']}"
        return (f"{where}: the output, loss and input gradient match, but {first_lines(lines)}"
                f"{' (' + scaled + ')' if scaled else ''}. Hint: {hints['grads']}")
    k = _factor(got[key], want[key])
    scaled = f" (it is {k:.3g} x the expected)" if k else ""
    hint = hints["grads"] if k and abs(k - world_size) < 1e-3 else hints[key]
    return f"{where}: the output matches, but {first_lines(lines)}{scaled}. Hint: {hint}"


MLP_NAMES = ["up.weight", "up.bias", "down.weight", "down.bias"]
MLP_HINTS = {
    "names": "TensorParallelMLP keeps self.up = ColumnParallelLinear(...) and self.down = RowParallelLinear(...), "
             "each with nn.Parameter attributes self.weight and self.bias",
    "up.weight": "the column-parallel layer keeps this rank's ROWS of W (its output features): "
                 "full.weight.chunk(world_size, dim=0)[rank], as an nn.Parameter (a detached clone)",
    "up.bias": "the column-parallel layer keeps the bias of its own output features: "
               "full.bias.chunk(world_size, dim=0)[rank]",
    "down.weight": "the row-parallel layer keeps this rank's COLUMNS of W (its input features): "
                   "full.weight.chunk(world_size, dim=1)[rank]",
    "down.bias": "the row-parallel layer keeps the WHOLE bias: it is added once, after the sum",
    "output": "column-parallel: F.linear(f(x), W_rows, b_rows), no gather; GELU; row-parallel: "
              "g(F.linear(h, W_cols)) + b, the bias added after the sum",
    "output diagnoses": [
        (lambda r, ws: (ws - 1) * make_mlp().down.bias.detach(),
         "the output is off by (world_size - 1) x down.bias: the row-parallel layer adds its bias before the sum "
         "(or on every rank's partial), so g adds it world_size times; add it once, after g"),
    ],
    "loss": "every rank computes the loss from the same full output",
    "input grad": "the input's gradient is the sum of the ranks' contributions: the column-parallel layer must "
                  "call f on its input (f's backward all-reduces)",
    "no grad": "the weights must be nn.Parameter tensors that the forward uses (F.linear(..., self.weight, ...))",
    "grads": "with f and g right, each shard's gradient is the slice of the full gradient. A gradient world_size "
             "times too large means an all-reduce too many in a backward (g's backward is the identity)",
}

ATTENTION_NAMES = ["qkv.weight", "qkv.bias", "proj.weight", "proj.bias"]
ATTENTION_HINTS = {
    "names": "TensorParallelAttention keeps self.qkv (column-parallel) and self.proj (row-parallel), each with "
             "nn.Parameter attributes weight and bias",
    "qkv.weight": "qkv.weight's rows are [q of heads 0..H-1, k of heads 0..H-1, v of heads 0..H-1]; a rank "
                  "keeps the q rows, then the k rows, then the v rows of ITS heads (heads rank*H/world_size "
                  "onwards). Chunking the fused rows in world_size blocks gives rank 0 all of q and some of k: "
                  "regroup the rows first (torch.arange(3 * d).view(3, world_size, -1)[:, rank])",
    "qkv.bias": "qkv.bias is split like qkv.weight's rows: this rank's heads' q, k and v entries",
    "proj.weight": "the output projection is row-parallel: this rank's COLUMNS of proj.weight (the features of "
                   "its heads)",
    "proj.bias": "the output projection keeps the WHOLE bias, added once after the sum",
    "output": "split the local qkv output into q, k, v of this rank's heads ((b, t, 3, heads, head_dim)), run "
              "F.scaled_dot_product_attention(q, k, v, is_causal=True) on them, and feed the (b, t, heads x "
              "head_dim) result to the row-parallel projection",
    "output diagnoses": [
        (lambda r, ws: (ws - 1) * make_attention().proj.bias.detach(),
         "the output is off by (world_size - 1) x proj.bias: the row-parallel projection adds its bias before "
         "the sum; add it once, after g"),
    ],
    "loss": "every rank computes the loss from the same full output",
    "input grad": "the input's gradient is the sum over the ranks: qkv's column-parallel layer must call f",
    "no grad": "the weights must be nn.Parameter tensors that the forward uses",
    "grads": "each shard's gradient is the slice of the full gradient; a gradient world_size times too large "
             "means an all-reduce too many in a backward",
}


def _shard_problem(cls, make, names: list[str], hints: dict, expected: Callable[[int, int], dict]) -> str | None:
    """Build the learner's module here, for every rank, and compare its shards with the expected ones before
    any process runs: a wrong slice is named precisely instead of surfacing as a shape error in a forward. A
    constructor that raises here (the stub, or one that asks torch.distributed for its rank) is left to the
    run, which reports it."""
    for world_size in WORLDS:
        for rank in range(world_size):
            try:
                with torch.random.fork_rng():
                    params = dict(cls(make(), rank, world_size).named_parameters())
            except Exception:  # whatever the constructor raises, the run below reports it
                return None
            want = expected(rank, world_size)["weights"]
            missing = [n for n in names if n not in params]
            if missing:
                return (f"the module built for rank {rank} of {world_size} has no parameter {', '.join(missing)} (it "
                        f"has {', '.join(params) or 'none'}). Hint: {hints['names']}")
            for n in names:
                if lines := differences(params[n].detach(), want[n], ATOL, RTOL, name=n):
                    return (f"before running anything, the module built for rank {rank} of {world_size} holds the "
                            f"wrong shard: {first_lines(lines)}. Hint: {hints[n]}")
    return None


def _check_layer(ex: str, cls, work, make, kind: str, names: list[str], hints: dict,
                 expected: Callable[[int, int], dict], what: str, stub: str) -> bool:
    if not callable(cls):
        return LAB.report(ex, False, f"give the class itself: {stub}, not an instance")
    if problem := _shard_problem(cls, make, names, hints, expected):
        return LAB.report(ex, False, problem)
    base = fresh_folder(work, ex.split("_")[0])
    for world_size in WORLDS:
        world = run_world(_layer_run(cls, make, kind, names), base / f"world{world_size}", world_size=world_size,
                          collective_timeout=COLLECTIVE_TIMEOUT)
        if why := _world_failure(world, what, stub):
            hint = "" if why.startswith("not answered") else f". Hint: {hints['output']}"
            return LAB.report(ex, False, why + hint)
        wants = [expected(r, world_size) for r in range(world_size)]
        if problem := _layer_problem(world.results, wants.__getitem__, names, hints, world_size):
            return LAB.report(ex, False, problem)
    return None


def check_mlp(TensorParallelMLP, work) -> bool:  # noqa: N803 (the learner's class)
    """ex2: TensorParallelMLP(full_mlp, rank, world_size) with .up (column-parallel) and .down (row-parallel)."""
    ex = "ex2_mlp"
    failed = _check_layer(ex, TensorParallelMLP, work, make_mlp, "mlp", MLP_NAMES, MLP_HINTS, expected_mlp,
                          "the tensor-parallel MLP", "TensorParallelMLP")
    if failed is not None:
        return failed
    return LAB.report(ex, True, f"on {' and '.join(map(str, WORLDS))} processes: the output, the loss, the "
                      f"input's gradient and every shard's gradient equal one process's (atol {ATOL:g}, rtol "
                      f"{RTOL:g})")


def check_attention(TensorParallelAttention, work) -> bool:  # noqa: N803 (the learner's class)
    """ex3: TensorParallelAttention(full_attention, rank, world_size) with .qkv and .proj."""
    ex = "ex3_attention"
    failed = _check_layer(ex, TensorParallelAttention, work, make_attention, "attention", ATTENTION_NAMES,
                          ATTENTION_HINTS, expected_attention, "the tensor-parallel attention",
                          "TensorParallelAttention")
    if failed is not None:
        return failed
    return LAB.report(ex, True, f"on {' and '.join(map(str, WORLDS))} processes ({HEADS // WORLDS[0]} and "
                      f"{HEADS // WORLDS[-1]} heads per rank): output, loss, input gradient and every shard's "
                      "gradient equal one process's")


# ---------------------------------------------------------------- exercise 4: a 2-stage pipeline

_P2P: list[tuple[str, int, tuple]] = []  # in a child: the point-to-point messages this rank sent and received


def _count_p2p(rank: int, logs: Path) -> None:
    """Inside each child: record every send and recv the process group does (dist.send, isend, recv, irecv and
    batch_isend_irecv all end there)."""
    from torch._C._distributed_c10d import ProcessGroup

    real_send, real_recv = ProcessGroup.send, ProcessGroup.recv

    def send(self, tensors, dst, tag=0):
        _P2P.append(("send", dst, tuple(tensors[0].shape)))
        return real_send(self, tensors, dst, tag)

    def recv(self, tensors, src, tag=0):
        _P2P.append(("recv", src, tuple(tensors[0].shape)))
        return real_recv(self, tensors, src, tag)

    ProcessGroup.send, ProcessGroup.recv = send, recv


def _pipeline_run(pipeline_step):
    def fn(rank, world_size):
        out = []
        for m in MICROBATCHES:
            module = stage_module(make_pipeline_model(), rank)
            x, y = inputs("pipeline")
            start = len(_P2P)
            loss = pipeline_step(rank, module, x, y, m)
            try:
                loss = float(loss)
            except (TypeError, ValueError, RuntimeError):
                loss = repr(loss)  # stage 0's None, or something that is not a loss
            out.append({"loss": loss,
                        "grads": {n: _tensor_or_none(p.grad) for n, p in module.named_parameters()},
                        "messages": _P2P[start:]})
        return out

    return fn


PIPELINE_HINT = ("stage 0: for each micro-batch (x.chunk(microbatches)), out = module(xm) and dist.send(out.detach(), dst=1); "
                 "then for each, dist.recv a gradient and out.backward(grad). Stage 1: for each, dist.recv the "
                 "activation into torch.empty(len(ym), lab06.CUT), requires_grad_(), loss = loss_fn(module(a), ym) / "
                 "microbatches; then for each, loss.backward() and dist.send(a.grad, dst=0); return the sum of "
                 "the micro-batch losses")


def _messages(got: list, m: int) -> str | None:
    """Does each stage send and receive one (B/m, CUT) tensor per micro-batch, forward and backward?"""
    shape = (PIPE_BATCH // m, CUT)
    want = {0: {"send": m, "recv": m}, 1: {"recv": m, "send": m}}
    for stage, expect in want.items():
        messages = got[stage]["messages"]
        for kind, count in expect.items():
            mine = [s for k, _, s in messages if k == kind]
            if len(mine) != count:
                verb, what, peer = {("send", 0): ("sent", "activation", "to stage 1"),
                                    ("recv", 0): ("received", "gradient", "from stage 1"),
                                    ("recv", 1): ("received", "activation", "from stage 0"),
                                    ("send", 1): ("sent", "gradient", "back to stage 0")}[kind, stage]
                return (f"with {m} micro-batches, stage {stage} {verb} {len(mine)} {what}(s) {peer}, expected "
                        f"{count}: one per micro-batch, each of shape {shape}")
            if any(s != shape for s in mine):
                return (f"with {m} micro-batches, stage {stage} {kind}s tensors of shapes {sorted(set(mine))}, "
                        f"expected {shape}: one micro-batch's activation (or its gradient) at a time")
    return None


def check_pipeline(pipeline_step, work) -> bool:
    """ex4: pipeline_step(stage, module, x, y, microbatches) on 2 processes, against one process."""
    ex = "ex4_pipeline"
    if not callable(pipeline_step):
        return LAB.report(ex, False, "give the function pipeline_step itself (no parentheses)")
    base = fresh_folder(work, "ex4")
    world = run_world(_pipeline_run(pipeline_step), base / "world2", world_size=STAGES, prepare=_count_p2p,
                      collective_timeout=COLLECTIVE_TIMEOUT)
    if why := _world_failure(world, "the pipeline", "pipeline_step"):
        hint = "" if why.startswith("not answered") else (
            ". Every send needs its recv on the other stage, in the same order and with the same shape. Hint: "
            + PIPELINE_HINT)
        return LAB.report(ex, False, why + hint)
    want = expected_pipeline()
    rows = []
    for i, m in enumerate(MICROBATCHES):
        got = [world.results[s][i] for s in range(STAGES)]
        loss = got[1]["loss"]
        problems = [f"stage {s}: {line}" for s in range(STAGES)
                    for line in differences(got[s]["grads"], want["grads"][s], ATOL, RTOL, name="grad")]
        wrong_loss = not isinstance(loss, float) or abs(loss - want["loss"]) > ATOL + RTOL * abs(want["loss"])
        if wrong_loss or problems:
            loss_text = f"{loss:.6g}" if isinstance(loss, float) else repr(loss)
            say = f"with {m} micro-batches, "
            if wrong_loss:
                say += f"stage 1 returned the loss {loss_text}, one process's is {want['loss']:.6g}; "
            if problems:
                say += first_lines(problems)
            ks = [_factor(got[s]["grads"].get(n), want["grads"][s][n]) if isinstance(got[s]["grads"], dict) else None
                  for s in range(STAGES) for n in want["grads"][s]]
            if all(k is not None and abs(k - m) < 1e-3 for k in ks):
                why = (f"every gradient is {m} x one process's: each micro-batch's loss is a mean over its own "
                       f"samples, so divide it by the number of micro-batches before backward")
            elif isinstance(loss, float) and abs(loss - m * want["loss"]) < 1e-5:
                why = f"the loss is {m} x one process's: return the sum of the micro-batch losses divided by {m}"
            elif problems and all(p.startswith("stage 0") for p in problems):
                why = ("stage 1's gradients are right, stage 0's are not: stage 0 must run backward from its "
                       "outputs with the gradients stage 1 sent back, out.backward(grad), pairing each micro-batch's "
                       "output with its own gradient")
            else:
                why = PIPELINE_HINT
            return LAB.report(ex, False, f"{say}. Hint: {why}")
        if message := _messages(got, m):
            return LAB.report(ex, False, f"the loss and gradients are right, but {message}. Hint: {PIPELINE_HINT}")
        rows.append(f"  {m} micro-batches of {PIPE_BATCH // m}: loss {loss:.6f}; {m} activations sent forward, "
                    f"{m} gradients back")
    return LAB.report(ex, True, "the loss and every parameter's gradient equal one process over the whole batch "
                      f"(atol {ATOL:g}, rtol {RTOL:g}):\n" + "\n".join(rows))


# ---------------------------------------------------------------- exercise 5: the bubble


class _Delay(torch.autograd.Function):
    """Sleep, as a slower stage's compute would take time: forward, and again in the backward."""

    busy = 0.0

    @staticmethod
    def forward(ctx, x, forward_s, backward_s):
        ctx.backward_s = backward_s
        time.sleep(forward_s)
        _Delay.busy += forward_s
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.backward_s)
        _Delay.busy += ctx.backward_s
        return grad, None, None


class _Slow(nn.Module):
    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        rows = len(x)
        return _Delay.apply(self.inner(x), rows * FORWARD_SECONDS, rows * BACKWARD_SECONDS)


def _timing_run(pipeline_step):
    def fn(rank, world_size):
        rows = []
        x, y = inputs("pipeline")
        pipeline_step(rank, stage_module(make_pipeline_model(), rank), x, y, 1)  # a warm-up: autograd's first use
        for m in BUBBLE_MICROBATCHES:
            module = _Slow(stage_module(make_pipeline_model(), rank))
            x, y = inputs("pipeline")
            dist.barrier()
            _Delay.busy, start = 0.0, time.perf_counter()
            pipeline_step(rank, module, x, y, m)
            dist.barrier()  # the step ends when the last stage is done
            total = time.perf_counter() - start
            rows.append({"microbatches": m, "step": total, "idle": 1 - _Delay.busy / total})
        return rows

    return fn


def measure_bubble(pipeline_step, work) -> tuple[list[dict] | None, str]:
    """Run `pipeline_step` on 2 stages that sleep FORWARD/BACKWARD_SECONDS per sample: each stage's idle
    fraction of the step, per number of micro-batches. Returns (rows or None, the failure)."""
    world = run_world(_timing_run(pipeline_step), Path(work) / "timing", world_size=STAGES,
                      collective_timeout=COLLECTIVE_TIMEOUT)
    if not world.ok:
        return None, world.failure()
    return [{"microbatches": a["microbatches"], "step_ms": 1000 * max(a["step"], b["step"]),
             "idle_stage0": a["idle"], "idle_stage1": b["idle"]}
            for a, b in zip(world.results[0], world.results[1], strict=True)], ""


BUBBLE_CASES = [(2, 4), (2, 1), (4, 8), (4, 4), (8, 32), (6, 4)]


def check_bubble(bubble_fraction, work, pipeline_step=None) -> bool:
    """ex5 (a short quiz): bubble_fraction(stages, microbatches), the idle fraction of a GPipe step, checked
    against the formula; then the lab's pipeline is timed (with `pipeline_step` when it works, else the lab's
    own) to show the formula measured."""
    ex = "ex5_bubble"
    if not callable(bubble_fraction):
        return LAB.report(ex, False, "give the function bubble_fraction itself (no parentheses)")
    wrong = []
    for p, m in BUBBLE_CASES:
        want = reference_bubble(p, m)
        try:
            got = bubble_fraction(p, m)
        except NotImplementedError:
            return LAB.report(ex, False, "not answered yet: bubble_fraction still raises NotImplementedError. Hint: "
                              "count the time slots of a GPipe step, and the slots in which one stage works")
        except Exception as e:  # a bug in the answer is a failed case
            wrong.append(f"bubble_fraction({p}, {m}) raised {type(e).__name__}: {e}")
            continue
        if not isinstance(got, int | float) or abs(got - want) > 1e-9:
            wrong.append(f"bubble_fraction({p}, {m}) = {got!r}, expected {want:.4g}")
    if wrong:
        return LAB.report(ex, False, "; ".join(wrong[:3]) + ". Hint: with p stages and m micro-batches of equal "
                          "time, a GPipe step lasts m + p - 1 slots forward (and as many backward); each stage "
                          "works in m of them. (p - 1) / m, notebook 06's figure, is the idle time over the "
                          "compute time instead")
    base = fresh_folder(work, "ex5")
    rows, why = measure_bubble(pipeline_step, base) if callable(pipeline_step) else (None, "")
    whose = "your pipeline_step"
    if rows is None:
        rows, _ = measure_bubble(reference_pipeline_step, base)
        whose = "the lab's pipeline (yours " + ("failed: " + why if why else "was not given") + ")"
    table = "\n".join(
        f"  m = {r['microbatches']}: step {r['step_ms']:4.0f} ms (no overhead: {_ideal_ms(r['microbatches']):4.0f}), "
        f"idle: stage 0 {r['idle_stage0']:.2f}, stage 1 {r['idle_stage1']:.2f}, formula "
        f"{reference_bubble(STAGES, r['microbatches']):.2f}" for r in rows or [])
    return LAB.report(ex, True, f"(p - 1) / (m + p - 1). Measured on {whose}: 2 stages that sleep "
                      f"{1000 * FORWARD_SECONDS:g} ms per sample forward and {1000 * BACKWARD_SECONDS:g} ms backward, "
                      f"{PIPE_BATCH} samples per step:\n{table}\nWhat the formula leaves out (each message's latency, "
                      "each micro-batch's fixed cost) adds idle time, more of it as m grows")


def _ideal_ms(m: int) -> float:
    """The step time of a GPipe schedule with no cost but the (slept) compute: (m + p - 1) slots."""
    return 1000 * (m + STAGES - 1) * (PIPE_BATCH / m) * (FORWARD_SECONDS + BACKWARD_SECONDS)


def summary() -> None:
    LAB.summary()
