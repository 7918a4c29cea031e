"""Benchmark: data-preparation throughput (tokens per second) for 1, 2 and 4 share-nothing workers.

    .venv/bin/python benchmarks/data_throughput.py                 # the whole shipped corpus, best of 3
    .venv/bin/python benchmarks/data_throughput.py --workers 1 2 4 8 --repeats 1 --max-mb 1 --json out.json

Trains the course tokenizer (vocabulary 512) on the corpus once and reports how long that took, then
tokenizes, packs and shards the corpus with each worker count (fmlab.data.throughput.measure_workers) and
prints seconds, tokens per second and speed-up, and whether every run wrote the same bytes. The speed-up
cannot exceed the number of free cores: note the machine's cores and load, printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from fmlab.data import corpus_slice, train_tokenizer
from fmlab.data.throughput import measure_workers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], help="worker counts to time")
    parser.add_argument("--repeats", type=int, default=3, help="runs per worker count; the best is kept")
    parser.add_argument("--max-mb", type=float, default=None, help="use a slice of the corpus (default: all)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=512)
    parser.add_argument("--json", default="", help="also write the figures to this JSON file")
    args = parser.parse_args()

    files = corpus_slice(args.max_mb * 1e6 if args.max_mb else None)
    megabytes = sum(f.stat().st_size for f in files) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        tokenizer = train_tokenizer(files, args.vocab_size, Path(tmp) / "tokenizer")
        train_seconds = time.perf_counter() - start
        rows = measure_workers(files, args.workers, tokenizer, tmp, seq_len=args.seq_len, repeats=args.repeats)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"corpus: {len(files)} files, {megabytes:.2f} MB; {rows[0]['tokens']:,} tokens; {rows[0]['shards']} shards")
    print(f"machine: {os.cpu_count()} cores, load average {load:.1f}, {platform.processor() or platform.machine()}")
    print(f"tokenizer training (vocabulary {args.vocab_size}): {train_seconds:.2f} s")
    print(f"\n{'workers':>7} {'seconds':>8} {'tokens/s':>12} {'speed-up':>9}  same bytes")
    for r in rows:
        print(f"{r['workers']:>7} {r['seconds']:>8.2f} {r['tokens_per_second']:>12,.0f} {r['speedup']:>8.2f}x  "
              f"{'yes' if r['identical'] else 'NO'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"files": len(files), "megabytes": megabytes, "cores": os.cpu_count(),
                                               "load_average": load, "tokenizer_train_seconds": train_seconds,
                                               "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
