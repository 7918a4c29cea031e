"""How long HF <-> NxD conversion takes and how big the shards are, for locally built Llamas (no download).

Run: .venv/bin/python benchmarks/bench_neuron_convert.py [--repeats 3]

Prints one row per (model, layout): seconds for hf-to-nxd and nxd-to-hf (best of --repeats), the number of
shard files and their total bytes, next to the Hugging Face safetensors size. Timings depend on the machine
and its load; they are reported, never asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from functools import partial
from pathlib import Path

from fmlab.models import build_model
from fmlab.neuron import hf_to_nxd, nxd_to_hf
from fmlab.plan import catalog

MODELS = {
    "tiny (3 layers, GQA 4/2)": dataclasses.replace(catalog.model("tiny"), layers=3),
    "small (8 layers, h 512, GQA 8/2)": dataclasses.replace(catalog.model("tiny"), name="small", hidden=512, layers=8,
                                                              heads=8, kv_heads=2, intermediate=1408, vocab=4096),
}
LAYOUTS = [dict(tp=2, pp=2, layout="current"), dict(tp=4, pp=2, layout="legacy", qkv_linear=True,
                                                    kv_size_multiplier=2)]


def best_of(repeats: int, run) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'model':<34} {'layout':<34} {'to NxD s':>8} {'to HF s':>8} {'files':>5} {'NxD bytes':>11} {'HF bytes':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, preset in MODELS.items():
            hf_dir = Path(tmp) / preset.name
            build_model(preset, seed=0).save_pretrained(hf_dir)
            hf_bytes = (hf_dir / "model.safetensors").stat().st_size
            for i, options in enumerate(LAYOUTS):
                out, back = Path(tmp) / f"{preset.name}-{i}", Path(tmp) / f"{preset.name}-{i}-hf"
                to_nxd, report = best_of(args.repeats, partial(hf_to_nxd, hf_dir, out, dtype="fp32", overwrite=True,
                                                               **options))
                to_hf, _ = best_of(args.repeats, partial(nxd_to_hf, out, back, config=hf_dir))
                shards = [f for f in report.files if f.suffix == ".pt"]
                label = ", ".join(f"{k}={v}" for k, v in options.items())
                print(f"{name:<34} {label[:34]:<34} {to_nxd:8.3f} {to_hf:8.3f} {len(shards):5d} "
                      f"{sum(f.stat().st_size for f in shards):11,d} {hf_bytes:10,d}")


if __name__ == "__main__":
    main()
