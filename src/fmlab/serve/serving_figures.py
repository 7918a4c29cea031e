"""Module 10's measured figures for the slides: the eval curve and the serving latency, from a recorded run.

    from fmlab.serve.serving_figures import eval_curve_figure, latency_figure
    eval_curve_figure()      # training and held-out loss of the tiny Llama, every checkpoint
    latency_figure()         # p50/p95 latency and throughput against concurrency, both server settings

The numbers come from measured.json next to this file, written by `benchmarks/bench_serving.py --write` on the
development machine (its date, CPUs and load average are stored with them), so a deck builds the same bytes
every time without training or serving anything. Rerun the benchmark to refresh them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

MEASURED = Path(__file__).resolve().parent / "measured.json"


def load() -> dict:
    if not MEASURED.exists():
        raise FileNotFoundError(f"{MEASURED} is missing: run .venv/bin/python benchmarks/bench_serving.py --write")
    return json.loads(MEASURED.read_text())


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def eval_curve_figure():
    """Training loss against held-out loss at every checkpoint, and the untrained baseline."""
    m = load()
    fig = _figure(7.5, 3.6)
    ax = fig.subplots()
    train = {int(k): v for k, v in m["train_losses"].items()}
    held = {int(k): v for k, v in m["heldout_losses"].items()}
    ax.plot(sorted(train), [train[k] for k in sorted(train)], "-", alpha=0.6, label="training loss (the batch just learned)")
    ax.plot(sorted(held), [held[k] for k in sorted(held)], "o-", label="held-out loss (never trained on)")
    ax.axhline(m["baseline_loss"], color="grey", linestyle=":",
               label=f"untrained: perplexity {math.exp(m['baseline_loss']):.0f}")
    last = max(held)
    ax.annotate(f"perplexity {math.exp(held[last]):.0f}", (last, held[last]), textcoords="offset points",
                xytext=(-60, 18), arrowprops={"arrowstyle": "->"})
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per token)")
    ax.set_title(f"tiny Llama, {m['steps']} steps on 2 CPU cores ({m['machine']['date'][:10]})")
    ax.legend(fontsize=8)
    return fig


def latency_figure():
    """Latency p50/p95 and throughput against concurrent requests, continuous batching against one at a time."""
    m = load()
    fig = _figure(10, 3.6)
    left, right = fig.subplots(1, 2)
    for label, rows in m["serving"].items():
        c = [r["concurrency"] for r in rows]
        line, = left.plot(c, [r["latency p95 (ms)"] for r in rows], "o-", label=f"{label}: p95")
        left.plot(c, [r["latency p50 (ms)"] for r in rows], "s--", color=line.get_color(), alpha=0.7,
                  label=f"{label}: p50")
        right.plot(c, [r["tokens/s (all requests)"] for r in rows], "o-", color=line.get_color(), label=label)
    levels = [r["concurrency"] for r in next(iter(m["serving"].values()))]
    for a in (left, right):
        a.set_xscale("log", base=2)
        a.set_xticks(levels)
        a.set_xticklabels([str(x) for x in levels])
        a.set_xlabel("concurrent streaming requests")
    left.set_ylabel(f"ms per request ({m['max_tokens']} tokens)")
    left.set_title(f"latency, {m['server']}")
    right.set_ylabel("tokens/s, all requests")
    right.set_title(f"throughput ({m['machine']['cpus']} CPU cores)")
    left.legend(fontsize=7)
    right.legend(fontsize=8)
    return fig


__all__ = ["MEASURED", "eval_curve_figure", "latency_figure", "load"]
