"""Checks for labs/lab_04_data_parallel.ipynb: your own DDP, written by hand and run on 2 gloo processes.

    lab04.check_naive(average_gradients, work)                     # ex1: all-reduce every gradient after backward
    lab04.check_buckets(BucketedDDP, work)                         # ex2: hooks, byte-capped buckets, async overlap
    lab04.check_no_sync(AccumulatingDDP, accumulate_step, work)    # ex3: gradient accumulation without communication
    lab04.summary()                                                # raises LabIncomplete while any check fails

What each check runs. The learner's code trains the lab's small MLP (`make_model`: four Linear layers of
different sizes, fixed seed) for STEPS steps of SGD with momentum on WORLD=2 forked gloo processes (the lab
harness, `fmlab.labs.world`), each rank on its half of every global batch of GLOBAL_BATCH samples. The
reference is one process training the same model on the whole global batch (`reference_single`). After every
step, each rank's parameters must equal the reference's and the mean of the ranks' losses must equal the
reference's loss, within ATOL + RTOL x |value| (float32: the 2-rank run adds the same numbers in another order,
each rank averaging its half first, so the results agree to ~1e-7, not bit for bit; a forgotten division by
the world size is off by ~3e-3 after one step).

What each check counts. Inside every process, `prepare` wraps `torch.distributed.all_reduce` (and the other
collectives) and `torch.autograd.backward`; the check's loop adds a tensor hook on every parameter that counts
the gradients the backward pass has produced. Each collective is recorded with its step, which backward pass
of the step it came in (exercise 3's micro-batches), whether it was called while backward was running and
how many gradients were still to come, its size and `async_op`. Exercise 2 then demands one all-reduce per
bucket carrying exactly that bucket's values, all asynchronous, every one but the last launched while the
backward pass still had gradients to compute (overlap); exercise 3 demands no communication at all in the
micro-batches run under `no_sync()`. The bucket assignment is compared with `reference_buckets` at four caps;
it is the assignment PyTorch's DDP rebuilds after its first iteration (tests/course/test_lab04.py checks
that against `DistributedDataParallel` itself).

Time: each check forks one world of 2 processes (~0.1 s) that trains for a fraction of a second; the three
checks take about 3 s on a 2-core laptop (the first includes the harness's one-off warm-up).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from fmlab.labs import Lab, world
from fmlab.labs.world import World, differences, first_lines, max_difference

LAB = Lab("lab 04", ["ex1_naive_ddp", "ex2_bucketed_ddp", "ex3_no_sync"])

# The run every check trains.
WORLD = 2
STEPS = 5
SEED = 0
SIZES = (8, 32, 64, 32, 4)  # Linear(8, 32), Linear(32, 64), Linear(64, 32), Linear(32, 4), Tanh between
GLOBAL_BATCH = 16  # samples per optimizer step, over all ranks
MICRO_BATCHES = 4  # exercise 3: each rank's 8 samples in 4 micro-batches of 2
LR, MOMENTUM = 0.1, 0.9
BUCKET_CAP = 4096  # bytes: exercise 2 trains with this cap (3 buckets)
CAPS = (1, 512, BUCKET_CAP, 25 * 2**20)  # the caps whose buckets are compared: 8, 4, 3 and 1 buckets
# Tolerance on parameters and losses (float32, summation order differs; see the docstring).
ATOL, RTOL = 1e-6, 1e-5
# Bounds on every run: the whole world, and one collective waiting for a peer.
WORLD_TIMEOUT = 40.0
COLLECTIVE_TIMEOUT = 10.0


# ---------------------------------------------------------------- the given pieces: model, optimizer, data


def make_model() -> torch.nn.Module:
    """The lab's model, with the same initial weights on every rank (a fixed seed)."""
    torch.manual_seed(SEED)
    layers: list[torch.nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(SIZES, SIZES[1:], strict=False)):
        layers.append(torch.nn.Linear(fan_in, fan_out))
        if i < len(SIZES) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def make_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def loss_fn(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The mean squared error: a mean over the samples, so a rank's loss is the mean over its slice."""
    return torch.nn.functional.mse_loss(prediction, target)


def global_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole batch of step `step` (from 1): what the single process trains on."""
    g = torch.Generator().manual_seed(SEED * 1_000_003 + step)
    x = torch.randn(GLOBAL_BATCH, SIZES[0], generator=g)
    mix = torch.linspace(-1.0, 1.0, SIZES[0] * SIZES[-1]).reshape(SIZES[0], SIZES[-1])
    return x, torch.sin(x @ mix) + 0.05 * torch.randn(GLOBAL_BATCH, SIZES[-1], generator=g)


def local_batch(step: int, rank: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s slice of the global batch: rows rank*B/W to (rank+1)*B/W, as a DistributedSampler would."""
    x, y = global_batch(step)
    per_rank = GLOBAL_BATCH // world_size
    rows = slice(rank * per_rank, (rank + 1) * per_rank)
    return x[rows], y[rows]


def micro_batches(step: int, rank: int, world_size: int, count: int = MICRO_BATCHES) -> list[tuple]:
    """Rank `rank`'s slice of the global batch in `count` micro-batches of the same size (exercise 3)."""
    x, y = local_batch(step, rank, world_size)
    return list(zip(x.chunk(count), y.chunk(count), strict=True))


def parameters_of(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


_SINGLE: dict[str, object] = {}


def reference_single() -> dict:
    """One process, the whole global batch, STEPS steps: the losses, and the parameters after each step."""
    if not _SINGLE:
        model = make_model()
        optimizer = make_optimizer(model)
        out: dict = {"initial": parameters_of(model), "losses": [], "params": []}
        for step in range(1, STEPS + 1):
            x, y = global_batch(step)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            out["losses"].append(loss.item())
            out["params"].append(parameters_of(model))
        _SINGLE.update(out)
    return dict(_SINGLE)


# ---------------------------------------------------------------- the lab's own solution


def reference_average_gradients(model: torch.nn.Module) -> None:
    """Exercise 1: after backward, every gradient becomes the mean of the ranks' gradients."""
    world_size = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)  # the sum over the ranks, in place, on every rank
            p.grad /= world_size


def reference_buckets(model: torch.nn.Module, bucket_cap_bytes: int) -> list[list[str]]:
    """Exercise 2's buckets: the parameters in reverse order of registration (the order backward produces their
    gradients), a bucket closed as soon as it holds at least bucket_cap_bytes; the last may hold less."""
    return _group(reversed(list(model.named_parameters())), bucket_cap_bytes)


def _group(named_params, bucket_cap_bytes: int) -> list[list[str]]:
    """Walk (name, parameter) in the order given; close a bucket once it holds >= bucket_cap_bytes."""
    buckets, current, size = [], [], 0
    for name, p in named_params:
        current.append(name)
        size += p.numel() * p.element_size()
        if size >= bucket_cap_bytes:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


class ReferenceDDP:
    """Exercises 2 and 3: gradient hooks, byte-capped buckets, one asynchronous all-reduce per bucket launched
    from the hook of its last gradient, `finish()` to wait and copy the averages back, `no_sync()`."""

    def __init__(self, model: torch.nn.Module, bucket_cap_bytes: int):
        self.model = model
        self.sync = True  # no_sync() turns it off
        self.params = dict(model.named_parameters())
        self.buckets = reference_buckets(model, bucket_cap_bytes)
        self.bucket_of = {name: i for i, names in enumerate(self.buckets) for name in names}
        self.waiting = [len(names) for names in self.buckets]  # gradients each bucket still waits for
        self.next = 0  # the next bucket to launch: every rank launches them in the same order
        self.launched = []  # (work, flat tensor, names)
        for name, p in self.params.items():
            p.register_post_accumulate_grad_hook(functools.partial(self._hook, name))

    def _hook(self, name: str, param: torch.Tensor) -> None:
        if not self.sync:
            return  # inside no_sync(): the gradient stays here, accumulating
        self.waiting[self.bucket_of[name]] -= 1
        while self.next < len(self.buckets) and self.waiting[self.next] == 0:
            names = self.buckets[self.next]
            flat = torch.cat([self.params[n].grad.flatten() for n in names])
            self.launched.append((dist.all_reduce(flat, async_op=True), flat, names))
            self.next += 1

    def finish(self) -> None:
        world_size = dist.get_world_size()
        for work, flat, names in self.launched:
            work.wait()
            flat /= world_size
            offset = 0
            for n in names:
                grad = self.params[n].grad
                grad.copy_(flat[offset:offset + grad.numel()].view_as(grad))
                offset += grad.numel()
        self.launched, self.next = [], 0
        self.waiting = [len(names) for names in self.buckets]

    @contextlib.contextmanager
    def no_sync(self):
        self.sync = False
        try:
            yield
        finally:
            self.sync = True


def reference_accumulate_step(ddp, optimizer: torch.optim.Optimizer, batches: list[tuple]) -> float:
    """Exercise 3: one optimizer step over several micro-batches; only the last one communicates."""
    total = 0.0
    for i, (x, y) in enumerate(batches):
        last = i == len(batches) - 1
        with contextlib.nullcontext() if last else ddp.no_sync():
            loss = loss_fn(ddp.model(x), y) / len(batches)  # the mean over the micro-batches
            loss.backward()
        total += loss.item()
    ddp.finish()
    optimizer.step()
    optimizer.zero_grad()
    return total


# ---------------------------------------------------------------- counting collectives inside each process


class Recorder:
    """What one process communicated: every collective with its step, backward pass and timing."""

    def __init__(self):
        self.calls: list[dict] = []
        self.step = 0
        self.backwards = 0  # backward passes started in this step
        self.backwards_per_step: dict[int, int] = {}
        self.in_backward = False
        self.produced = 0  # gradients the running backward pass has produced so far
        self.total = 0  # gradients one backward pass produces

    def start_step(self, step: int) -> None:
        self.step, self.backwards = step, 0

    def record(self, op: str, tensor, async_op: bool) -> None:
        numel = tensor.numel() if isinstance(tensor, torch.Tensor) else 0
        self.calls.append({"op": op, "step": self.step, "backward": self.backwards, "during": self.in_backward,
                           "to_come": self.total - self.produced if self.in_backward else 0, "of": self.total,
                           "numel": numel, "async_op": bool(async_op)})

    def count_gradients(self, model: torch.nn.Module) -> None:
        """A tensor hook on every parameter: it runs as the parameter's gradient is produced, before it is
        accumulated into .grad and before the learner's post-accumulate hook."""
        params = [p for p in model.parameters() if p.requires_grad]
        self.total = len(params)

        def produced(grad):
            self.produced += 1

        for p in params:
            p.register_hook(produced)


REC = Recorder()  # replaced in each process by `_install`

COLLECTIVES = ("broadcast", "all_gather", "all_gather_into_tensor", "reduce", "reduce_scatter",
               "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "all_reduce_coalesced", "send", "recv",
               "isend", "irecv")


def _install(rank: int, logs: Path) -> None:
    """Runs inside each process before the learner's code: wrap the collectives and backward to record them."""
    global REC
    REC = rec = Recorder()
    real_all_reduce = dist.all_reduce

    def all_reduce(*args, **kwargs):
        tensor = kwargs.get("tensor", args[0] if args else None)
        rec.record("all_reduce", tensor, kwargs.get("async_op", args[3] if len(args) > 3 else False))
        return real_all_reduce(*args, **kwargs)

    def wrap(name: str, real: Callable) -> Callable:
        def collective(*args, **kwargs):
            rec.record(name, args[0] if args else None, kwargs.get("async_op", False))
            return real(*args, **kwargs)
        return collective

    dist.all_reduce = all_reduce
    for name in COLLECTIVES:
        if hasattr(dist, name):
            setattr(dist, name, wrap(name, getattr(dist, name)))
    real_backward = torch.autograd.backward

    def backward(*args, **kwargs):
        rec.backwards += 1
        rec.backwards_per_step[rec.step] = rec.backwards
        rec.in_backward, rec.produced = True, 0
        try:
            return real_backward(*args, **kwargs)
        finally:
            rec.in_backward = False

    torch.autograd.backward = backward


def run_world(fn: Callable[[int, int], object], logs: str | os.PathLike) -> World:
    """Run fn(rank, world_size) on WORLD forked gloo processes (the lab harness), recording their collectives."""
    return world.run_world(fn, logs, WORLD, WORLD_TIMEOUT, prepare=_install, collective_timeout=COLLECTIVE_TIMEOUT)


# ---------------------------------------------------------------- the runs each check makes


def _train_naive(average_gradients, rank: int, world_size: int) -> dict:
    model = make_model()
    optimizer = make_optimizer(model)
    REC.count_gradients(model)
    out: dict = {"losses": [], "params": []}
    for step in range(1, STEPS + 1):
        REC.start_step(step)
        x, y = local_batch(step, rank, world_size)
        loss = loss_fn(model(x), y)
        loss.backward()
        average_gradients(model)
        optimizer.step()
        optimizer.zero_grad()
        out["losses"].append(loss.item())
        out["params"].append(parameters_of(model))
    out["calls"] = REC.calls
    return out


def _train_bucketed(ddp_class, rank: int, world_size: int) -> dict:
    out: dict = {"buckets": {}, "losses": [], "params": []}
    for cap in CAPS:
        out["buckets"][cap] = _names(ddp_class(make_model(), cap).buckets)
    model = make_model()
    optimizer = make_optimizer(model)
    REC.count_gradients(model)
    ddp = ddp_class(model, BUCKET_CAP)
    for step in range(1, STEPS + 1):
        REC.start_step(step)
        x, y = local_batch(step, rank, world_size)
        loss = loss_fn(model(x), y)
        loss.backward()
        ddp.finish()
        optimizer.step()
        optimizer.zero_grad()
        out["losses"].append(loss.item())
        out["params"].append(parameters_of(model))
    out["calls"] = REC.calls
    return out


def _train_accumulating(ddp_class, accumulate_step, rank: int, world_size: int) -> dict:
    model = make_model()
    optimizer = make_optimizer(model)
    REC.count_gradients(model)
    ddp = ddp_class(model, BUCKET_CAP)
    out: dict = {"buckets": _names(ddp.buckets), "losses": [], "params": []}
    for step in range(1, STEPS + 1):
        REC.start_step(step)
        loss = accumulate_step(ddp, optimizer, micro_batches(step, rank, world_size))
        out["losses"].append(float(loss))
        out["params"].append(parameters_of(model))
    out["calls"] = REC.calls
    out["backwards"] = dict(REC.backwards_per_step)
    return out


def _names(buckets) -> list[list[str]]:
    try:
        return [[str(n) for n in names] for names in buckets]
    except TypeError:
        raise TypeError(f"buckets must be a list of lists of parameter names, got {buckets!r:.80}") from None


# ---------------------------------------------------------------- comparing with the single process


def _ratio(got: dict, initial: dict, want: dict, name: str) -> float:
    """How the first update of `name` compares with the single process's (2.0: twice as large)."""
    g, w = (got[name] - initial[name]).double().flatten(), (want[name] - initial[name]).double().flatten()
    return float(g @ w / (w @ w)) if float(w @ w) > 0 else math.nan


def _why(ratio: float, micro: int) -> str:
    """A guess at the cause of a first update `ratio` times the reference's."""
    causes = {WORLD: f"the gradients were summed over the {WORLD} ranks, not averaged: divide by the world size",
              1 / WORLD: "the gradients were divided by the world size twice",
              0.0: "the gradients never reached .grad: copy the averaged values back into each .grad"}
    if micro > 1:
        causes[micro] = (f"the {micro} micro-batches' losses were summed, not averaged: divide each loss by the "
                         "number of micro-batches")
        causes[WORLD * micro] = (f"summed over the {WORLD} ranks and over the {micro} micro-batches: divide by both")
    for factor, cause in causes.items():
        if abs(ratio - factor) < 0.02 * max(1.0, factor):
            return cause
    return ""


def numbers_problems(results: list[dict], micro: int = 1, bucketed: bool = True) -> tuple[list[str], float]:
    """What differs from the single process (the first step that differs), and the largest |difference| over
    every parameter and loss when nothing does."""
    ref = reference_single()
    names = list(ref["initial"])
    for r, result in enumerate(results):
        if len(result["losses"]) != STEPS or len(result["params"]) != STEPS:
            return [f"rank {r} returned {len(result['losses'])} steps, expected {STEPS}"], math.inf
    for step in range(STEPS):
        # The ranks first: after an all-reduce, every rank holds the same weights.
        apart = [n for n in names if any(max_difference(result["params"][step][n], results[0]["params"][step][n])
                                         > ATOL for result in results[1:])]
        if apart:
            if not bucketed:
                why = "all-reduce every parameter's .grad, in place, on every rank"
            elif len(apart) < len(names):
                why = (f"{'these gradients were' if len(apart) > 1 else 'this gradient was'} not averaged over the "
                       "ranks (did their bucket launch, and did its result go back into .grad?)")
            elif step == 0:
                why = ("none of the gradients came back averaged: torch.cat copies, so copy each slice of the "
                       "averaged flat tensor back into its .grad")
            else:
                why = (f"step 1 was right, step {step + 1} averaged nothing: finish() must reset what the hooks "
                       "count (the countdown of every bucket, the next bucket, the list of launched ones)")
            return [f"after step {step + 1} the ranks hold different weights ({', '.join(apart)}): {why}"], math.inf
        for r, result in enumerate(results):
            found = [line for n in names for line in differences(
                result["params"][step][n], ref["params"][step][n], ATOL, RTOL, f"rank {r}'s {n} after step {step + 1}")]
            if found:
                previous = ref["params"][step - 1] if step else ref["initial"]
                causes = {_why(_ratio(result["params"][step], previous, ref["params"][step], n), micro) for n in names}
                guess = f". Every update is off by the same factor: {causes.pop()}" if len(causes) == 1 and "" not in \
                    causes else ""
                return ["compared with one process on the whole batch, " + first_lines(found, 2) + guess], math.inf
        mean_loss = sum(result["losses"][step] for result in results) / len(results)
        want = ref["losses"][step]
        if not math.isclose(mean_loss, want, rel_tol=RTOL, abs_tol=ATOL):
            return [f"step {step + 1}: the ranks' mean loss is {mean_loss:.7g}, the single process's {want:.7g}: "
                    "return the mean loss over this rank's samples"], math.inf
    worst = max(max_difference(result["params"][s][n], ref["params"][s][n])
                for result in results for s in range(STEPS) for n in names)
    worst = max(worst, max(abs(sum(result["losses"][s] for result in results) / len(results) - ref["losses"][s])
                           for s in range(STEPS)))
    return [], worst


def _failed(world_: World, what: str, hint: str) -> str:
    if world_.unanswered():
        return f"not answered yet: {what} still raises NotImplementedError. Hint: {hint}"
    return f"the run failed: {world_.failure()}. Hint: {hint}"


def _bucket_sizes(buckets: list[list[str]]) -> list[int]:
    params = dict(make_model().named_parameters())
    return [sum(params[n].numel() for n in names if n in params) for names in buckets]


# ---------------------------------------------------------------- exercise 1: the naive DDP


def check_naive(average_gradients, work) -> bool:
    ex = "ex1_naive_ddp"
    hint = ("for every parameter, dist.all_reduce(p.grad) (a sum over the ranks, in place) and then divide it by "
            "dist.get_world_size()")
    if not callable(average_gradients):
        return LAB.report(ex, False, "give the function average_gradients itself (no parentheses)")
    run = run_world(lambda rank, ws: _train_naive(average_gradients, rank, ws), Path(work) / "ex1")
    if not run.ok:
        return LAB.report(ex, False, _failed(run, "average_gradients", hint))
    problems, worst = numbers_problems(run.results, bucketed=False)
    if problems:
        return LAB.report(ex, False, first_lines(problems) + f". Hint: {hint}")
    calls = [c for c in run.results[0]["calls"] if c["step"] == 1 and c["op"] == "all_reduce"]
    during = sum(c["during"] for c in calls)
    return LAB.report(ex, True, f"{STEPS} steps on {WORLD} processes equal one process on the whole batch of "
                      f"{GLOBAL_BATCH} (largest |difference| {worst:.1e}, allowed {ATOL:.0e} + {RTOL:.0e} x |value|). "
                      f"Your code called all_reduce {len(calls)} times per step, {during} of them while backward "
                      "was running: the network idled during the backward pass, then the step waited for the "
                      "network. Exercise 2 overlaps the two")


# ---------------------------------------------------------------- exercise 2: buckets, hooks, overlap


def _bucket_problems(got: dict, model: torch.nn.Module) -> list[str]:
    out = []
    for cap in CAPS:
        want = reference_buckets(model, cap)
        mine = got.get(cap)
        if mine == want:
            continue
        forward = _group(model.named_parameters(), cap)
        if mine is not None and (mine == forward or sorted(map(sorted, mine)) == sorted(map(sorted, forward))
                                 != sorted(map(sorted, want))):
            why = ("you grouped the parameters in registration order; walk them in reverse, the order backward "
                   "produces their gradients, so that the first bucket fills first")
        elif mine == want[:-1]:
            why = "the last parameters are in no bucket: the last bucket may hold less than the cap, keep it too"
        elif mine and sum(map(len, mine)) == sum(map(len, want)) and len(mine) > len(want):
            why = ("a bucket closes once it holds AT LEAST the cap: add the parameter, then close the bucket if its "
                   "bytes (numel x element_size) reach bucket_cap_bytes")
        else:
            why = ("walk model.named_parameters() in reverse; add each parameter to the current bucket; close the "
                   "bucket once its bytes (numel x element_size) reach bucket_cap_bytes; keep the last one too")
        shown = repr(mine) if len(repr(mine)) < 300 else repr(mine)[:300] + "..."
        out.append(f"with bucket_cap_bytes={cap:,} your buckets are {shown}, expected {want}: {why}")
    return out


def _collective_problems(calls: list[dict], buckets: list[list[str]],
                         overlap: bool = True) -> tuple[list[str], str]:
    """What is wrong with the all-reduces of each step (one line, the first step that is wrong), and a summary."""
    sizes = _bucket_sizes(buckets)
    summary = ""
    for step in range(1, STEPS + 1):
        mine = [c for c in calls if c["step"] == step and c["op"] == "all_reduce"]
        others = sorted({c["op"] for c in calls if c["step"] == step and c["op"] != "all_reduce"})
        where = f"step {step}"
        if others:
            return [f"{where} called {', '.join(others)}: a bucket needs only dist.all_reduce"], summary
        if len(mine) != len(buckets):
            return [f"{where} issued {len(mine)} all_reduce call(s) for your {len(buckets)} buckets: one per bucket, "
                    "with all of the bucket's gradients flattened into one tensor"], summary
        if [c["numel"] for c in mine] != sizes:
            return [f"{where}'s all_reduce calls carried {[c['numel'] for c in mine]} values, your buckets hold "
                    f"{sizes} (in bucket order): flatten a bucket's gradients with torch.cat and launch the buckets "
                    "in order"], summary
        blocking = sum(not c["async_op"] for c in mine)
        if blocking:
            return [f"{where}: {blocking} of the {len(mine)} all_reduce calls had async_op=False, so backward waited "
                    "for each bucket's communication: pass async_op=True, keep the Work it returns and wait() on it "
                    "in finish()"], summary
        early = [c for c in mine if c["during"] and c["to_come"] > 0]
        if overlap and len(early) < len(buckets) - 1:
            late = len(mine) - len(early)
            return [f"{where}: {late} of the {len(mine)} all_reduce calls started after the backward pass had "
                    "produced every gradient, so nothing overlapped: launch each bucket from the hook of its last "
                    "gradient, not after backward"], summary
        if step == 1:
            summary = (f"{len(mine)} asynchronous all_reduce calls per step ({', '.join(map(str, sizes))} values), "
                       + ", ".join(f"bucket {i} launched with {c['to_come']} of {c['of']} gradients still to come"
                                   for i, c in enumerate(mine) if c["during"]))
    return [], summary


def check_buckets(ddp_class, work) -> bool:
    ex = "ex2_bucketed_ddp"
    hint = ("buckets: reversed named_parameters, closed at >= bucket_cap_bytes; each parameter's "
            "register_post_accumulate_grad_hook counts down its bucket, and the last gradient launches "
            "dist.all_reduce(torch.cat(grads), async_op=True); finish() waits, divides by the world size and copies "
            "back")
    if not callable(ddp_class):
        return LAB.report(ex, False, "give the class BucketedDDP itself (no parentheses)")
    run = run_world(lambda rank, ws: _train_bucketed(ddp_class, rank, ws), Path(work) / "ex2")
    if not run.ok:
        return LAB.report(ex, False, _failed(run, "BucketedDDP", hint))
    problems = _bucket_problems(run.results[0]["buckets"], make_model())
    if problems:
        return LAB.report(ex, False, first_lines(problems, 2))
    problems, worst = numbers_problems(run.results)
    if problems:
        return LAB.report(ex, False, first_lines(problems) + f". Hint: {hint}")
    buckets = run.results[0]["buckets"][BUCKET_CAP]
    problems, summary = _collective_problems(run.results[0]["calls"], buckets)
    if problems:
        return LAB.report(ex, False, first_lines(problems))
    counts = ", ".join(str(len(run.results[0]["buckets"][cap])) for cap in CAPS)
    return LAB.report(ex, True, f"your buckets at {len(CAPS)} caps are DDP's ({counts} buckets); with "
                      f"{BUCKET_CAP:,} bytes: {summary}; {STEPS} steps equal one process on the whole batch (largest "
                      f"|difference| {worst:.1e})")


# ---------------------------------------------------------------- exercise 3: accumulation without communication


def _accumulation_problems(result: dict) -> list[str]:
    buckets = result["buckets"]
    for step in range(1, STEPS + 1):
        passes = result["backwards"].get(step, 0)
        if passes != MICRO_BATCHES:
            return [f"step {step} ran {passes} backward pass(es) for {MICRO_BATCHES} micro-batches: one per "
                    "micro-batch"]
        early = [c for c in result["calls"] if c["step"] == step and c["backward"] < MICRO_BATCHES]
        if early:
            ops = sorted({c["op"] for c in early})
            return [f"micro-batches 1-{MICRO_BATCHES - 1} of step {step} issued {len(early)} "
                    f"{'/'.join(ops)} call(s): under no_sync() the hooks must not communicate (the gradients "
                    "accumulate locally in .grad; run the forward and backward of every micro-batch but the last "
                    "inside `with ddp.no_sync():`)"]
    last = [c for c in result["calls"] if c["backward"] == MICRO_BATCHES]
    problems, _ = _collective_problems(last, buckets, overlap=False)
    if problems:
        return [problems[0] + " (in the last micro-batch, outside no_sync())"]
    return []


def check_no_sync(ddp_class, accumulate_step, work) -> bool:
    ex = "ex3_no_sync"
    hint = ("no_sync() sets self.sync = False, yields, and sets it back in a finally; accumulate_step runs every "
            "micro-batch but the last under ddp.no_sync(), divides each loss by the number of micro-batches, then "
            "ddp.finish(), optimizer.step() and optimizer.zero_grad()")
    if not callable(ddp_class) or not callable(accumulate_step):
        return LAB.report(ex, False, "give the class AccumulatingDDP and the function accumulate_step (no parentheses)")
    run = run_world(lambda rank, ws: _train_accumulating(ddp_class, accumulate_step, rank, ws), Path(work) / "ex3")
    if not run.ok:
        return LAB.report(ex, False, _failed(run, "no_sync, accumulate_step or exercise 2's BucketedDDP", hint))
    problems = _accumulation_problems(run.results[0])
    if problems:
        return LAB.report(ex, False, first_lines(problems))
    problems, worst = numbers_problems(run.results, MICRO_BATCHES)
    if problems:
        return LAB.report(ex, False, first_lines(problems) + f". Hint: {hint}")
    n = len(run.results[0]["buckets"])
    return LAB.report(ex, True, f"{MICRO_BATCHES} micro-batches of {GLOBAL_BATCH // WORLD // MICRO_BATCHES} per rank "
                      f"and step: the first {MICRO_BATCHES - 1} communicated nothing, the last issued {n} all_reduce "
                      f"calls (one per bucket); {STEPS} steps equal one process on the whole batch of {GLOBAL_BATCH} "
                      f"(largest |difference| {worst:.1e})")


def summary() -> None:
    LAB.summary()
