"""Serving latency and throughput of the exported tiny Llama behind `transformers serve`, on this machine.

Run: .venv/bin/python benchmarks/bench_serving.py [--levels 1 4 16 32] [--max-tokens 32] [--steps 200] [--write]

Trains the course's tiny Llama (one process, with a checkpoint every 25 steps, held-out loss of each), exports
it (fmlab.serve.export_model), starts the server twice (continuous batching, then one request at a time) and
load-tests each at every concurrency level with streaming requests (fmlab.serve.loadtest): TTFT, latency
p50/p95 and tokens/s. Prints one table per setting, the machine and its load average. `--write` stores the
figures in src/fmlab/serve/measured.json, which the slides' figures (eval_curve, serving_latency) draw.
Timings depend on the machine and its load; they are reported, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from fmlab.serve import cloze, export, heldout, loadtest, server
from fmlab.serve.serving_figures import MEASURED


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16, 32])
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--write", action="store_true", help=f"store the figures in {MEASURED}")
    args = ap.parse_args()

    from fmlab.data import course_dataset
    from fmlab.train.loop import TrainConfig, train

    work = Path(tempfile.mkdtemp(prefix="fmlab-bench-serving-"))
    data = course_dataset(seq_len=128, vocab_size=512, validation_units=2)
    cfg = TrainConfig(model="tiny", data=str(data), max_steps=args.steps, micro_batch=16, lr=1e-2, warmup_steps=10,
                      log_every=5, tensorboard=False, checkpoint_dir=str(work / "ck"), checkpoint_every=25,
                      keep_checkpoints=args.steps)
    with contextlib.redirect_stdout(io.StringIO()):
        run = train(cfg)
    baseline = heldout.untrained_loss("tiny", data)
    curve = heldout.checkpoint_curve(work / "ck", "tiny", data)
    model = heldout.load_checkpoint_model(curve[-1].path, "tiny")
    folder = export.export_model(model, work / "export", data / "tokenizer")
    prompts = [item["context"] for item in cloze.read_items()[:64]]

    machine = {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
               "load_average": [round(x, 2) for x in os.getloadavg()], "date": time.strftime("%Y-%m-%d %H:%M")}
    print(f"machine: {machine}")
    print(f"held-out perplexity after {args.steps} steps: {curve[-1].perplexity:.2f} (untrained "
          f"{2.718281828 ** baseline:.0f})")
    results = {}
    for label, batching in (("continuous batching", True), ("one request at a time", False)):
        with server.LocalServer(folder, continuous_batching=batching) as srv:
            sweep = loadtest.sweep(srv, prompts, tuple(args.levels), args.max_tokens)
            started = srv.started_s
        print(f"\n{label} (server up in {started:.1f} s):")
        print(loadtest.summary_table(sweep).round(1).to_string())
        results[label] = [r.row() for r in sweep]
    assert not server.running_servers()
    if args.write:
        MEASURED.write_text(json.dumps({
            "machine": machine, "server": server.SERVER, "max_tokens": args.max_tokens, "steps": args.steps,
            "train_losses": {str(k): round(v, 4) for k, v in run.losses.items()},
            "heldout_losses": {str(c.step): round(c.loss, 4) for c in curve}, "baseline_loss": round(baseline, 4),
            "serving": results}, indent=1) + "\n")
        print(f"\nwrote {MEASURED}")


if __name__ == "__main__":
    main()
