"""Checks for labs/lab_05_sharded.ipynb: your own ZeRO. The learner shards a flat gradient with a reduce-scatter,
writes a sharded AdamW (ZeRO-1/2: each rank updates only its shard, then all-gathers the parameters) and one
FSDP unit (ZeRO-3: a Linear that keeps only its shard between uses), and every check runs that code on 2 and 4
real gloo processes and compares it with one process training the whole batch.

    lab05.check_gradient_shards(flatten_padded, shard, gradient_shard, work)  # ex1: padding, reduce-scatter, mean
    lab05.check_sharded_adamw(ShardedAdamW, work)                             # ex2: = torch.optim.AdamW, state / N
    lab05.check_fsdp_unit(FSDPLinear, work)                                   # ex3: gather, free, reduce-scatter
    lab05.summary()                                                           # LabIncomplete while any fails

The given pieces live here, so that the notebook and its checks cannot drift apart: a small MLP whose 423
parameters divide by neither 2 nor 4 (`make_model`: padding is needed), the global batch of each step and
each rank's slice of it (`global_batch`, `local_batch`), the loss, the AdamW settings, and `unflatten`, which
cuts a flat buffer back into views of given shapes. `reference_*` and `Reference*` are the lab's own solution;
`single_process_*` are what the checks compare with: one process, the whole batch, torch.optim.AdamW or SGD.

How the checks compare. Every world is forked by the lab harness (`fmlab.labs.world`: one thread per process,
gloo on 127.0.0.1). The ranks' gradients are summed in another order than one process's sum over the whole
batch, so fp32 results differ by rounding: ~3e-8 for gradients, up to ~1e-7 for the parameters after five
AdamW steps (Adam divides by sqrt(v), which amplifies rounding where a gradient is small). The tolerances,
atol 1e-6 + rtol 1e-5 for gradients and outputs and atol 2e-6 for AdamW's parameters, are well above that
and far below any bug the hints name: a missing division by the world size makes the gradient N times too
large (~1e-1), the mildest wrong weight decay (none at all) is off by 3.5e-4 after one step, a missing
all-gather by ~1e-2. Adam itself hides a missing division (its update m / sqrt(v) does not change when every
gradient doubles, but for eps), so exercise 1 checks the gradient shard directly.

What is kept is measured, not asked. The optimizer's state: every tensor reachable from the optimizer object
(attributes, lists, dicts, a torch optimizer's state, tensors' .grad) except the model's parameters and
gradients, counted once per storage; each rank's bytes must be those of one process (a 1-rank world of the
same class) divided by the world size, allowing the padding and `STATE_SLACK` bytes of scalars. An FSDP
unit: the tensors the module holds between steps (at most its shard), the buffers the all-gathers filled in
the forward (freed before the backward: weak references, given gloo's worker thread 1 s to let go of
them), and the collectives of each phase (the backward must all-gather again).

The solved lab's checks take about 4 s on 2 cores: 7 worlds of 1 to 4 processes, each ~0.1-0.5 s, after a
one-time warm-up of ~1 s.
"""

from __future__ import annotations

import math
import time
import types
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from fmlab.labs import Lab, world
from fmlab.labs.world import differences, first_lines, max_difference

LAB = Lab("lab 05", ["ex1_shard_gradients", "ex2_sharded_adamw", "ex3_fsdp_unit"])

SEED = 0
FEATURES, HIDDEN, OUTPUTS = 8, 15, 3  # 135 + 240 + 48 = 423 parameters: odd, so 2 and 4 ranks need padding
GLOBAL_BATCH = 8  # rows per step, split evenly over 1, 2 or 4 ranks
STEPS = 5  # AdamW steps compared in exercise 2
ADAMW = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
SGD_LR = 0.1  # exercise 3 trains its shards with plain SGD
FSDP_STEPS = 2
WORLDS = (2, 4)
GRAD_TOL = dict(atol=1e-6, rtol=1e-5)  # gradients, outputs, losses: rounding is ~1e-8
PARAM_TOL = dict(atol=2e-6, rtol=0.0)  # parameters after AdamW steps: rounding is ~1e-7
STATE_SLACK = 64  # bytes a rank may hold beyond its share: scalars such as a step count
WORLD_TIMEOUT = 60.0
COLLECTIVE_TIMEOUT = 20.0


# ---------------------------------------------------------------- the given pieces: model, data, loss


def make_model() -> torch.nn.Sequential:
    """The model every rank builds: the same initial weights everywhere (fixed seed)."""
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                                   torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.Tanh(),
                                   torch.nn.Linear(HIDDEN, OUTPUTS))


def global_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole batch of step `step` (from 1): what one process trains on."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, FEATURES, generator=g)
    mix = torch.linspace(-1.0, 1.0, FEATURES * OUTPUTS).reshape(FEATURES, OUTPUTS)
    return x, torch.sin(x @ mix) + 0.1 * torch.randn(GLOBAL_BATCH, OUTPUTS, generator=g)


