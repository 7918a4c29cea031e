"""What loading a checkpoint costs each rank's memory: a full state dict on every rank, the same dict broadcast
from rank 0, and DCP's sharded load (module 8).

    from fmlab.measure.load_memory import measure_load_memory
    rows = measure_load_memory()   # 2 forked gloo processes, about 5 s on 2 cores: one row per way and rank

A sharded model that restarts from a full (consolidated) state dict can run out of memory before its first step:
`torch.load` on every rank materialises the WHOLE model on every rank, and an 80 GB GPU holds a 30B model's shard,
not the model. Two fixes, both in PyTorch:
- `set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))`:
  only rank 0 reads the file; the others pass an empty dict and receive their shards, one tensor at a time;
- a sharded checkpoint (DCP, what the course's engine writes): each rank reads only its own shards.
Each way runs on a model sharded with FSDP2 over the ranks, and the weights it loads are checked equal to the
saved ones. Memory is the growth of this process's peak resident set during the load (Linux: the peak is reset
before each way through /proc/self/clear_refs; elsewhere the measure is None), in MB.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
import torch.distributed as tdist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    set_model_state_dict,
)
from torch.distributed.fsdp import fully_shard

from fmlab.measure.launch import WorldFailed
from fmlab.models import build_model
from fmlab.parallel.forked import run_world
from fmlab.plan.catalog import ModelPreset
from fmlab.plan.compute import param_count

# A model large enough that its bytes stand out from the process's own (about 156 MB in float32: a full load grows
# each rank by about 90% of it, a broadcast's receiving rank and DCP's by under 1%), small enough for a laptop in a few
# seconds: Llama-style, 4 layers of width 768, a vocabulary of 8,192. (Width 1,024, 260 MB, took 2 s more.)
PRESET = ModelPreset("load-demo", "llama", hidden=768, layers=4, heads=8, vocab=8192, seq_len=128,
                     intermediate=2048)
WAYS = ("every rank loads the full file", "broadcast from rank 0", "DCP: each rank reads its shards")


def _status_mb(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset the peak resident set (VmHWM) to the current one; False where the platform cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _same_weights(model, reference: dict[str, torch.Tensor]) -> bool:
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if tdist.get_rank() != 0:
        return True
    return all(torch.equal(full[k], reference[k]) for k in reference)


def run_rank(folder: str | Path) -> dict:
    """On every rank of an initialised gloo world: save the reference model once, then load it each way into a
    freshly sharded model. Returns {way: {"peak_growth_mb", "same_weights"}} and the sizes."""
    folder = Path(folder)
    rank, world = tdist.get_rank(), tdist.get_world_size()
    full_file = folder / "full.pt"
    reference = build_model(PRESET, seed=1).state_dict() if rank == 0 else {}
    if rank == 0:
        torch.save(reference, full_file)
    tdist.barrier()

    def sharded():
        model = build_model(PRESET, seed=2)
        for layer in model.model.layers:
            fully_shard(layer)
        return fully_shard(model)

    model = sharded()  # the sharded checkpoint of the same weights, as the engine writes it
    set_model_state_dict(model, torch.load(full_file, weights_only=True) if rank == 0 else {},
                         options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    dcp.save({"model": model.state_dict()}, checkpoint_id=str(folder / "dcp"))
    del model
    out: dict = {"model_mb": param_count(PRESET) * 4 / 2**20, "world": world, "rank": rank}  # float32 weights
    for way in WAYS:
        model = sharded()
        tdist.barrier()
        measurable = _reset_peak()
        before = _status_mb("VmRSS")
        if way == WAYS[0]:
            state = torch.load(full_file, weights_only=True)
            set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True))
        elif way == WAYS[1]:
            state = torch.load(full_file, weights_only=True) if rank == 0 else {}
            set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True,
                                                                         broadcast_from_rank0=True))
        else:
            state = {"model": model.state_dict()}
            dcp.load(state, checkpoint_id=str(folder / "dcp"))
        peak = _status_mb("VmHWM")
        growth = (peak - before) if measurable and peak is not None and before is not None else None
        del state
        out[way] = {"peak_growth_mb": growth, "same_weights": _same_weights(model, reference)}
        del model
        tdist.barrier()
    return out


def measure_load_memory(folder: str | Path | None = None, world_size: int = 2) -> list[dict]:
    """Run the three ways on `world_size` gloo processes forked from this one (fmlab.parallel.forked: no imports to
    pay again, about 5 s on 2 cores); one row per way and rank. WorldFailed names the rank that failed and why."""
    with tempfile.TemporaryDirectory(prefix="fmlab-load-") as tmp:
        where = Path(folder or tmp)
        (where / "checkpoints").mkdir(parents=True, exist_ok=True)
        world = run_world(lambda rank, size: run_rank(where / "checkpoints"), where / "logs", world_size,
                          timeout=300)
        if not world.ok:
            raise WorldFailed(f"load_memory on {world_size} processes: {world.failure()}")
    rows = []
    for r in world.results:
        for way in WAYS:
            rows.append({"way": way, "rank": r["rank"], "peak growth (MB)": r[way]["peak_growth_mb"],
                         "model (MB)": round(r["model_mb"], 1), "same weights": r[way]["same_weights"]})
    return rows
