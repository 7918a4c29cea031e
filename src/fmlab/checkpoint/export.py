"""Export a trained model as a Hugging Face folder (config.json + model.safetensors) that `from_pretrained` loads.

    export_hf(model, "/opt/ml/model")   # every rank calls it (sharded weights are gathered); rank 0 writes
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

from fmlab.checkpoint.format import CheckpointError
from fmlab.checkpoint.ranks import barrier, rank


def _hf_model(model):
    """The transformers model inside a DDP wrapper (FSDP2 and TP change the model in place)."""
    inner = getattr(model, "module", model)
    if not hasattr(inner, "config"):
        raise CheckpointError(f"export_hf needs a transformers model (with .config), got {type(inner).__name__}")
    return inner


def export_hf(model, out_dir: str | Path, dtype: torch.dtype | None = None) -> Path | None:
    """Write `model` as a Hugging Face folder (config.json + model.safetensors) that `from_pretrained` loads.

    A collective: every rank calls it (sharded weights are gathered); rank 0 writes and gets the folder back,
    the other ranks get None. `dtype` (e.g. torch.bfloat16) converts the floating-point weights on the way out.
    """
    hf = _hf_model(model)
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    out = Path(out_dir)
    if rank() != 0:
        barrier()
        return None
    tied = getattr(hf, "_tied_weights_keys", None) or {}
    if getattr(hf.config, "tie_word_embeddings", False):
        for key in tied:  # safetensors refuses shared storage; transformers ties them again on load
            state.pop(key, None)
    weights = {k: (v.to(dtype) if dtype is not None and v.is_floating_point() else v).contiguous().cpu()
               for k, v in state.items()}
    out.mkdir(parents=True, exist_ok=True)
    partial = out / "model.safetensors.partial"
    save_file(weights, str(partial), metadata={"format": "pt"})
    os.replace(partial, out / "model.safetensors")
    config = hf.config
    if dtype is not None:
        config.dtype = dtype
    config.save_pretrained(out)
    barrier()
    return out
