"""How long a checkpoint save stalls training: synchronous against asynchronous (DCP async_save) saves.

    .venv/bin/python benchmarks/checkpoint_stall.py                       # 41 MB of state, 5 rounds per mode
    .venv/bin/python benchmarks/checkpoint_stall.py --hidden 512 --layers 8 --json stall.json   # 310 MB

Trains a Llama-shaped model (`fmlab.checkpoint.stall.stall_preset`: hidden 256 and 4 layers by default, 3.4M
parameters, so 41 MB of weights and AdamW moments) on a fixed synthetic batch and saves once, after step
`--save-at`, with `fmlab.checkpoint.Checkpointer`: `save(...)` (synchronous) or `save(...,
asynchronous=True)`. Rounds alternate between the two modes so that load from other jobs falls on both alike;
each round builds the model afresh and warms DCP up with one untimed save. Per mode it reports the medians over
rounds of: the stall of the step that saves (the time spent in the save call), the save's total time (from the
call to the commit: rename + COMPLETE marker + pruning), a normal step, and how much longer than normal the
steps overlapping the background write took. `--json` writes every round's step trace for a notebook to plot
(the same records as `fmlab.checkpoint.measure_stall`, which notebook 08 calls).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

FIGURES = ("stall_s", "save_total_s", "baseline_step_s", "overlap_s")


def main(argv: list[str] | None = None) -> int:
    from fmlab.checkpoint.stall import MODES, trace_save
    from fmlab.environment import describe

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, default=256, help="model width (state = 12 bytes per parameter)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=4, help="sequences per step")
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--steps", type=int, default=14, help="steps per round")
    p.add_argument("--save-at", type=int, default=5, help="the step after which the round saves")
    p.add_argument("--rounds", type=int, default=5, help="rounds per mode, alternating")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    p.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine")
    p.add_argument("--folder", default="", help="where checkpoints are written (default: a temporary folder)")
    p.add_argument("--json", default="", help="write the summary and every round's step trace to this file")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    settings = dict(steps=args.steps, save_at=args.save_at, hidden=args.hidden, layers=args.layers,
                    batch=args.batch, seq_len=args.seq_len, device=args.device)
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="fmlab-stall-") as scratch:
        where = Path(args.folder or scratch)
        for r in range(args.rounds):
            for mode in MODES:
                runs[mode].append(trace_save(mode == "async", where / f"{mode}-{r}", **settings))
    first = runs["sync"][0]
    summary = {"state_mb": round(first["state_bytes"] / 1e6, 2), "params": first["params"],
               "threads": torch.get_num_threads(), "rounds": args.rounds, **settings}
    for mode in MODES:
        for k in FIGURES:
            summary[f"{mode}_{k.removesuffix('_s')}_ms"] = round(1e3 * statistics.median(x[k] for x in runs[mode]), 1)
    summary["stall_ratio"] = round(summary["sync_stall_ms"] / summary["async_stall_ms"], 1)
    machine = describe()
    print(f"machine: {machine['cpu_cores']} cores, {machine['accelerator']}, torch {machine['torch']}")
    print(f"state: {summary['params']:,} parameters, {summary['state_mb']} MB of weights and AdamW moments; "
          f"median of {args.rounds} rounds per mode")
    print(f"{'mode':<6} {'step stall':>11} {'save total':>11} {'normal step':>12} {'slower steps while writing':>27}")
    for mode in MODES:
        print(f"{mode:<6} {summary[f'{mode}_stall_ms']:>8.1f} ms {summary[f'{mode}_save_total_ms']:>8.1f} ms "
              f"{summary[f'{mode}_baseline_step_ms']:>9.1f} ms {summary[f'{mode}_overlap_ms']:>24.1f} ms")
    print(f"the saving step is stalled {summary['stall_ratio']}x less with asynchronous saves")
    if args.json:
        out = {"summary": summary, "machine": {k: machine[k] for k in ("cpu_cores", "accelerator", "torch")},
               "runs": runs}
        Path(args.json).write_text(json.dumps(out, indent=1))
        print(f"traces: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
