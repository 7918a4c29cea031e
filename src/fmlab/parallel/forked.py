"""Run a function on N forked gloo processes and read back what each returned: the lab checks' harness, and the
measurements a notebook runs beside its kernel (fmlab.measure.load_memory).

    from fmlab.parallel.forked import run_world
    world = run_world(lambda rank, world_size: rank * 2, logs="runs/demo", world_size=2)
    world.ok, world.results, world.failure()

Why fork, not torchrun. torchrun's children import a module by name, and each torchrun world pays seconds of imports
on a 2-core laptop (torch, transformers: about 4 s). A forked child inherits the parent's memory: the function just
defined in a notebook cell and every imported module, in about 0.1 s. Forking is available on Linux and macOS (the
course's laptops and SageMaker Studio); the children never touch the parent's sockets and leave with `os._exit`.

Each child gets: its own process group (`os.setpgrp`: a timeout kills whatever it started), one thread
(`torch.set_num_threads(1)`, so N ranks share 2 cores), a gloo process group on 127.0.0.1 with a bounded
collective timeout (a rank that waits for a collective its peers never call fails instead of hanging), its
stdout and stderr in `<logs>/rank<r>.log`, and its return value saved with `torch.save` (tensors welcome) into
`<logs>/rank<r>.pt`. When one rank dies the others are killed at once, as torchrun's agent tears a job down; a
world past `timeout` is killed whole. `run_world` never raises for the function's errors: `World` says what
happened.

`prepare(rank, logs)`, when given, runs inside each child after the process group is up and before `fn`: a lab
installs its fault hooks there (lab 08) or counts collectives (lab 04). A child that writes `<logs>/rank<r>.fault`
says a fault fired deliberately, so its death is not reported as an error.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import shutil
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from fmlab.environment import free_port

WORLD_TIMEOUT = 60.0  # seconds a whole world may run
COLLECTIVE_TIMEOUT = 20.0  # seconds one collective waits for its peers


@dataclass
class World:
    """What one run of N processes left: exit codes (-9: SIGKILL), results, errors, faults fired."""

    logs: Path
    exitcodes: list[int | None]
    results: list[object]
    errors: list[str]
    fired: list[str]
    timed_out: bool
    seconds: float
    limit: float = WORLD_TIMEOUT

    @property
    def world_size(self) -> int:
        return len(self.exitcodes)

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(c == 0 for c in self.exitcodes)

    @property
    def fault(self) -> str:
        return next((f for f in self.fired if f), "")

    def unanswered(self) -> bool:
        """True when the learner's code still raises the template's NotImplementedError."""
        return any(e.startswith("NotImplementedError") for e in self.errors)

    def error_order(self) -> list[int]:
        """Ranks by when they failed, first first: the others' errors ("connection closed by peer") follow."""
        when = [f.stat().st_mtime_ns if (f := self.logs / f"rank{r}.error").exists() else math.inf
                for r in range(len(self.errors))]
        return sorted(range(len(self.errors)), key=lambda r: when[r])

    def failure(self) -> str:
        """Why the run did not finish, in a sentence (empty if it did)."""
        if self.timed_out:
            return (f"it ran past {self.limit:.0f} s and was killed: a rank waits for a collective (a barrier?) "
                    f"that another never calls (logs: {self.logs})")
        for r in self.error_order():
            if e := self.errors[r]:
                waited = (": every rank must call the same collectives, with tensors of the same shape, in the "
                          "same order" if "Timed out" in e or "timed out" in e else "")
                return f"rank {r} raised {e}{waited} (its traceback: {self.logs / f'rank{r}.log'})"
        for r, c in enumerate(self.exitcodes):
            if c not in (0, None) and not self.fired[r]:
                return f"rank {r} exited with code {c} (logs: {self.logs})"
        return ""


def _child(fn: Callable, rank: int, world_size: int, port: int, logs: Path, prepare: Callable | None,
           collective_timeout: float) -> None:
    os.setpgrp()  # a process group of its own: a timeout kills whatever it started
    log = open(logs / f"rank{rank}.log", "w", buffering=1)  # open until os._exit
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=collective_timeout))
        if prepare is not None:
            prepare(rank, logs)
        result = fn(rank, world_size)
        torch.save(result, logs / f"rank{rank}.pt.tmp")
        os.replace(logs / f"rank{rank}.pt.tmp", logs / f"rank{rank}.pt")
        if dist.is_initialized():  # rank 0 hosts the rendezvous store: nobody leaves before everyone is done
            dist.barrier()
            dist.destroy_process_group()
    except BaseException as e:  # whatever the learner's code raises
        traceback.print_exc()
        (logs / f"rank{rank}.error").write_text(f"{type(e).__name__}: {str(e).strip()[:300]}")
        log.flush()
        os._exit(1)
    log.flush()
    os._exit(0)  # no atexit handlers, no finalizers: the notebook kernel's sockets are not ours


def _kill(procs) -> None:
    for p in procs:
        if p.is_alive():
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                p.kill()


def _warm_up() -> None:
    """Import in the parent what a child's first optimizer step and torch.save import lazily (seconds of
    torch._dynamo), so that every forked child inherits it instead of importing it again."""
    if getattr(_warm_up, "done", False):
        return
    with torch.random.fork_rng():
        layer = torch.nn.Linear(2, 1)
        optimizer = torch.optim.AdamW(layer.parameters())
        layer(torch.ones(1, 2)).sum().backward()
        optimizer.step()
    _warm_up.done = True


def run_world(fn: Callable[[int, int], object], logs: str | os.PathLike, world_size: int = 2,
              timeout: float = WORLD_TIMEOUT, prepare: Callable[[int, Path], None] | None = None,
              collective_timeout: float = COLLECTIVE_TIMEOUT) -> World:
    """Run fn(rank, world_size) on `world_size` forked gloo processes; never raises for the learner's errors."""
    if not 1 <= world_size <= 8:
        raise ValueError(f"world_size must be 1 to 8 on a laptop, got {world_size}")
    if "fork" not in mp.get_all_start_methods():
        raise RuntimeError("the lab checks fork processes, which this platform cannot: run the labs on Linux or "
                           "macOS (SageMaker Studio, a laptop, WSL on Windows)")
    _warm_up()
    logs = Path(logs)
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    ctx = mp.get_context("fork")
    port = free_port()
    procs = [ctx.Process(target=_child, args=(fn, r, world_size, port, logs, prepare, collective_timeout),
                         daemon=True) for r in range(world_size)]
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork from the kernel's threads
        for p in procs:
            p.start()
    timed_out = False
    while any(p.is_alive() for p in procs):
        if any(p.exitcode not in (None, 0) for p in procs):
            _kill(procs)  # one rank died: the job is down, as torchrun's agent would have it
            break
        if time.perf_counter() - start > timeout:
            timed_out = True
            _kill(procs)
            break
        time.sleep(0.005)
    for p in procs:
        p.join()
    seconds = time.perf_counter() - start

    def text(name: str) -> list[str]:
        return [f.read_text() if (f := logs / f"rank{r}.{name}").exists() else "" for r in range(world_size)]

    def result(r: int):
        f = logs / f"rank{r}.pt"
        return torch.load(f, weights_only=False) if f.exists() else None  # our own children wrote these

    return World(logs, [p.exitcode for p in procs], [result(r) for r in range(world_size)], text("error"),
                 text("fault"), timed_out, seconds, timeout)