def local_batch(step: int, rank: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s rows of the global batch of step `step`: equal slices, so the mean of the ranks' mean losses
    is the whole batch's mean loss, and the mean of their gradients is its gradient."""
    x, y = global_batch(step)
    rows = GLOBAL_BATCH // world_size
    return x[rank * rows:(rank + 1) * rows], y[rank * rows:(rank + 1) * rows]


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(output, target)


def unflatten(flat: torch.Tensor, shapes) -> list[torch.Tensor]:
    """Views of `flat`, one per shape, in order (the padding at the end is left out)."""
    out, start = [], 0
    for shape in shapes:
        n = math.prod(shape)
        out.append(flat[start:start + n].view(shape))
        start += n
    return out


def padded_numel(numel: int, world_size: int) -> int:
    """The smallest multiple of world_size that holds numel elements."""
    return -(-numel // world_size) * world_size


def param_count() -> int:
    return sum(p.numel() for p in make_model().parameters())


# ---------------------------------------------------------------- the lab's own solution


def reference_flatten_padded(tensors, world_size: int) -> torch.Tensor:
    """Exercise 1: the tensors flattened into one 1-D buffer, zero-padded to a multiple of world_size."""
    flat = torch.cat([t.reshape(-1) for t in tensors])
    return F.pad(flat, (0, padded_numel(flat.numel(), world_size) - flat.numel()))


def reference_shard(flat: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Exercise 1: rank's contiguous piece of a padded flat buffer (a view)."""
    n = flat.numel() // world_size
    return flat[rank * n:(rank + 1) * n]


def reference_gradient_shard(params, rank: int, world_size: int) -> torch.Tensor:
    """Exercise 1: this rank's shard of the gradient averaged over the ranks."""
    flat = reference_flatten_padded([p.grad for p in params], world_size)
    out = torch.empty(flat.numel() // world_size)
    dist.reduce_scatter_single(out, flat)  # sum over ranks of piece `rank`
    return out / world_size


class ReferenceShardedAdamW:
    """Exercise 2: AdamW whose moments live only for this rank's shard of the flat parameters."""

    def __init__(self, params, rank, world_size, lr, betas, eps, weight_decay):
        self.params = list(params)
        self.rank, self.world_size = rank, world_size
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        numel = padded_numel(sum(p.numel() for p in self.params), world_size) // world_size
        self.exp_avg, self.exp_avg_sq = torch.zeros(numel), torch.zeros(numel)
        self.t = 0

    @torch.no_grad()
    def step(self):
        grad = reference_gradient_shard(self.params, self.rank, self.world_size)
        flat = reference_flatten_padded([p.detach() for p in self.params], self.world_size)
        p = reference_shard(flat, self.rank, self.world_size).clone()
        self.t += 1
        beta1, beta2 = self.betas
        p.mul_(1 - self.lr * self.weight_decay)  # decoupled weight decay, on the weights before the update
        self.exp_avg.lerp_(grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (self.exp_avg_sq / (1 - beta2 ** self.t)).sqrt_().add_(self.eps)
        p.addcdiv_(self.exp_avg, denom, value=-self.lr / (1 - beta1 ** self.t))
        full = torch.empty_like(flat)
        dist.all_gather_single(full, p)
        for param, value in zip(self.params, unflatten(full, [q.shape for q in self.params]), strict=True):
            param.copy_(value)


class _ReferenceGatherLinear(torch.autograd.Function):
    """Exercise 3: gather the Linear's weights, use them, free them; gather again in backward."""

    @staticmethod
    def forward(ctx, x, shard, out_features, in_features, world_size):
        full = torch.empty(shard.numel() * world_size)
        dist.all_gather_single(full, shard)
        weight, bias = unflatten(full, [(out_features, in_features), (out_features,)])
        ctx.save_for_backward(x, shard)  # not the full weight: it is freed when `full` goes out of scope
        ctx.shapes, ctx.world_size = (out_features, in_features), world_size
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_out):
        x, shard = ctx.saved_tensors
        full = torch.empty(shard.numel() * ctx.world_size)
        dist.all_gather_single(full, shard)
        weight, _ = unflatten(full, [ctx.shapes, ctx.shapes[:1]])
        grad_x = grad_out @ weight
        grad_flat = reference_flatten_padded([grad_out.T @ x, grad_out.sum(0)], ctx.world_size)
        grad_shard = torch.empty_like(shard)
        dist.reduce_scatter_single(grad_shard, grad_flat)
        return grad_x, grad_shard / ctx.world_size, None, None, None


class ReferenceFSDPLinear(torch.nn.Module):
    """Exercise 3: one FSDP unit around a Linear: between uses it holds only its shard of [weight, bias]."""

    def __init__(self, linear, rank, world_size):
        super().__init__()
        self.out_features, self.in_features, self.world_size = linear.out_features, linear.in_features, world_size
        flat = reference_flatten_padded([linear.weight.detach(), linear.bias.detach()], world_size)
        self.shard = torch.nn.Parameter(reference_shard(flat, rank, world_size).clone())

    def forward(self, x):
        return _ReferenceGatherLinear.apply(x, self.shard, self.out_features, self.in_features, self.world_size)


# ---------------------------------------------------------------- what one process computes


def names() -> list[str]:
    return [n for n, _ in make_model().named_parameters()]


def single_process_gradient(step: int = 1) -> torch.Tensor:
    """The flat gradient of the whole batch of `step`, at the initial weights."""
    model = make_model()
    loss_fn(model(global_batch(step)[0]), global_batch(step)[1]).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def single_process_adamw(steps: int = STEPS, optimizer: Callable | None = None) -> list[dict]:
    """The parameters after each of `steps` steps of torch.optim.AdamW (or `optimizer(params)`) on the whole batch."""
    model = make_model()
    opt = optimizer(model.parameters()) if optimizer else torch.optim.AdamW(model.parameters(), **ADAMW)
    out = []
    for step in range(1, steps + 1):
        opt.zero_grad()
        x, y = global_batch(step)
        loss_fn(model(x), y).backward()
        opt.step()
        out.append({n: p.detach().clone() for n, p in model.named_parameters()})
    return out


def adamw_state_bytes() -> int:
    """The bytes of torch.optim.AdamW's state for the whole model on one process (moments and step counts)."""
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), **ADAMW)
    loss_fn(model(global_batch(1)[0]), global_batch(1)[1]).backward()
    opt.step()
    return held_bytes(opt, list(model.parameters()) + [p.grad for p in model.parameters()])


def single_process_sgd(steps: int = FSDP_STEPS) -> list[dict]:
    """Exercise 3's run on one process: per step, the output and loss on the whole batch, and each Linear's
    flat gradient [weight, bias]."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=SGD_LR)
    out = []
    for step in range(1, steps + 1):
        opt.zero_grad()
        x, y = global_batch(step)
        output = model(x)
        loss = loss_fn(output, y)
        loss.backward()
        grads = [torch.cat([m.weight.grad.reshape(-1), m.bias.grad.reshape(-1)]) for m in _linears(model)]
        out.append({"output": output.detach(), "grads": grads})
        opt.step()
    return out


def _linears(model) -> list[torch.nn.Module]:
    return [m for m in model if isinstance(m, torch.nn.Linear)]


# ---------------------------------------------------------------- measuring what an object holds


_ATOMS = (str, bytes, int, float, complex, bool, type(None), type, types.FunctionType, types.BuiltinFunctionType,
          types.MethodType, types.ModuleType, torch.dtype, torch.device, torch.Size)


def held_tensors(obj, exclude=()) -> dict[int, int]:
    """{storage address: bytes} of every tensor reachable from `obj` (its attributes, dicts, lists, a torch
    optimizer's state, tensors' .grad), each storage once, except the storages of the tensors in `exclude`."""
    excluded = {t.untyped_storage().data_ptr() for t in exclude if isinstance(t, torch.Tensor)}
    found: dict[int, int] = {}
    seen: set[int] = set()

    def walk(o, depth: int) -> None:
        if depth > 12 or id(o) in seen or isinstance(o, _ATOMS):
            return
        seen.add(id(o))
        if isinstance(o, torch.Tensor):
            storage = o.untyped_storage()
            if storage.data_ptr() not in excluded and storage.nbytes():
                found[storage.data_ptr()] = storage.nbytes()
            if o.is_leaf and o.grad is not None:
                walk(o.grad, depth + 1)
            return
        if isinstance(o, dict):
            for k, v in list(o.items()):
                walk(k, depth + 1)
                walk(v, depth + 1)
        elif isinstance(o, list | tuple | set | frozenset):
            for v in list(o):
                walk(v, depth + 1)
        elif hasattr(o, "__dict__"):
            walk(vars(o), depth + 1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        walk(obj, 0)
    return found


def held_bytes(obj, exclude=()) -> int:
    return sum(held_tensors(obj, exclude).values())


# ---------------------------------------------------------------- running worlds


def run_world(fn, logs, world_size: int, prepare=None):
    return world.run_world(fn, logs, world_size, WORLD_TIMEOUT, prepare=prepare,
                           collective_timeout=COLLECTIVE_TIMEOUT)


def _logs(work, name: str) -> Path:
    """Where one world of a check writes its ranks' logs (the harness empties it first)."""
    return Path(work) / name


def _on(ws: int) -> str:
    return "on 1 rank" if ws == 1 else f"on {ws} ranks"


def _callable(exercise: str, *objects) -> bool:
    """True if every answer can be called; otherwise reports the exercise failed and returns False."""
    if all(callable(o) for o in objects):
        return True
    LAB.report(exercise, False, "give the function(s) or the class itself, not the result of a call (no parentheses)")
    return False


_EVENTS: dict = {"phase": "setup", "calls": [], "gathered": []}


def _watch_collectives(rank: int, logs: Path) -> None:
    """Inside each child: record every collective with the phase it ran in, and a weak reference to what each
    all-gather filled, to see afterwards whether the gathered weights were freed."""
    def wrap(name: str, real):
        def hooked(*args, **kwargs):
            _EVENTS["calls"].append((_EVENTS["phase"], name))
            out = real(*args, **kwargs)
            if name.startswith("all_gather") and _EVENTS["phase"] == "forward" and args:
                outputs = args[0] if isinstance(args[0], list) else [args[0]]
                _EVENTS["gathered"] += [weakref.ref(t) for t in outputs if isinstance(t, torch.Tensor)]
            return out
        return hooked

    for name in ("all_gather_single", "all_gather_into_tensor", "all_gather", "reduce_scatter_single",
                 "reduce_scatter_tensor", "reduce_scatter", "all_reduce", "broadcast"):
        setattr(dist, name, wrap(name, getattr(dist, name)))


# ---------------------------------------------------------------- exercise 1: padded shards of the gradient


FLATTEN_HINT = ("flatten_padded: torch.cat of every tensor's reshape(-1), then zeros up to the smallest multiple "
                "of world_size (F.pad or torch.cat with torch.zeros); shard: elements [rank * n, (rank + 1) * n) "
                "with n = flat.numel() // world_size")
GRADIENT_HINT = ("flatten the gradients with flatten_padded, dist.reduce_scatter_single(out, flat) into a tensor of "
                 "flat.numel() // world_size elements (it sums piece r of every rank's buffer into rank r's out), "
                 "then divide by world_size: the ranks' mean gradient is the whole batch's")


def _flatten_problems(flatten_padded, shard) -> list[str]:
    params = [p.detach() for p in make_model().parameters()]
    want_flat = torch.cat([p.reshape(-1) for p in params])
    total = want_flat.numel()
    for ws in (1, 2, 3, 4):
        flat = flatten_padded(params, ws)
        size = padded_numel(total, ws)
        if not isinstance(flat, torch.Tensor) or flat.dim() != 1:
            return [f"flatten_padded(params, {ws}) returned {type(flat).__name__}"
                    + (f" of shape {tuple(flat.shape)}" if isinstance(flat, torch.Tensor) else "")
                    + ", expected a 1-D tensor"]
        if flat.numel() != size:
            why = ("it must divide by world_size, or the ranks' shards differ in size" if flat.numel() % ws else
                   "pad only up to the smallest multiple of world_size")
            return [f"flatten_padded(params, {ws}) has {flat.numel()} elements for {total} parameters, expected "
                    f"{size}: {why}"]
        if not torch.equal(flat[:total], want_flat):
            return [f"flatten_padded(params, {ws}): its first {total} elements are not the parameters in order "
                    f"(max |diff| {max_difference(flat[:total], want_flat):.2e}): concatenate p.reshape(-1) in order"]
        if flat[total:].abs().sum() != 0:
            return [f"flatten_padded(params, {ws}): its padding (elements {total}-{size - 1}) is not zero"]
        pieces = [shard(flat, r, ws) for r in range(ws)]
        for r, piece in enumerate(pieces):
            n = size // ws
            if not isinstance(piece, torch.Tensor) or piece.shape != (n,):
                got = tuple(piece.shape) if isinstance(piece, torch.Tensor) else type(piece).__name__
                return [f"shard(flat, {r}, {ws}) is {got}, expected ({n},): every rank's shard has the same size"]
            if not torch.equal(piece, flat[r * n:(r + 1) * n]):
                return [f"shard(flat, {r}, {ws}) is not elements {r * n}-{(r + 1) * n - 1} of flat: rank r holds the "
                        "r-th contiguous piece"]
    return []


def _gradient_run(gradient_shard) -> Callable[[int, int], object]:
    def fn(rank: int, world_size: int):
        model = make_model()
        x, y = local_batch(1, rank, world_size)
        loss_fn(model(x), y).backward()
        _EVENTS.update(phase="step", calls=[], gathered=[])
        result = gradient_shard(list(model.parameters()), rank, world_size)
        return {"shard": result, "calls": sorted({name for _, name in _EVENTS["calls"]})}
    return fn


def _gradient_problems(world_: world.World, want_flat: torch.Tensor) -> list[str]:
    ws = world_.world_size
    want = reference_flatten_padded([want_flat], ws).chunk(ws)
    model = make_model()
    local = []
    for r in range(ws):  # what each rank's own gradient would be, for the hint
        model.zero_grad()
        x, y = local_batch(1, r, ws)
        loss_fn(model(x), y).backward()
        local.append(reference_flatten_padded([p.grad for p in model.parameters()], ws).chunk(ws)[r])
    out = []
    for r, (result, expected) in enumerate(zip(world_.results, want, strict=True)):
        got = result["shard"]
        if not isinstance(got, torch.Tensor):
            return [f"on {ws} ranks, rank {r}'s gradient_shard returned {type(got).__name__}, expected a tensor"]
        if got.shape != expected.shape:
            return [f"on {ws} ranks, rank {r}'s gradient shard has shape {tuple(got.shape)}, expected "
                    f"{tuple(expected.shape)} (the padded flat gradient of {want_flat.numel()} elements / {ws})"]
        if differences(got, expected, **GRAD_TOL):
            diff = max_difference(got, expected)
            if not differences(got, expected * ws, **GRAD_TOL):
                why = f"it is {ws} times the mean gradient: divide the reduce-scattered sum by world_size"
            elif not differences(got, local[r], **GRAD_TOL):
                why = "it is this rank's own gradient, not reduced over the ranks: reduce-scatter it"
            else:
                why = "it is not the mean over the ranks of piece r of the flat gradient"
            out.append(f"on {ws} ranks, rank {r}'s gradient shard differs from piece {r} of the whole batch's "
                       f"gradient by up to {diff:.2e}: {why}")
    return out


def check_gradient_shards(flatten_padded, shard, gradient_shard, work) -> bool:
    ex = "ex1_shard_gradients"
    if not _callable(ex, flatten_padded, shard, gradient_shard):
        return False
    try:
        problems = _flatten_problems(flatten_padded, shard)
    except NotImplementedError:
        return LAB.report(ex, False, f"not answered yet: flatten_padded or shard still raises NotImplementedError. "
                          f"Hint: {FLATTEN_HINT}")
    except Exception as e:  # the learner's bug is a failed check, not a crash
        return LAB.report(ex, False, f"flatten_padded or shard raised {type(e).__name__}: {e}. Hint: {FLATTEN_HINT}")
    if problems:
        return LAB.report(ex, False, f"{problems[0]}. Hint: {FLATTEN_HINT}")
    want = single_process_gradient(1)
    rows = []
    for ws in WORLDS:
        w = run_world(_gradient_run(gradient_shard), _logs(work, f"ex1/world{ws}"), ws, prepare=_watch_collectives)
        if w.unanswered():
            return LAB.report(ex, False, f"not answered yet: gradient_shard still raises NotImplementedError. Hint: "
                              f"{GRADIENT_HINT}")
        if not w.ok:
            return LAB.report(ex, False, f"on {ws} ranks, {w.failure()}. Hint: {GRADIENT_HINT}")
        problems = _gradient_problems(w, want)
        if problems:
            more = f" (and {len(problems) - 1} more rank(s))" if len(problems) > 1 else ""
            return LAB.report(ex, False, f"{problems[0]}{more}. Hint: {GRADIENT_HINT}")
        calls = w.results[0]["calls"]
        if not any(name.startswith("reduce_scatter") for name in calls):
            return LAB.report(ex, False, f"on {ws} ranks the shards are right, but gradient_shard called "
                              f"{', '.join(calls) or 'no collective'} and no reduce-scatter: an all-reduce leaves "
                              "every rank the whole gradient, and sends as much as a reduce-scatter and an "
                              "all-gather together. Hint: " + GRADIENT_HINT)
        worst = max(max_difference(r["shard"], e) for r, e in zip(w.results, reference_flatten_padded([want], ws)
                                                                  .chunk(ws), strict=True))
        rows.append(f"  {ws} ranks: {want.numel()} gradients padded to {padded_numel(want.numel(), ws)}, "
                    f"{padded_numel(want.numel(), ws) // ws} per rank; max |diff| from one process {worst:.1e}")
    return LAB.report(ex, True, "every rank holds its piece of the whole batch's mean gradient:\n" + "\n".join(rows))


# ---------------------------------------------------------------- exercise 2: the sharded AdamW


ADAMW_HINT = ("in step(): this rank's gradient shard (exercise 1), the AdamW update of this rank's shard of the "
              "flat parameters only (t += 1; p *= 1 - lr * weight_decay; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) "
              "g^2; p -= lr / (1 - b1^t) * m / (sqrt(v / (1 - b2^t)) + eps)), then dist.all_gather_single of "
              "the updated shards into a full flat buffer, copied into every parameter")


def _adamw_run(optimizer_cls) -> Callable[[int, int], object]:
    def fn(rank: int, world_size: int):
        model = make_model()
        params = list(model.parameters())
        opt = optimizer_cls(params, rank, world_size, **ADAMW)
        steps = []
        for step in range(1, STEPS + 1):
            for p in params:
                p.grad = None
            x, y = local_batch(step, rank, world_size)
            loss_fn(model(x), y).backward()
            opt.step()
            steps.append({n: p.detach().clone() for n, p in model.named_parameters()})
        held = held_tensors(opt, params + [p.grad for p in params])
        return {"params": steps, "state_bytes": sum(held.values()), "tensors": sorted(held.values(), reverse=True)}
    return fn


def _flat(params: dict) -> torch.Tensor:
    return torch.cat([params[n].reshape(-1) for n in names()])


def _variants() -> dict[str, list[dict]]:
    """Plausible wrong optimizers, for a hint that names the mistake."""
    lr, betas, eps, wd = ADAMW["lr"], ADAMW["betas"], ADAMW["eps"], ADAMW["weight_decay"]
    return {
        "Adam with L2 regularisation (weight_decay * p added to the gradient, as torch.optim.Adam does): AdamW "
        "decays the weights themselves, p *= 1 - lr * weight_decay, outside the Adam update":
            single_process_adamw(optimizer=lambda ps: torch.optim.Adam(ps, lr=lr, betas=betas, eps=eps,
                                                                       weight_decay=wd)),
        "AdamW without weight decay: apply p *= 1 - lr * weight_decay before the update":
            single_process_adamw(optimizer=lambda ps: torch.optim.AdamW(ps, lr=lr, betas=betas, eps=eps,
                                                                        weight_decay=0.0)),
        "AdamW with the weight decay not multiplied by lr: p *= 1 - lr * weight_decay, not 1 - weight_decay":
            single_process_adamw(optimizer=lambda ps: torch.optim.AdamW(ps, lr=lr, betas=betas, eps=eps,
                                                                        weight_decay=wd / lr)),
    }


def _adamw_problems(w: world.World, want: list[dict]) -> list[str]:
    ws = w.world_size
    start = _flat({n: p.detach() for n, p in make_model().named_parameters()})
    total = start.numel()
    n = padded_numel(total, ws) // ws
    for r, result in enumerate(w.results):
        if not isinstance(result, dict) or len(result.get("params", [])) != STEPS:
            return [f"on {ws} ranks, rank {r} returned no parameters"]
    for r, result in enumerate(w.results):
        if torch.equal(_flat(result["params"][0]), start):
            return [f"{_on(ws)}, rank {r}'s parameters did not change in step 1: copy the all-gathered flat "
                    "buffer back into the model's parameters (param.copy_(view) under torch.no_grad())"]
    # the ranks must agree with each other: the all-gather gives every rank every shard
    for r in range(1, ws):
        for s in range(STEPS):
            mine, first = _flat(w.results[r]["params"][s]), _flat(w.results[0]["params"][s])
            if not torch.equal(mine, first):
                changed = (_flat(w.results[r]["params"][0]) != start).nonzero().flatten()
                own = bool(len(changed)) and changed.min() >= r * n and changed.max() < (r + 1) * n
                why = (f"after step 1 rank {r}'s parameters changed only in its own shard (elements {r * n}-"
                       f"{min((r + 1) * n, total) - 1}): all-gather the updated shards into every rank's parameters"
                       if own else "every rank must end each step with the same, full, updated parameters")
                return [f"on {ws} ranks, rank {r}'s parameters differ from rank 0's after step {s + 1} by up to "
                        f"{max_difference(mine, first):.2e}: {why}"]
    for s in range(STEPS):
        got_step = w.results[0]["params"][s]
        diffs = [line for n in names()
                 for line in differences(got_step.get(n), want[s][n], name=f"{n} after step {s + 1}", **PARAM_TOL)]
        if diffs:
            got = [_flat(p) for p in w.results[0]["params"]]
            named = next((why for why, steps in _variants().items()
                          if all(max_difference(g, _flat(v)) <= 10 * PARAM_TOL["atol"] for g, v in zip(got, steps,
                                                                                               strict=True))), None)
            return [f"{_on(ws)}, rank 0's parameters differ from torch.optim.AdamW's on one process: "
                    + first_lines(diffs, 2) + (f". Your update matches {named}" if named else "")]
    return []


def _bytes_problems(worlds: dict[int, world.World]) -> tuple[list[str], list[str]]:
    total = param_count()
    one = worlds[1].results[0]["state_bytes"]
    full = adamw_state_bytes()
    rows = [f"  1 rank: {one:,} bytes of optimizer state (torch.optim.AdamW: {full:,})"]
    if one < 8 * total:
        return [f"on 1 rank your optimizer holds {one:,} bytes of tensors, but AdamW's two moments of {total} fp32 "
                f"parameters take {8 * total:,}: keep the state as tensors in attributes of the optimizer object "
                "(self.exp_avg = ...), where the check can measure it"], rows
    for ws, w in worlds.items():
        if ws == 1:
            continue
        share = padded_numel(total, ws) // ws
        allowed = math.ceil(one * share / total) + STATE_SLACK
        got = [r["state_bytes"] for r in w.results]
        rows.append(f"  {ws} ranks: {', '.join(f'{b:,}' for b in got)} bytes per rank (one rank's / {ws}, "
                    f"padded: {one * share / total:,.0f})")
        if max(got) > allowed:
            r = got.index(max(got))
            biggest = ", ".join(f"{b:,}" for b in w.results[r]["tensors"][:4])
            return [f"on {ws} ranks, rank {r} holds {max(got):,} bytes of optimizer state, one rank holds {one:,}: "
                    f"each of {ws} ranks may hold at most {allowed:,} (its {share} of {padded_numel(total, ws)} "
                    f"padded elements, plus {STATE_SLACK} bytes of scalars). Its largest tensors: {biggest} bytes. "
                    "Keep Adam's moments only for this rank's shard, and no full-size buffer between steps"], rows
    return [], rows


def check_sharded_adamw(optimizer_cls, work) -> bool:
    ex = "ex2_sharded_adamw"
    if not _callable(ex, optimizer_cls):
        return False
    want = single_process_adamw()
    worlds = {}
    for ws in (*WORLDS, 1):  # 1 rank last: the others' hints are sharper, its bytes are the baseline
        w = run_world(_adamw_run(optimizer_cls), _logs(work, f"ex2/world{ws}"), ws)
        if w.unanswered():
            return LAB.report(ex, False, "not answered yet: ShardedAdamW (or a function it calls) still raises "
                              f"NotImplementedError. Hint: {ADAMW_HINT}")
        if not w.ok:
            return LAB.report(ex, False, f"{_on(ws)}, {w.failure()}. Hint: {ADAMW_HINT}")
        problems = _adamw_problems(w, want)
        if problems:
            return LAB.report(ex, False, f"{problems[0]}. Hint: {ADAMW_HINT}")
        worlds[ws] = w
    problems, rows = _bytes_problems(worlds)
    if problems:
        return LAB.report(ex, False, problems[0] + "\n" + "\n".join(rows))
    worst = max(max_difference(_flat(p), _flat(q)) for w in worlds.values() for r in w.results
                for p, q in zip(r["params"], want, strict=True))
    return LAB.report(ex, True, f"on 1, 2 and 4 ranks the parameters equal torch.optim.AdamW's for {STEPS} steps "
                      f"(max |diff| {worst:.1e}, allowed {PARAM_TOL['atol']:.0e}), and each rank keeps 1/N of the "
                      "optimizer state:\n" + "\n".join(rows))


# ---------------------------------------------------------------- exercise 3: one FSDP unit


FSDP_HINT = ("__init__ keeps only self.shard = nn.Parameter(this rank's piece of flatten_padded([weight, bias]), "
             "cloned); forward all-gathers the full flat buffer, unflattens weight and bias, computes F.linear and "
             "lets the full buffer go; backward all-gathers it again, computes the input's gradient and the flat "
             "[weight, bias] gradient, reduce-scatters that and divides by world_size (a torch.autograd.Function "
             "does all of it)")


def _still_alive(refs: list, wait: float = 1.0) -> list[int]:
    """The bytes of the gathered buffers still alive. Gloo's worker thread lets go of a collective's tensors a
    moment after the call returns, so a buffer counts as kept only if it outlives `wait` seconds."""
    deadline = time.perf_counter() + wait
    while True:
        alive = [t.untyped_storage().nbytes() for ref in refs if (t := ref()) is not None]
        if not alive or time.perf_counter() > deadline:
            return alive
        time.sleep(0.002)


def _fsdp_run(unit_cls) -> Callable[[int, int], object]:
    def fn(rank: int, world_size: int):
        _EVENTS.update(phase="setup", calls=[], gathered=[])
        model = make_model()
        units = []
        for i, m in enumerate(model):
            if isinstance(m, torch.nn.Linear):
                model[i] = unit_cls(m, rank, world_size)
                units.append(model[i])
        held_before = [held_bytes(u) for u in units]
        shards = [getattr(u, "shard", None) for u in units]
        opt = torch.optim.SGD(model.parameters(), lr=SGD_LR)
        steps = []
        for step in range(1, FSDP_STEPS + 1):
            opt.zero_grad()
            x, y = local_batch(step, rank, world_size)
            _EVENTS["phase"], _EVENTS["gathered"] = "forward", []
            output = model(x)
            loss = loss_fn(output, y)
            _EVENTS["phase"] = "between"
            alive = _still_alive(_EVENTS["gathered"])
            _EVENTS["phase"] = "backward"
            loss.backward()
            _EVENTS["phase"] = "step"
            grads = [None if s is None or s.grad is None else s.grad.detach().clone() for s in shards]
            steps.append({"output": output.detach(), "loss": loss.item(), "grads": grads, "kept": alive})
            opt.step()
        opt.zero_grad()
        calls = {(phase, name): 0 for phase, name in _EVENTS["calls"]}
        for key in _EVENTS["calls"]:
            calls[key] += 1
        return {"steps": steps, "held_before": held_before, "held_after": [held_bytes(u) for u in units],
                "shard_numel": [None if s is None else s.numel() for s in shards], "calls": calls}
    return fn


def _unit_sizes(ws: int) -> list[int]:
    return [padded_numel(m.weight.numel() + m.bias.numel(), ws) // ws for m in _linears(make_model())]


def _fsdp_problems(w: world.World, want: list[dict]) -> tuple[list[str], str]:
    ws = w.world_size
    sizes = _unit_sizes(ws)
    rows = GLOBAL_BATCH // ws
    r0 = w.results[0]
    if r0["shard_numel"] != sizes:
        return [f"on {ws} ranks the units' `shard` parameters have {r0['shard_numel']} elements, expected {sizes}: "
                "self.shard = this rank's piece of flatten_padded([linear.weight, linear.bias], world_size)"], ""
    for r, result in enumerate(w.results):
        for s, (got, ref) in enumerate(zip(result["steps"], want, strict=True)):
            _, y = local_batch(s + 1, r, ws)
            out_ref = ref["output"][r * rows:(r + 1) * rows]
            at = f"step {s + 1}, rank {r} of {ws}"
            if d := differences(got["output"], out_ref, name="output", **GRAD_TOL):
                return [f"{at}: {d[0]} from one process on the same rows"], ""
            if d := differences(got["loss"], loss_fn(out_ref, y).item(), name="loss", **GRAD_TOL):
                return [f"{at}: {d[0]}"], ""
            shards = [reference_flatten_padded([g], ws).chunk(ws)[r] for g in ref["grads"]]
            if not isinstance(got["grads"], list) or any(not isinstance(g, torch.Tensor) for g in got["grads"]):
                return [f"{at}: a unit's shard has no gradient after backward: backward must return the "
                        "shard's gradient"], ""
            d = [line for u, (g, e) in enumerate(zip(got["grads"], shards, strict=True))
                 for line in differences(g, e, name=f"unit {u}'s shard.grad", **GRAD_TOL)]
            if d:
                scaled = not differences(got["grads"], [t * ws for t in shards], **GRAD_TOL)
                why = (f": it is {ws} times the mean, divide the reduce-scattered sum by world_size" if scaled else
                       ": shard.grad must be this rank's piece of the mean over the ranks of the flat [weight, bias] "
                       "gradient")
                return [f"{at}: {first_lines(d, 2)}{why}"], ""
    for r, result in enumerate(w.results):
        for when in ("held_before", "held_after"):
            for u, (held, size) in enumerate(zip(result[when], sizes, strict=True)):
                if held > 4 * size + STATE_SLACK:
                    moment = "right after it was built" if when == "held_before" else f"after {FSDP_STEPS} steps"
                    return [f"on {ws} ranks, rank {r}'s unit {u} holds {held:,} bytes of tensors {moment}, its shard "
                            f"is {4 * size:,}: keep only the shard between uses (not the Linear, not the full "
                            "weight)"], ""
    for r, result in enumerate(w.results):
        for s, got in enumerate(result["steps"]):
            if got["kept"]:
                return [f"on {ws} ranks, rank {r} still holds {len(got['kept'])} all-gathered buffer(s) "
                        f"({sum(got['kept']):,} bytes) after the forward of step {s + 1}, until the backward: the "
                        "full weights are kept for backward. Save only the input and the shard "
                        "(ctx.save_for_backward(x, w_shard)) and all-gather again in backward"], ""
        gathers = sum(v for (phase, name), v in result["calls"].items() if phase == "backward"
                      and name.startswith("all_gather"))
        if gathers < len(sizes) * FSDP_STEPS:
            return [f"on {ws} ranks, rank {r}'s backward all-gathered {gathers} time(s) in {FSDP_STEPS} steps, "
                    f"expected {len(sizes)} per step (one per unit): after freeing the weights, backward needs them "
                    "again"], ""
    per_step = {}
    for (phase, name), v in sorted(r0["calls"].items()):
        if phase in ("forward", "backward"):
            per_step.setdefault(phase, []).append(f"{v // FSDP_STEPS} {name}")
    count = "; ".join(f"{phase}: {', '.join(calls)}" for phase, calls in sorted(per_step.items(), reverse=True))
    return [], f"  {ws} ranks: shards of {sizes} elements; per step, {count}"


def check_fsdp_unit(unit_cls, work) -> bool:
    ex = "ex3_fsdp_unit"
    if not _callable(ex, unit_cls):
        return False
    want = single_process_sgd()
    rows = []
    for ws in WORLDS:
        w = run_world(_fsdp_run(unit_cls), _logs(work, f"ex3/world{ws}"), ws, prepare=_watch_collectives)
        if w.unanswered():
            return LAB.report(ex, False, "not answered yet: FSDPLinear (or a function it calls) still raises "
                              f"NotImplementedError. Hint: {FSDP_HINT}")
        if not w.ok:
            return LAB.report(ex, False, f"on {ws} ranks, {w.failure()}. Hint: {FSDP_HINT}")
        problems, row = _fsdp_problems(w, want)
        if problems:
            return LAB.report(ex, False, f"{problems[0]}. Hint: {FSDP_HINT}")
        rows.append(row)
    return LAB.report(ex, True, f"outputs, losses and gradient shards equal one process for {FSDP_STEPS} SGD steps; "
                      "between uses each unit holds only its shard, and no gathered weight outlives its forward:\n"
                      + "\n".join(rows))


def summary() -> None:
    LAB.summary()
