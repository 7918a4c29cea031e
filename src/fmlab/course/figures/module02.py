"""Module 2's deck figure: how much data Chinchilla asks of each model size, in tokens and bytes.

Registered in fmlab.course.figures.FIGURES; the package's docstring says how figures are drawn and added.
"""

from __future__ import annotations

from fmlab.course.figures.canvas import log_bars, new_figure, si
from fmlab.plan import catalog, compute

# Module 2: models whose Chinchilla-optimal data the deck sizes
DATA_MODELS = ("tiny", "llama2-7b", "gpt-30b", "llama2-70b")


def data_volume():
    """Chinchilla-optimal training tokens, and the bytes of their packed token shards, for four models.

    For tiny, llama2-7b, gpt-30b and llama2-70b: fmlab.plan.compute.chinchilla_tokens (about 20 tokens per
    parameter, Hoffmann et al. 2022) of fmlab.plan.compute.param_count, and the bytes of those tokens stored as
    uint16 or uint32 ids (fmlab.data.token_dtype of the model's vocabulary). Two bar charts on log scales.
    """
    from fmlab.data import token_dtype

    params = [compute.param_count(catalog.model(name)) for name in DATA_MODELS]
    tokens = [compute.chinchilla_tokens(p) for p in params]
    dtypes = [token_dtype(catalog.model(name).vocab) for name in DATA_MODELS]
    shard_bytes = [t * (2 if d == "uint16" else 4) for t, d in zip(tokens, dtypes, strict=True)]
    fig = new_figure(10, 4.0)
    left, right = fig.subplots(1, 2)
    names = [f"{n}\n{si(p)} params" for n, p in zip(DATA_MODELS, params, strict=True)]
    for ax, values, colour, text, ylabel in (
            (left, tokens, "#4c72b0", si, "training tokens (log scale)"),
            (right, shard_bytes, "#dd8452", lambda v: si(v, "B"), "bytes of packed token shards (log scale)")):
        log_bars(ax, values, names, colour, text, ylabel)
    left.set_title("Chinchilla-optimal tokens (20 per parameter)", fontsize=10)
    right.set_title(f"as token ids ({', '.join(sorted(set(dtypes)))})", fontsize=10)
    return fig
