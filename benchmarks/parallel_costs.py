"""What the parallel engine costs on this machine: the transformers import per process, one spawned world,
and the activation memory that checkpointing and offloading save (measured on a GPU when there is one).

Run: .venv/bin/python benchmarks/parallel_costs.py [--imports 3] [--world 2] [--seq-len 512] [--json out.json]

1. `--imports` fresh Python processes each time `import transformers` plus the Llama and OPT model classes
   (what every spawned worker pays before it can build a model).
2. One world of `--world` gloo processes (fmlab.measure.launch.run_worker_task) running the parity check of DDP
   and FSDP on `tiny`: wall seconds, and the import seconds each worker reported.
3. Activation memory for `tiny` on a batch of 4 x `--seq-len` tokens, with no, selective and full
   checkpointing, each with and without offloading: the bytes autograd keeps on the device and moves to the host
   (saved-tensor hooks; on a CPU host and device are one memory, so these are what WOULD leave a GPU), and on
   CUDA also the real peak allocated memory of forward + backward (torch.cuda.max_memory_allocated).
Figures depend on the machine and its load; they are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

IMPORT_SNIPPET = ("import time; t = time.perf_counter(); import transformers; "
                  "from transformers import LlamaForCausalLM, OPTForCausalLM; print(time.perf_counter() - t)")


def import_seconds(repeats: int) -> list[float]:
    # torch is imported first so that only transformers' own cost is timed
    code = "import torch; " + IMPORT_SNIPPET
    return [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
                  .stdout.strip()) for _ in range(repeats)]


def world_seconds(world: int) -> dict:
    from fmlab.measure.launch import run_worker_task

    layouts = [{"name": "ddp"}, {"name": "fsdp", "sharding": "full"}]
    results = run_worker_task("parity", world, {"presets": ["tiny"], "layouts": layouts}, progress=False)
    return {"world": world, "wall_seconds": results[0]["seconds"],
            "worker_import_seconds": [round(r["import_seconds"], 2) for r in results],
            "max_grad_diff": max(r["result"]["tiny"][n]["max_grad_diff"] for r in results for n in ("ddp", "fsdp"))}


def activation_memory(seq_len: int) -> list[dict]:
    import torch

    from fmlab.measure.parity import make_tokens
    from fmlab.models import build_model
    from fmlab.parallel.activations import (
        apply_activation_checkpointing,
        apply_activation_offloading,
        saved_bytes_for_backward,
    )

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tokens = make_tokens(512, 4, seq_len).to(device)
    batch = {"input_ids": tokens, "labels": tokens}
    rows = []
    for checkpointing in ("none", "selective", "full"):
        for offload in (False, True):
            model = apply_activation_checkpointing(build_model("tiny").to(device), checkpointing)
            if offload:
                apply_activation_offloading(model)
            counted = saved_bytes_for_backward(model, batch)
            row = {"checkpointing": checkpointing, "offload": offload,
                   "kept_on_device_MiB": counted["on_device"] / 2**20, "offloaded_MiB": counted["offloaded"] / 2**20}
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                start = time.perf_counter()
                model(**batch).loss.backward()
                torch.cuda.synchronize()
                row["cuda_peak_above_weights_MiB"] = (torch.cuda.max_memory_allocated() - base) / 2**20
                row["step_ms"] = 1000 * (time.perf_counter() - start)
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imports", type=int, default=3, help="fresh processes timing the transformers import")
    parser.add_argument("--world", type=int, default=2, help="gloo processes in the spawned world (0: skip)")
    parser.add_argument("--seq-len", type=int, default=512, help="tokens per sequence for the activation figures")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, python {sys.version.split()[0]}")
    out: dict = {}
    if args.imports:
        secs = import_seconds(args.imports)
        out["transformers_import_seconds"] = secs
        print(f"transformers import per process: median {statistics.median(secs):.2f} s  ({', '.join(f'{s:.2f}' for s in secs)})")
    if args.world:
        w = world_seconds(args.world)
        out["world"] = w
        print(f"world of {w['world']} processes (DDP + FSDP parity on tiny): {w['wall_seconds']:.1f} s wall; "
              f"worker imports {w['worker_import_seconds']} s; max |grad diff| {w['max_grad_diff']:.1e}")
    rows = activation_memory(args.seq_len)
    out["activations"] = rows
    print(f"\nactivation memory, tiny, batch 4 x {args.seq_len} tokens:")
    for r in rows:
        extra = "".join(f"  {k} {v:8.2f}" for k, v in r.items() if k in ("cuda_peak_above_weights_MiB", "step_ms"))
        print(f"  {r['checkpointing']:<9} offload={r['offload']!s:<5}  kept {r['kept_on_device_MiB']:8.2f} MiB  "
              f"offloaded {r['offloaded_MiB']:8.2f} MiB{extra}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
