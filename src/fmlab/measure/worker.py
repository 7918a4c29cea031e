"""The tasks a spawned world runs for the notebooks and the distributed tests; one JSON file per rank.

    torchrun --nproc-per-node 4 -m fmlab.measure.worker parity --args args.json --out results/

(fmlab.measure.launch.run_worker_task builds that command.) Tasks:
  parity   loss and gradients of each layout against the single-process step, for each preset
  memory   bytes of parameters, gradients and optimizer state held by this rank after one AdamW step
  tp_mlp   the hand-written column/row-parallel MLP (fmlab.parallel.linear) against the plain MLP
  suite    several of the above in one world: {"parity": {...}, "memory": {...}}
Every result also carries `import_seconds`: what importing transformers' model code cost this process.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch

_start = time.perf_counter()
import transformers  # noqa: E402,F401
from transformers import LlamaForCausalLM, OPTForCausalLM  # noqa: E402,F401

IMPORT_SECONDS = time.perf_counter() - _start

import torch.distributed as tdist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from fmlab.measure.parity import (  # noqa: E402
    compare,
    fsdp1_hybrid_control,
    local_rows,
    make_tokens,
    parallel_step,
    reference_step,
)
from fmlab.measure.state_bytes import measured_state_bytes, predicted_state_bytes  # noqa: E402
from fmlab.models import build_model  # noqa: E402
from fmlab.parallel import ParallelConfig, init_distributed, parallelize  # noqa: E402
from fmlab.parallel.linear import ColumnParallelLinear, RowParallelLinear  # noqa: E402
from fmlab.plan import catalog  # noqa: E402

_done = 0
_total = 0


def _progress(dist) -> None:
    """Rank 0 reports one more finished check (run_worker_task turns these lines into a progress bar)."""
    global _done
    _done += 1
    if dist.rank == 0:
        print(f"fmlab-progress {_done}/{max(_total, _done)}", flush=True)


def count_checks(task: str, args: dict) -> int:
    if task == "parity":
        return len(args["presets"]) * len(args["layouts"])
    if task == "memory":
        return len(args["layouts"])
    if task == "suite":
        return sum(count_checks(t, a) for t, a in args.items())
    return 1


def task_parity(args: dict) -> dict:
    """For each preset and layout: {loss, ref_loss, loss_diff, max_grad_diff, max_grad}."""
    seed, batch, seq = args.get("seed", 0), args.get("global_batch", 4), args.get("seq_len", 32)
    layouts = args["layouts"]
    out: dict = {}
    for preset in args["presets"]:
        tokens = make_tokens(catalog.model(preset).vocab, batch, seq, seed)
        ref = reference_step(preset, tokens, seed)
        out[preset] = {}
        for spec in layouts:
            spec = dict(spec)
            name, control, no_mesh = spec.pop("name"), spec.pop("control", None), spec.pop("no_mesh", False)
            cfg = ParallelConfig(**spec)
            dist = init_distributed(cfg)
            if no_mesh:  # what init_distributed gives plain DDP on SMDDP, whose backend cannot make subgroups
                dist = dataclasses.replace(dist, mesh=None)
            wrap = fsdp1_hybrid_control if control == "fsdp1_hybrid" else None
            out[preset][name] = compare(ref, parallel_step(preset, cfg, dist, tokens, seed, wrap=wrap))
            _progress(dist)
    return out


def task_memory(args: dict) -> dict:
    """Per layout: this rank's measured bytes of weights, gradients and AdamW state after one step, and
    the planner's prediction. With "delayed_init", the model is built on the meta device and only the local
    shards are ever allocated (then initialised in place)."""
    preset = args["preset"]
    tokens = make_tokens(catalog.model(preset).vocab, args.get("global_batch", 4), args.get("seq_len", 32))
    out = {}
    for spec in args["layouts"]:
        spec = dict(spec)
        name, delayed = spec.pop("name"), spec.pop("delayed_init", False)
        cfg = ParallelConfig(**spec)
        dist = init_distributed(cfg)
        if delayed:
            model = parallelize(build_model(preset, args.get("seed", 0), device="meta"), cfg, dist)
            model.to_empty(device=dist.device)
            with torch.no_grad():
                model.init_weights()  # transformers' initialisation, applied to the local shards
        else:
            model = parallelize(build_model(preset, args.get("seed", 0)), cfg, dist)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        rows = local_rows(tokens, dist)
        loss = model(input_ids=rows, labels=rows).loss
        loss.backward()
        optimizer.step()
        out[name] = {"measured": measured_state_bytes(model, optimizer),
                     "predicted": predicted_state_bytes(preset, cfg, dist.world_size),
                     "loss": loss.item(), "finite": bool(torch.isfinite(loss).item())}
        _progress(dist)
    return out


def task_tp_mlp(args: dict) -> dict:
    """Column- then row-parallel MLP against nn.Linear: largest differences of output and gradients."""

    dist = init_distributed(ParallelConfig())
    hidden, width = args.get("hidden", 16), args.get("width", 64)
    torch.manual_seed(args.get("seed", 0))
    up, down = nn.Linear(hidden, width), nn.Linear(width, hidden)
    x = torch.randn(args.get("tokens", 8), hidden)
    x_plain, x_par = x.clone().requires_grad_(), x.clone().requires_grad_()
    y = down(F.gelu(up(x_plain)))
    y.square().sum().backward()
    col = ColumnParallelLinear.from_linear(up, dist.rank, dist.world_size)
    row = RowParallelLinear.from_linear(down, dist.rank, dist.world_size)
    y_par = row(F.gelu(col(x_par)))
    y_par.square().sum().backward()
    rows = slice(dist.rank * width // dist.world_size, (dist.rank + 1) * width // dist.world_size)
    _progress(dist)
    return {
        "output_diff": (y_par - y).abs().max().item(),
        "input_grad_diff": (x_par.grad - x_plain.grad).abs().max().item(),
        "up_grad_diff": (col.weight.grad - up.weight.grad[rows]).abs().max().item(),
        "down_grad_diff": (row.weight.grad - down.weight.grad[:, rows]).abs().max().item(),
        "local_up_shape": list(col.weight.shape), "full_up_shape": list(up.weight.shape),
        "local_down_shape": list(row.weight.shape), "full_down_shape": list(down.weight.shape),
    }


def task_suite(args: dict) -> dict:
    """Several tasks in one world (each process pays the transformers import once): {task: its args}."""
    return {task: TASKS[task](task_args) for task, task_args in args.items()}


TASKS = {"parity": task_parity, "memory": task_memory, "tp_mlp": task_tp_mlp, "suite": task_suite}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", choices=list(TASKS))
    parser.add_argument("--args", type=Path, required=True, help="JSON file with the task's arguments")
    parser.add_argument("--out", type=Path, required=True, help="folder for rank<r>.json")
    ns = parser.parse_args(argv)
    global _total
    args = json.loads(ns.args.read_text())
    _total = count_checks(ns.task, args)
    result = TASKS[ns.task](args)
    result = {"result": result, "import_seconds": IMPORT_SECONDS,
              "rank": tdist.get_rank() if tdist.is_initialized() else 0}
    (ns.out / f"rank{result['rank']}.json").write_text(json.dumps(result))
    if tdist.is_initialized():
        tdist.barrier()
        tdist.destroy_process_group()


if __name__ == "__main__":
    main()
