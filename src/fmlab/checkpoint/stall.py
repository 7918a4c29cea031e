"""How long a checkpoint stalls training: a synchronous save against an asynchronous one (DCP `async_save`).

    from fmlab.checkpoint import measure_stall
    result = measure_stall()          # both modes on a ~40 MB training state: a few seconds on 2 CPU cores
    result["state_mb"], result["sync"]["stall_s"], result["async"]["stall_s"], result["async"]["save_total_s"]
    result["async"]["trace"]          # one record per step: start_s, compute_s, save_s (what a notebook plots)

Each mode trains the same Llama-shaped model (hidden 256, 4 layers: 3.4M parameters, i.e. 41 MB of weights
and AdamW moments) from the same seed on one fixed synthetic batch, and saves once with
`fmlab.checkpoint.Checkpointer` after step `save_at`. The step that saves is stalled by the save call:
the whole write and commit when synchronous; only the copy of the state to CPU memory when asynchronous (the
files are written and committed by a background thread while the next steps run; on a small machine that
thread shares the cores with training, so those steps are slower, on 2 CPU cores by about what the synchronous
save took: `overlap_s` adds that up). Before the timed run an
untimed save warms up DCP's code paths, so the figure is that of a save in the middle of a run.
`benchmarks/checkpoint_stall.py` repeats this and writes the traces to JSON.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from fmlab.checkpoint.checkpointer import Checkpointer
from fmlab.models import build_model
from fmlab.plan.catalog import ModelPreset

MODES = ("sync", "async")


def stall_preset(hidden: int = 256, layers: int = 4):
    """A Llama-shaped model just big enough that a save takes visibly long (12 bytes of state per parameter)."""
    return ModelPreset(f"stall-{hidden}x{layers}", "llama", hidden=hidden, layers=layers, heads=4, vocab=512,
                       seq_len=128, intermediate=(8 * hidden // 3 + 15) // 16 * 16,
                       source="fmlab.checkpoint.stall: a model sized for checkpoint timing")


def state_bytes(model, optimizer) -> int:
    """Bytes of the tensors a checkpoint of `model` and `optimizer` writes (weights and optimizer state)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    for state in optimizer.state.values():
        total += sum(v.numel() * v.element_size() for v in state.values() if isinstance(v, torch.Tensor))
    return total


def _summary(trace: list[dict], save_at: int, started: float, pending) -> dict:
    """The stall of the saving step, the save's total time, and the slow-down of the steps it overlapped."""
    baseline = statistics.median(r["compute_s"] for r in trace if r["step"] not in (1, save_at))
    saving = next(r for r in trace if r["step"] == save_at)
    out = {"baseline_step_s": baseline, "stall_s": saving["save_s"], "save_call_at_s": saving["start_s"]
           + saving["compute_s"]}
    if pending is None:  # synchronous: the call is the whole save
        out.update(save_total_s=saving["save_s"], written_at_s=None, committed_at_s=out["save_call_at_s"]
                   + saving["save_s"], overlap_s=0.0)
        return out
    committed = pending.committed - started
    out.update(save_total_s=pending.total_seconds, written_at_s=pending.written - started,
               committed_at_s=committed)
    # steps that ran while the write was in flight, and how much longer than usual they took
    out["overlap_s"] = sum(max(0.0, r["compute_s"] - baseline) for r in trace
                           if r["step"] > save_at and r["start_s"] < committed)
    out["steps_overlapped"] = sum(1 for r in trace if r["step"] > save_at and r["start_s"] < committed)
    return out


def trace_save(asynchronous: bool, folder: str | Path, *, steps: int = 14, save_at: int = 5, hidden: int = 256,
               layers: int = 4, batch: int = 4, seq_len: int = 64, seed: int = 0, warm_up: bool = True,
               device: str = "cpu") -> dict:
    """Train `steps` steps, save once after step `save_at` (synchronously or not) into `folder`; the step trace.

    Returns {"mode", "trace": [{"step", "start_s", "compute_s", "save_s"}...], "stall_s", "save_total_s",
    "baseline_step_s", "overlap_s", "committed_at_s", ...}; times in seconds from the start of step 1. On a
    GPU (`device="cuda"`) every step is synchronised before it is timed, and staging copies to CPU memory."""
    if not 1 < save_at < steps:
        raise ValueError(f"save_at must lie strictly between step 1 (warm-up) and the last step {steps}, got {save_at}")
    model = build_model(stall_preset(hidden, layers), seed=seed).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95))
    x = torch.randint(0, 512, (batch, seq_len), generator=torch.Generator().manual_seed(seed)).to(device)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    folder = Path(folder)
    ckpt = Checkpointer(folder / ("async" if asynchronous else "sync"), keep_last=1)

    def step() -> None:
        model(input_ids=x, labels=x).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync()

    step()  # optimizer state exists from here on: every save below writes the full state
    if warm_up:  # an untimed save first: DCP's imports and first-call costs are not part of the figure
        warm = Checkpointer(folder / "warm-up", keep_last=1)
        warm.save(0, model, optimizer, asynchronous=asynchronous)
        warm.finish()
    trace, pending = [], None
    started = time.perf_counter()
    for i in range(1, steps + 1):
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        if i == save_at:
            if asynchronous:
                pending = ckpt.save_async(i, model, optimizer)
            else:
                ckpt.save(i, model, optimizer)
        t2 = time.perf_counter()
        trace.append({"step": i, "start_s": t0 - started, "compute_s": t1 - t0, "save_s": t2 - t1})
    t = time.perf_counter()
    ckpt.finish()
    out = {"mode": "async" if asynchronous else "sync", "device": device, "trace": trace,
           "finish_wait_s": time.perf_counter() - t,
           "state_bytes": state_bytes(model, optimizer), "params": sum(p.numel() for p in model.parameters()),
           "checkpoint": str(ckpt.path_for(save_at))}
    out.update(_summary(trace, save_at, started, pending))
    return out


def measure_stall(*, steps: int = 14, save_at: int = 5, hidden: int = 256, layers: int = 4, batch: int = 4,
                  seq_len: int = 64, folder: str | Path | None = None, seed: int = 0,
                  device: str = "cpu") -> dict[str, Any]:
    """Both modes, synchronous then asynchronous, on the same model and batch: {"state_mb", "params", "sync":
    trace_save(...), "async": trace_save(...)}. The checkpoints go to a temporary folder unless `folder`."""
    kwargs = dict(steps=steps, save_at=save_at, hidden=hidden, layers=layers, batch=batch, seq_len=seq_len, seed=seed,
                  device=device)
    with tempfile.TemporaryDirectory(prefix="fmlab-stall-") as scratch:
        where = Path(folder) if folder is not None else Path(scratch)
        result: dict[str, Any] = {mode: trace_save(mode == "async", where / mode, **kwargs) for mode in MODES}
    result["state_mb"] = result["sync"]["state_bytes"] / 1e6
    result["params"] = result["sync"]["params"]
    result["settings"] = kwargs
    return result


def stall_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per mode for a table: stall of the saving step, total save time, a normal step."""
    return [{"mode": mode, "state MB": round(result["state_mb"], 1),
             "step stall (ms)": round(1e3 * result[mode]["stall_s"], 1),
             "save total (ms)": round(1e3 * result[mode]["save_total_s"], 1),
             "normal step (ms)": round(1e3 * result[mode]["baseline_step_s"], 1),
             "slower steps while writing (ms)": round(1e3 * result[mode]["overlap_s"], 1)} for mode in MODES]
