"""The lab harness: run a learner's function on 2-4 real gloo processes and compare what came back.

    from fmlab.labs.world import run_world, differences

    world = run_world(lambda rank, world_size: my_step(rank, world_size), logs="runs/lab04/ex1", world_size=2)
    if not world.ok:
        print(world.failure())          # which rank raised what, or which collective hung, with the log's path
    problems = differences(world.results[0], reference, atol=1e-6)   # ["grad of 0.weight at step 3: max |diff| ..."]

The worlds are forked processes (`fmlab.parallel.forked`: why fork and not torchrun, what each child gets): a
lab's code is a function the learner just defined in a notebook cell, which no torchrun child could import.
This file adds what a check compares the results with: `differences`, `max_difference`, `first_lines`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from fmlab.parallel.forked import COLLECTIVE_TIMEOUT, WORLD_TIMEOUT, World, run_world  # noqa: F401 - the harness

# ---------------------------------------------------------------- comparing with a reference


def max_difference(got, want) -> float:
    """max |got - want| over two tensors (or numbers) of the same shape; inf when the shapes differ."""
    got, want = torch.as_tensor(got), torch.as_tensor(want)
    if got.shape != want.shape:
        return math.inf
    if got.numel() == 0:
        return 0.0
    return (got.detach().double() - want.detach().double()).abs().max().item()


def differences(got, want, atol: float = 1e-6, rtol: float = 1e-5, name: str = "result") -> list[str]:
    """What differs between a learner's result and the reference, one line per tensor that differs, naming it
    ("grads[1].weight: max |diff| 3.1e-02"); [] when everything is close. Walks dicts, lists and tuples."""
    if isinstance(want, Mapping):
        if not isinstance(got, Mapping):
            return [f"{name}: expected a dict with keys {sorted(map(str, want))[:6]}, got {type(got).__name__}"]
        missing = [k for k in want if k not in got]
        out = [f"{name}: missing {', '.join(map(str, missing[:6]))}"] if missing else []
        for k in want:
            if k in got:
                out += differences(got[k], want[k], atol, rtol, f"{name}[{k!r}]" if name else repr(k))
        return out
    if isinstance(want, Sequence) and not isinstance(want, str):
        if not isinstance(got, Sequence) or len(got) != len(want):
            return [f"{name}: expected {len(want)} items, got "
                    f"{len(got) if isinstance(got, Sequence) else type(got).__name__}"]
        out = []
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            out += differences(g, w, atol, rtol, f"{name}[{i}]")
        return out
    if isinstance(want, torch.Tensor) or isinstance(want, int | float):
        try:
            g = torch.as_tensor(got)
        except (TypeError, ValueError, RuntimeError):
            return [f"{name}: expected a tensor or number, got {type(got).__name__}"]
        w = torch.as_tensor(want)
        if g.shape != w.shape:
            return [f"{name}: shape {tuple(g.shape)}, expected {tuple(w.shape)}"]
        if not torch.allclose(g.detach().double(), w.detach().double(), atol=atol, rtol=rtol, equal_nan=True):
            return [f"{name}: max |diff| {max_difference(g, w):.2e} (allowed {atol:.0e} + {rtol:.0e} x |expected|)"]
        return []
    return [] if got == want else [f"{name}: {got!r}, expected {want!r}"]


def first_lines(problems: list[str], keep: int = 3) -> str:
    """The first `keep` problems joined for a hint, and how many more there are."""
    more = f" (and {len(problems) - keep} more)" if len(problems) > keep else ""
    return "; ".join(problems[:keep]) + more
