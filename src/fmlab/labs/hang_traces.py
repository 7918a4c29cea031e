"""Hangs made to happen on 2-4 forked gloo processes in a few seconds, and the collective traces they leave.

    from fmlab.labs.hang_traces import run_drill
    drill = run_drill("hang", "runs/hangs", world_size=4, rank=2, step=3)   # about 3 s on 2 cores
    print(drill.report)                  # "rank 2 stopped at step 3: never entered collective #5 ..."
    drill.traces                         # the rank-N.json the surviving ranks wrote (fmlab.hangs.analysis reads them)

Each rank runs a few "training steps" of two same-sized gradient all-reduces (a bucketed backward) under the
engine's own collective trace (fmlab.hangs.trace: PyTorch's Flight Recorder plus the step of each
collective), with a collective timeout of `timeout` seconds (2 here; 80 in fmlab.train after its first step):

- "hang": at the start of `step`, `rank` stops joining collectives (it sleeps, then leaves quietly). To its
  peers that is a frozen process, a dead-silent host or a deadlock: they time out, write their traces, and
  find in the job's store that this rank never published one.
- "skip": at `step`, `rank` skips its second all-reduce (a rank-dependent branch around a collective). The
  buckets are the same size, so gloo pairs its next all-reduce with the others' skipped one without a word:
  the job runs on a step out of step until the last collective, where the others wait for a partner that
  already finished. `rank` writes its trace when it finishes (it is alive), the others when they time out.

The same drills on the training entry point itself are fmlab.train's `--fault hang|freeze|kill|skip`
(tests/train/test_faults.py); this harness is for a notebook cell, where torchrun's start-up costs seconds.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from fmlab.hangs.analysis import HangReport, analyze, load_traces

KINDS = ("hang", "skip")
STEPS = 4
BUCKET = 4096  # floats per gradient bucket


@dataclass
class HangDrill:
    kind: str
    world_size: int
    rank: int  # the rank the fault struck (the answer)
    step: int
    folder: Path  # the rank-N.json traces
    traces: list[dict]
    report: HangReport
    seconds: float


def _steps(rank: int, world_size: int, kind: str, fault_rank: int, fault_step: int, folder: str,
           timeout: float) -> None:
    import torch
    import torch.distributed as dist

    from fmlab.hangs.trace import CollectiveTrace

    trace = CollectiveTrace(folder=folder, timeout_s=timeout)
    grads = [torch.ones(BUCKET), torch.ones(BUCKET)]
    try:
        for step in range(1, STEPS + 1):
            trace.at_step(step)
            if kind == "hang" and rank == fault_rank and step == fault_step:
                time.sleep(timeout + 0.5)  # its peers give up after `timeout`; then it leaves without a word
                os._exit(0)
            for i, g in enumerate(grads):
                if kind == "skip" and rank == fault_rank and step == fault_step and i == 1:
                    continue
                dist.all_reduce(g)
        if kind == "skip" and rank == fault_rank:  # finished a collective early: alive, it records its trace
            trace.on_failure("finished its steps while the others still wait", rank, world_size)
            time.sleep(timeout)  # alive until the others time out
            os._exit(0)
    except RuntimeError as e:
        trace.on_failure(e, rank, world_size)
        os._exit(0)


def run_drill(kind: str, logs: str | Path, world_size: int = 2, rank: int = 1, step: int = 3,
              timeout: float = 2.0) -> HangDrill:
    """Make `rank` hang or skip a collective at `step` on `world_size` gloo processes; the traces and what the
    analyzer makes of them."""
    from fmlab.hangs.trace import BUFFER_VARIABLE
    from fmlab.labs.world import run_world

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if not (2 <= world_size <= 4 and 0 <= rank < world_size and 1 <= step <= STEPS):
        raise ValueError(f"use 2 to 4 processes, a rank of them and a step 1..{STEPS}; got world_size={world_size}, "
                         f"rank={rank}, step={step}")
    os.environ.setdefault(BUFFER_VARIABLE, "2000")  # the children's Flight Recorder (they inherit it by fork)
    folder = Path(logs) / "collective-traces"
    start = time.perf_counter()
    run_world(lambda r, w: _steps(r, w, kind, rank, step, str(folder), timeout), logs, world_size,
              timeout=timeout + 20, collective_timeout=timeout)
    traces = load_traces(folder) if folder.is_dir() else []
    report = analyze(traces, world_size) if traces else HangReport("none", [], "", None, lines=["no traces"])
    return HangDrill(kind, world_size, rank, step, folder, traces, report, time.perf_counter() - start)
