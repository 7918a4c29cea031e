"""Load-test an OpenAI-compatible server: concurrent streaming requests, time to first token, tokens/s, p50/p95.

    results = sweep(server, prompts, levels=(1, 4, 16), max_tokens=32)
    summary_table(results)        # one row per concurrency: TTFT p50/p95, latency p50/p95, tokens/s
    plot_sweep(results)           # the latency plot of notebook 10 and its slides

A level of concurrency C runs C workers (asyncio tasks) that each send streaming /v1/completions requests one
after another (a closed loop: a user who waits for the answer before asking again) until `requests` have been
sent. For each request the client records the time to the first streamed token (TTFT: queueing + prefill), the
time to the last (latency), and the tokens generated (the `usage` of the final event, else the events counted).
Percentiles are nearest-rank over the requests of a level; throughput is all tokens generated over the level's
wall clock; the decode rate of one request is (tokens - 1) / (latency - TTFT). Timings depend on the machine and
its load: notebooks and the benchmark report them, tests never assert them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import time
from dataclasses import dataclass, field

import pandas as pd


@dataclass(frozen=True)
class RequestTiming:
    """One streamed request, as the client saw it."""

    ttft_s: float
    latency_s: float
    tokens: int
    error: str = ""

    @property
    def decode_tokens_per_s(self) -> float:
        decode = self.latency_s - self.ttft_s
        return (self.tokens - 1) / decode if self.tokens > 1 and decode > 0 else math.nan


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of `values`: a value that was measured, never interpolated."""
    if not values:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"a percentile is between 0 and 100, not {q}")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass
class LevelResult:
    """Every request of one concurrency level."""

    concurrency: int
    wall_s: float
    timings: list[RequestTiming] = field(default_factory=list)

    @property
    def ok(self) -> list[RequestTiming]:
        return [t for t in self.timings if not t.error]

    @property
    def errors(self) -> list[str]:
        return [t.error for t in self.timings if t.error]

    def p(self, what: str, q: float) -> float:
        return percentile([getattr(t, what) for t in self.ok], q)

    @property
    def tokens_per_s(self) -> float:
        """Throughput: every token generated at this level over its wall clock."""
        return sum(t.tokens for t in self.ok) / self.wall_s if self.wall_s else math.nan

    def row(self) -> dict:
        decode = [t.decode_tokens_per_s for t in self.ok if not math.isnan(t.decode_tokens_per_s)]
        return {"concurrency": self.concurrency, "requests": len(self.ok), "errors": len(self.errors),
                "TTFT p50 (ms)": 1000 * self.p("ttft_s", 50), "TTFT p95 (ms)": 1000 * self.p("ttft_s", 95),
                "latency p50 (ms)": 1000 * self.p("latency_s", 50), "latency p95 (ms)": 1000 * self.p("latency_s", 95),
                "tokens/s (all requests)": self.tokens_per_s,
                "tokens/s per request": sum(decode) / len(decode) if decode else math.nan}


async def _one(client, model: str, prompt: str, max_tokens: int) -> RequestTiming:
    start = time.perf_counter()
    first, pieces, usage = None, 0, None
    try:
        stream = await client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens, stream=True)
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].text:
                if first is None:
                    first = time.perf_counter() - start
                pieces += 1
            if getattr(chunk, "usage", None) is not None:
                usage = chunk.usage.completion_tokens
    except Exception as e:  # a failed request is counted, not fatal: the table reports errors per level
        return RequestTiming(math.nan, time.perf_counter() - start, 0, f"{type(e).__name__}: {e}")
    latency = time.perf_counter() - start
    return RequestTiming(first if first is not None else latency, latency, usage if usage is not None else pieces)


async def _level(server, prompts: list[str], concurrency: int, requests: int, max_tokens: int) -> LevelResult:
    client = server.client(asynchronous=True)
    queue = list(range(requests))
    timings: list[RequestTiming] = []

    async def worker():
        while queue:
            i = queue.pop()
            timings.append(await _one(client, server.model, prompts[i % len(prompts)], max_tokens))

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - start
    await client.close()
    return LevelResult(concurrency, wall, timings)


def _run(coro):
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # inside Jupyter an event loop is already running: use a thread of its own
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def run_level(server, prompts: list[str], concurrency: int, requests: int | None = None,
              max_tokens: int = 32) -> LevelResult:
    """`requests` (default: 2 x concurrency, at least 8) streamed requests, `concurrency` at a time."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, not {concurrency}")
    if not prompts:
        raise ValueError("give at least one prompt")
    for prompt in set(prompts):
        server.check_prompt(prompt, max_tokens)  # PromptTooLong before any load is sent
    return _run(_level(server, prompts, concurrency, requests or max(8, 2 * concurrency), max_tokens))


def sweep(server, prompts: list[str], levels=(1, 4, 16), max_tokens: int = 32, warmup: int = 2) -> list[LevelResult]:
    """One LevelResult per concurrency level, after `warmup` requests that are not counted."""
    if warmup:
        run_level(server, prompts, 1, warmup, max_tokens)
    return [run_level(server, prompts, c, None, max_tokens) for c in levels]


def summary_table(results: list[LevelResult]):
    return pd.DataFrame([r.row() for r in results]).set_index("concurrency")


def plot_sweep(results_by_label: dict[str, list[LevelResult]], ax=None):
    """Latency p50/p95 and throughput against concurrency, one line per server setting; returns the axes."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    left, right = ax
    for label, results in results_by_label.items():
        c = [r.concurrency for r in results]
        p50 = [1000 * r.p("latency_s", 50) for r in results]
        p95 = [1000 * r.p("latency_s", 95) for r in results]
        line, = left.plot(c, p95, "o-", label=f"{label}: p95")
        left.plot(c, p50, "s--", color=line.get_color(), alpha=0.7, label=f"{label}: p50")
        left.plot(c, [1000 * r.p("ttft_s", 95) for r in results], ":", color=line.get_color(), alpha=0.7,
                  label=f"{label}: TTFT p95")
        right.plot(c, [r.tokens_per_s for r in results], "o-", color=line.get_color(), label=label)
    for a in (left, right):
        a.set_xscale("log", base=2)
        a.set_xticks([r.concurrency for r in next(iter(results_by_label.values()))])
        a.set_xticklabels([str(r.concurrency) for r in next(iter(results_by_label.values()))])
        a.set_xlabel("concurrent requests")
    left.set_ylabel("ms per request")
    left.set_title("latency (p50, p95) and time to first token")
    right.set_ylabel("tokens/s, all requests")
    right.set_title("throughput")
    left.legend(fontsize=7)
    right.legend(fontsize=8)
    return ax


__all__ = ["LevelResult", "RequestTiming", "percentile", "plot_sweep", "run_level", "summary_table", "sweep"]
