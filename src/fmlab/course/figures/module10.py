"""Module 10's deck figures: measured, read from fmlab/serve/measured.json (benchmarks/bench_serving.py).

Registered in fmlab.course.figures.FIGURES; the package's docstring says how figures are drawn and added.
"""

from __future__ import annotations

from fmlab.course.figures.canvas import drawable


def eval_curve():
    """Module 10: the tiny Llama's training loss against its held-out loss at every checkpoint (measured: read
    from fmlab/serve/measured.json, written by benchmarks/bench_serving.py --write)."""
    from fmlab.serve.serving_figures import eval_curve_figure

    return drawable(eval_curve_figure())


def serving_latency():
    """Module 10: p50/p95 latency and throughput of `transformers serve` against concurrent streaming requests,
    continuous batching against one request at a time (measured, as eval_curve)."""
    from fmlab.serve.serving_figures import latency_figure

    return drawable(latency_figure())
