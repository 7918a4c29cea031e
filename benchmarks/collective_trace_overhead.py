"""What the per-rank collective trace costs per training step: the tiny model, DDP on 2 gloo processes.

    .venv/bin/python benchmarks/collective_trace_overhead.py                 # 8 rounds x 40 steps, off/on alternating
    .venv/bin/python benchmarks/collective_trace_overhead.py --rounds 4 --json out.json

The trace (fmlab.hangs.trace) is PyTorch's Flight Recorder (TORCH_FR_BUFFER_SIZE entries, kept by
torch in C++ for every collective) plus one step mark per step in Python. Each round forks 2 fresh gloo
processes (fmlab.labs.world; the Flight Recorder's size is read when a process's first group forms), alternately
with the trace off (buffer 0, no marks) and on (2,000 entries, as fmlab.train keeps, and a mark per step). Each
rank trains the `tiny` preset wrapped in DDP for --steps steps of micro-batch 8 x 128 tokens (forward,
backward with DDP's all-reduce, AdamW), one torch thread, and times every step by the CPU time of the process
(the work done, whatever else the machine runs) and by the wall clock; the first 5 steps of a round are left
out. It prints the median step per round, the median over rounds of the on/off difference between
neighbouring rounds, the collectives each step issues (counted from the recorder), and what the recorder
holds per entry. Timings depend on the machine; they are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

WARMUP = 5


def _train(rank: int, world_size: int, steps: int, traced: bool) -> dict:
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from fmlab.hangs.trace import CollectiveTrace, flight_recorder_dump
    from fmlab.models import build_model
    from fmlab.plan import catalog

    preset = catalog.model("tiny")
    model = DistributedDataParallel(build_model(preset, seed=0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    trace = CollectiveTrace()
    gen = torch.Generator().manual_seed(rank)
    cpu, wall = [], []
    for step in range(1, steps + 1):
        x = torch.randint(0, preset.vocab, (8, 128), generator=gen)
        c0, w0 = time.process_time(), time.perf_counter()
        if traced:
            trace.at_step(step)
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    dump = flight_recorder_dump()
    entries = dump.get("entries", [])
    return {"cpu": cpu[WARMUP:], "wall": wall[WARMUP:], "entries": len(entries),
            "entry_bytes": len(json.dumps(entries[-1])) if entries else 0,
            "per_step": len([e for e in entries if e.get("profiling_name", "").startswith("gloo:")]) / steps}


def run_round(traced: bool, steps: int, logs: Path) -> dict:
    from fmlab.hangs.trace import BUFFER_VARIABLE
    from fmlab.labs.world import run_world

    os.environ[BUFFER_VARIABLE] = "2000" if traced else "0"
    world = run_world(lambda r, w: _train(r, w, steps, traced), logs, 2, timeout=300)
    if not world.ok:
        raise SystemExit(f"a round failed: {world.failure()}")
    ranks = world.results
    return {"traced": traced, "cpu_ms": 1000 * statistics.median(ranks[0]["cpu"] + ranks[1]["cpu"]),
            "wall_ms": 1000 * statistics.median(ranks[0]["wall"] + ranks[1]["wall"]),
            "entries": ranks[0]["entries"], "per_step": ranks[0]["per_step"], "entry_bytes": ranks[0]["entry_bytes"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="rounds, half off and half on, alternating")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            r = run_round(traced=i % 2 == 1, steps=args.steps, logs=Path(tmp) / f"round{i}")
            rounds.append(r)
            print(f"round {i}: trace {'on ' if r['traced'] else 'off'}  step {r['cpu_ms']:.2f} ms CPU, "
                  f"{r['wall_ms']:.2f} ms wall; recorder entries {r['entries']}", flush=True)
    pairs = [(rounds[i], rounds[i + 1]) for i in range(0, len(rounds) - 1, 2)]
    cpu_diff = statistics.median(on["cpu_ms"] - off["cpu_ms"] for off, on in pairs)
    wall_diff = statistics.median(on["wall_ms"] - off["wall_ms"] for off, on in pairs)
    off_cpu = statistics.median(off["cpu_ms"] for off, _ in pairs)
    on_round = next(r for r in rounds if r["traced"])
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
              "step_cpu_ms_off": off_cpu, "overhead_cpu_ms": cpu_diff, "overhead_wall_ms": wall_diff,
              "overhead_pct": 100 * cpu_diff / off_cpu, "collectives_per_step": on_round["per_step"],
              "entry_json_bytes": on_round["entry_bytes"], "rounds": rounds}
    print(f"\n{result['machine']}; tiny model, DDP, 2 gloo processes, {args.steps} steps per round")
    print(f"step with the trace off: {off_cpu:.2f} ms CPU (median over rounds)")
    print(f"trace on - off, median over {len(pairs)} neighbouring pairs: {cpu_diff:+.3f} ms CPU "
          f"({result['overhead_pct']:+.2f}%), {wall_diff:+.3f} ms wall per step")
    print(f"collectives per step: {on_round['per_step']:.1f}; one recorder entry as JSON: {on_round['entry_bytes']} bytes")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
