"""Measure data-preparation throughput against the number of share-nothing workers.

    from fmlab.data.throughput import measure_workers
    rows = measure_workers(files, [1, 2, 4], tokenizer="runs/tok", out_root="runs/bench")
    # [{"workers": 1, "seconds": 3.1, "tokens_per_second": 9.4e5, "speedup": 1.0, "identical": True}, ...]

Used by notebook 02 (the speed-up plot) and benchmarks/data_throughput.py. Each run prepares the same input
with the same tokenizer into the same folder, so the manifests must be equal (`identical`), and times the
whole call, starting the worker processes included (the fork server they start from is warmed up first).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from fmlab.data.corpus import DEFAULT_UNIT_BYTES
from fmlab.data.prepare import prepare, warm_up_workers


def measure_workers(files: Sequence[str | os.PathLike], workers: Sequence[int], tokenizer: str | os.PathLike,
                    out_root: str | os.PathLike, seq_len: int = 128, unit_bytes: int = DEFAULT_UNIT_BYTES,
                    repeats: int = 1, progress: bool = False) -> list[dict]:
    """Prepare `files` once per worker count (best of `repeats`); seconds, tokens/s, speed-up over the first."""
    out = Path(out_root) / "dataset"
    warm_up_workers()
    rows: list[dict] = []
    reference = None
    for w in workers:
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            manifest = prepare(files, out, seq_len, None, w, tokenizer=tokenizer, unit_bytes=unit_bytes,
                               progress=progress)
            best = min(best, time.perf_counter() - start)
        reference = reference or manifest
        rows.append({"workers": w, "seconds": best, "tokens": manifest["input_tokens"],
                     "tokens_per_second": manifest["input_tokens"] / best, "shards": len(manifest["shards"]),
                     "identical": manifest == reference})
    for row in rows:
        row["speedup"] = rows[0]["seconds"] / row["seconds"]
    return rows


def plot_speedup(rows: list[dict], cores: int | None = None, ax=None):
    """Measured speed-up against workers, beside the ideal (linear) and the machine's core count."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    workers = [r["workers"] for r in rows]
    ax.plot(workers, [r["speedup"] for r in rows], "o-", label="measured")
    ax.plot(workers, [w / workers[0] for w in workers], "--", color="gray", label="ideal (linear)")
    if cores:
        ax.axhline(cores / workers[0], color="tab:red", linestyle=":", label=f"{cores} cores on this machine")
    for r in rows:
        ax.annotate(f"{r['tokens_per_second'] / 1e6:.2f}M tok/s", (r["workers"], r["speedup"]),
                    textcoords="offset points", xytext=(5, -12), fontsize=8)
    ax.set_xticks(workers)
    ax.set_xlabel("share-nothing worker processes")
    ax.set_ylabel(f"speed-up over {workers[0]} worker(s) (x)")
    ax.set_title("Data preparation: tokenize + pack throughput vs workers")
    ax.legend()
    return ax
