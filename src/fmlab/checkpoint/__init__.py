"""Module 8's checkpoints: sharded saves, committed atomically, resumed exactly, exported for Hugging Face.

    from fmlab.checkpoint import Checkpointer, export_hf, latest
    ckpt = Checkpointer("/opt/ml/checkpoints", keep_last=3)
    ckpt.save(step, model, optimizer, scheduler, sampler)      # every rank calls it (fmlab.train's loop does)
    state = ckpt.resume(model, optimizer, scheduler, sampler)  # the newest complete checkpoint, or None
    latest("/opt/ml/checkpoints")                              # read without a process group: a Path, or None
    export_hf(model, "/opt/ml/model")                          # config.json + model.safetensors
    from fmlab.checkpoint import measure_stall                 # notebook 08: synchronous against async saves

A floor below fmlab.train: the training loop imports this subpackage, never the other way round.

Files, in the order a run uses them:
- checkpointer.py  Checkpointer: sharded DCP saves, atomic commit, keep-last-N, resume, async saves
- intact.py        newest_intact: the newest checkpoint whose files check out; damaged newer ones set aside
- folder.py        which checkpoints a folder holds: names, the COMPLETE marker, verification, the newest
- format.py        what a checkpoint file holds (RNG state, JSON, the safe DCP reader), its checks and
                   CheckpointError
- ranks.py         rank, world, barrier, gather for the checkpoint code (a world of 1 needs no process group)
- export.py        export_hf: the trained model as a Hugging Face folder (config.json + model.safetensors)
- stall.py         measure_stall: how long a synchronous or asynchronous save stalls training (notebook 08,
                   benchmarks/checkpoint_stall.py)

The names below are loaded on first use, so importing `fmlab.checkpoint` loads neither torch nor DCP.
"""

import importlib

_EXPORTS = {"Checkpointer": "checkpointer", "PendingSave": "checkpointer", "newest_intact": "intact",
            "CheckpointError": "format",
            "CheckpointInfo": "folder", "INCOMPLETE": "folder", "complete_checkpoints": "folder", "damage": "folder",
            "latest": "folder", "read_marker": "folder", "verify": "folder",
            "export_hf": "export",
            "measure_stall": "stall", "stall_rows": "stall"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"fmlab.checkpoint.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'fmlab.checkpoint' has no attribute {name!r}")
